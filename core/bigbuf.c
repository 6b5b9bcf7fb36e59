// Big buffers kept for the next request or message (see bigbuf.h).
#include "core/bigbuf.h"

#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>

enum {
    BIGBUF_SLOTS = 4, // buffers kept at most
};
#define BIGBUF_MIN ((size_t)1 << 20)     // smaller ones come from malloc's own heap
#define BIGBUF_TOTAL ((size_t)256 << 20) // bytes kept at most, by default

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static void *kept[BIGBUF_SLOTS];
static size_t kept_size[BIGBUF_SLOTS]; // usable bytes of kept[i]
static size_t kept_total;
static size_t kept_limit = BIGBUF_TOTAL;

void cd_bigbuf_set_limit(size_t bytes) {
    pthread_mutex_lock(&lock);
    kept_limit = bytes < BIGBUF_TOTAL ? bytes : BIGBUF_TOTAL;
    pthread_mutex_unlock(&lock);
}

void *cd_bigbuf_get(size_t bytes) {
    if (bytes >= BIGBUF_MIN) {
        void *p = NULL;
        pthread_mutex_lock(&lock);
        // The smallest kept one that fits, and not more than twice as big.
        int best = -1;
        for (int i = 0; i < BIGBUF_SLOTS; i++)
            if (kept[i] && kept_size[i] >= bytes && kept_size[i] / 2 <= bytes &&
                (best < 0 || kept_size[i] < kept_size[best]))
                best = i;
        if (best >= 0) {
            p = kept[best];
            kept[best] = NULL;
            kept_total -= kept_size[best];
        }
        pthread_mutex_unlock(&lock);
        if (p) return p;
    }
    return malloc(bytes ? bytes : 1);
}

void cd_bigbuf_put(void *p) {
    if (!p) return;
    size_t size = malloc_usable_size(p);
    if (size >= BIGBUF_MIN) {
        pthread_mutex_lock(&lock);
        for (int i = 0; i < BIGBUF_SLOTS && p; i++) {
            if (kept[i] || kept_total + size > kept_limit) continue;
            kept[i] = p;
            kept_size[i] = size;
            kept_total += size;
            p = NULL;
        }
        pthread_mutex_unlock(&lock);
    }
    free(p);
}
