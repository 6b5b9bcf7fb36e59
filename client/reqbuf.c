// The request buffer of libconvd: packed bytes as segments, big payloads
// referenced rather than copied (see client-internal.h).

#include "client/client-internal.h"

#include <stdlib.h>
#include <string.h>

void cd_client_reqbuf_init(cd_client_reqbuf *rb) {
    memset(rb, 0, sizeof *rb);
    rb->send_fd = -1;
}

void cd_client_reqbuf_free(cd_client_reqbuf *rb) {
    free(rb->buf);
    free(rb->segs);
    memset(rb, 0, sizeof *rb);
}

// Appends an empty segment; returns it or NULL on OOM.
static struct cd_client_seg *reqbuf_seg(cd_client_reqbuf *rb) {
    if (rb->nsegs == rb->segcap) {
        size_t cap = rb->segcap ? rb->segcap * 2 : 8;
        struct cd_client_seg *s = realloc(rb->segs, cap * sizeof *s);
        if (!s) return NULL;
        rb->segs = s;
        rb->segcap = cap;
    }
    struct cd_client_seg *s = &rb->segs[rb->nsegs++];
    memset(s, 0, sizeof *s);
    return s;
}

int cd_client_reqbuf_write(void *data, const char *buf, size_t len) {
    cd_client_reqbuf *rb = data;
    if (rb->oom) return -1;
    if (len == 0) return 0;
    struct cd_client_seg *last = rb->nsegs ? &rb->segs[rb->nsegs - 1] : NULL;
    if (len >= CD_CLIENT_ZEROCOPY_MIN) {
        struct cd_client_seg *s = reqbuf_seg(rb);
        if (!s) goto oom;
        s->external = 1;
        s->ptr = buf;
        s->len = len;
    } else {
        if (rb->len + len > rb->cap) {
            size_t cap = rb->cap ? rb->cap : 256;
            while (cap < rb->len + len) cap *= 2;
            char *nb = realloc(rb->buf, cap);
            if (!nb) goto oom;
            rb->buf = nb;
            rb->cap = cap;
        }
        memcpy(rb->buf + rb->len, buf, len);
        if (last && !last->external) {
            last->len += len; // owned bytes are contiguous: extend
        } else {
            struct cd_client_seg *s = reqbuf_seg(rb);
            if (!s) goto oom;
            s->off = rb->len;
            s->len = len;
        }
        rb->len += len;
    }
    rb->total += len;
    return 0;
oom:
    rb->oom = 1;
    return -1;
}
