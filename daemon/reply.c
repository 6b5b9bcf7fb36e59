// A response packed for writev (see reply.h).
#include "daemon/reply.h"

#include "core/errors.h"

#include <string.h>

void cd_reply_init(cd_reply *r) {
    memset(r, 0, sizeof *r);
    msgpack_sbuffer_init(&r->head);
}

void cd_reply_destroy(cd_reply *r) {
    msgpack_sbuffer_destroy(&r->head);
    cd_reply_init(r);
}

void cd_reply_clear(cd_reply *r) {
    msgpack_sbuffer_clear(&r->head);
    r->nref = 0;
    r->total = 0;
}

int cd_reply_write(void *data, const char *buf, size_t len) {
    cd_reply *r = data;
    if (msgpack_sbuffer_write(&r->head, buf, len) != 0) return -1;
    r->total += len;
    return 0;
}

int cd_reply_bin_body(msgpack_packer *pk, const void *data, size_t len) {
    if (pk->callback == cd_reply_write && len >= CD_REPLY_REF_MIN) {
        cd_reply *r = pk->data;
        if (r->nref < CD_REPLY_MAX_REFS) {
            r->ref[r->nref].at = r->head.size;
            r->ref[r->nref].ptr = data;
            r->ref[r->nref].len = len;
            r->nref++;
            r->total += len;
            return 0;
        }
    }
    if (len && msgpack_pack_bin_body(pk, data, len) != 0) return CD_ENOMEM;
    return 0;
}

// Adds [p, p + len) minus what skip still covers; returns the new count.
static int iov_add(struct iovec *iov, int n, const char *p, size_t len, size_t *skip) {
    if (*skip >= len) {
        *skip -= len;
        return n;
    }
    iov[n].iov_base = (void *)(p + *skip);
    iov[n].iov_len = len - *skip;
    *skip = 0;
    return n + 1;
}

int cd_reply_iov(const cd_reply *r, size_t skip, struct iovec *iov) {
    int n = 0;
    size_t from = 0; // head bytes already placed
    for (int i = 0; i < r->nref; i++) {
        n = iov_add(iov, n, r->head.data + from, r->ref[i].at - from, &skip);
        from = r->ref[i].at;
        n = iov_add(iov, n, r->ref[i].ptr, r->ref[i].len, &skip);
    }
    return iov_add(iov, n, r->head.data ? r->head.data + from : "", r->head.size - from, &skip);
}

int cd_reply_copy_to(const cd_reply *r, msgpack_sbuffer *sb) {
    struct iovec iov[CD_REPLY_MAX_IOV];
    int n = cd_reply_iov(r, 0, iov);
    for (int i = 0; i < n; i++)
        if (msgpack_sbuffer_write(sb, iov[i].iov_base, iov[i].iov_len) != 0) return CD_ENOMEM;
    return 0;
}
