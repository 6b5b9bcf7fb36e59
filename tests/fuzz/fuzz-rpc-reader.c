// libFuzzer target for the streaming msgpack-RPC reader and what a daemon
// does with a decoded message (params map, tensor decoding, typed getters,
// error objects). Built only by `make fuzz` (clang), never by `make`:
//
//   make fuzz && mkdir -p /tmp/corpus
//   build/bin/fuzz-rpc-reader -max_total_time=60 /tmp/corpus tests/fuzz/corpus
//
// (new inputs go to the first directory; tests/fuzz/corpus holds the seeds)
//
// The first input byte picks the read size (so one input explores many
// splits) and the message limit; the rest is the byte stream.

#include "proto/errors.h"
#include "proto/limits.h"
#include "proto/params.h"
#include "proto/rpc.h"
#include "proto/tensor.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void use_message(const cd_rpc_msg *m) {
    char err[256], buf[CD_MAX_NAME + 1];
    const msgpack_object *p = cd_rpc_params_map(m);
    if (p) {
        for (uint32_t i = 0; i < p->via.map.size; i++) {
            cd_tensor t;
            if (cd_tensor_decode(&p->via.map.ptr[i].val, &t, err, sizeof err) == 0 &&
                t.nbytes != (size_t)cd_tensor_numel(&t) * cd_dtype_size(t.dtype))
                abort();
        }
        int64_t v;
        bool b;
        cd_param_str(p, "model", buf, sizeof buf, err, sizeof err);
        cd_param_int(p, "timeout_ms", 0, 1 << 20, &v, err, sizeof err);
        cd_param_bool(p, "verbose", &b, err, sizeof err);
    }
    if (m->kind == CD_MSG_RESPONSE) cd_rpc_error_decode(&m->error, buf, sizeof buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    size_t chunk = (size_t)(data[0] & 0x3f) + 1;
    size_t max = data[0] & 0x40 ? CD_MAX_MESSAGE_MIN : CD_MAX_MESSAGE_DEFAULT;
    data++, size--;
    cd_rpc_reader *r;
    if (cd_rpc_reader_init(&r, max) < 0) return 0;
    for (size_t off = 0; off < size;) {
        size_t n = size - off < chunk ? size - off : chunk;
        int rc = cd_rpc_reader_feed(r, (const char *)data + off, n);
        if (rc != 0 && rc != CD_ETOO_LARGE) abort();
        off += n;
        for (;;) {
            cd_rpc_msg m;
            char err[256];
            rc = cd_rpc_reader_next(r, &m, NULL, err, sizeof err);
            if (rc == 1) {
                use_message(&m);
                cd_rpc_msg_free(&m);
                continue;
            }
            if (rc < 0 && rc != CD_EPROTOCOL && rc != CD_ETOO_LARGE) abort();
            break;
        }
    }
    cd_rpc_reader_free(r);
    return 0;
}
