// The batch sizes the daemon actually ran for the benchmarked model: its
// `stats` answer's models.<name>.batch_sizes ({items: runs}, docs/PROTOCOL.md)
// read at the end of the warm-up and at the end of the run; the report shows
// the difference, so what the scheduler formed under this load is visible
// beside the latency it cost.

#include "tools/convbench/batches.h"

#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

// The map value of key in map o, or NULL.
static const msgpack_object *map_get(const msgpack_object *o, const char *key) {
    if (!o || o->type != MSGPACK_OBJECT_MAP) return NULL;
    size_t n = strlen(key);
    for (uint32_t i = 0; i < o->via.map.size; i++) {
        const msgpack_object *k = &o->via.map.ptr[i].key;
        if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == n && memcmp(k->via.str.ptr, key, n) == 0)
            return &o->via.map.ptr[i].val;
    }
    return NULL;
}

int bench_batches_read(convd_conn *conn, const char *model, bench_batches *out) {
    memset(out, 0, sizeof *out);
    void *res = NULL;
    size_t len = 0;
    int rc = convd_call(conn, "stats", NULL, 0, &res, &len, -1);
    if (rc) return rc;
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    rc = CONVD_EPROTOCOL;
    if (msgpack_unpack_next(&u, res, len, NULL) == MSGPACK_UNPACK_SUCCESS) {
        const msgpack_object *sizes = map_get(map_get(map_get(&u.data, "models"), model), "batch_sizes");
        if (sizes && sizes->type == MSGPACK_OBJECT_MAP) {
            rc = 0;
            for (uint32_t i = 0; i < sizes->via.map.size; i++) {
                const msgpack_object *k = &sizes->via.map.ptr[i].key, *v = &sizes->via.map.ptr[i].val;
                if (k->type != MSGPACK_OBJECT_STR || v->type != MSGPACK_OBJECT_POSITIVE_INTEGER || k->via.str.size > 20)
                    continue;
                char key[24];
                memcpy(key, k->via.str.ptr, k->via.str.size);
                key[k->via.str.size] = 0;
                unsigned long long items = strtoull(key, NULL, 10);
                size_t slot = items < BENCH_BATCH_SLOTS ? (size_t)items : BENCH_BATCH_SLOTS - 1;
                out->runs[slot] += v->via.u64;
            }
        }
    }
    msgpack_unpacked_destroy(&u);
    convd_free(res);
    out->valid = rc == 0;
    return rc;
}

void bench_batches_diff(const bench_batches *before, const bench_batches *after, bench_batches *out) {
    memset(out, 0, sizeof *out);
    out->valid = before->valid && after->valid;
    for (size_t i = 0; out->valid && i < BENCH_BATCH_SLOTS; i++)
        out->runs[i] = after->runs[i] >= before->runs[i] ? after->runs[i] - before->runs[i] : 0;
}

void bench_batches_totals(const bench_batches *b, uint64_t *runs, double *mean_items) {
    uint64_t n = 0, items = 0;
    for (size_t i = 1; i < BENCH_BATCH_SLOTS; i++) {
        n += b->runs[i];
        items += b->runs[i] * i;
    }
    *runs = n;
    *mean_items = n ? (double)items / (double)n : 0.0;
}
