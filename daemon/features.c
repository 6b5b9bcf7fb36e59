#include "daemon/features.h"

#include "core/host.h"

#include "proto/rpc.h"
#include "runtime/runtime.h"

#include <pthread.h>
#include <string.h>

size_t cd_features_list(const char **names, size_t max) {
    size_t n = 0;
#define ADD(s)                         \
    do {                               \
        if (n < max) names[n++] = (s); \
    } while (0)
    ADD("cpu");  // the CPU backend is always built
    ADD("dnnl"); // the runtime links oneDNN for dense convolution (Makefile)
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2")) ADD("sse4.2");
    if (__builtin_cpu_supports("avx")) ADD("avx");
    if (__builtin_cpu_supports("avx2")) ADD("avx2");
    if (__builtin_cpu_supports("fma")) ADD("fma");
    if (__builtin_cpu_supports("avx512f")) ADD("avx512f");
    if (__builtin_cpu_supports("avx512bw")) ADD("avx512bw");
    if (__builtin_cpu_supports("avx512vl")) ADD("avx512vl");
    if (__builtin_cpu_supports("avx512dq")) ADD("avx512dq");
#endif
#undef ADD
    return n;
}

static pthread_once_t g_model_once = PTHREAD_ONCE_INIT;
static char g_model[256];

static void model_read(void) {
    if (cd_host_cpu_model(g_model, sizeof g_model) != 0) snprintf(g_model, sizeof g_model, "unknown");
    // One printable line whatever the kernel wrote (it goes into logs,
    // msgpack str and Prometheus labels).
    for (char *c = g_model; *c; c++)
        if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f) *c = ' ';
}

const char *cd_cpu_model(void) {
    pthread_once(&g_model_once, model_read);
    return g_model;
}

int cd_cpu_pack(msgpack_packer *pk) {
    cd_cpu_info ci;
    cd_runtime_cpu_info(&ci);
    int rc = msgpack_pack_map(pk, 6);
    rc |= cd_pack_kv_str(pk, "model", cd_cpu_model());
    rc |= cd_pack_kv_str(pk, "kernels_isa", ci.kernels_isa);
    rc |= cd_pack_str(pk, "kernels_capped");
    rc |= ci.kernels_capped ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
    rc |= cd_pack_kv_str(pk, "dnnl_isa", ci.dnnl_isa);
    rc |= cd_pack_kv_str(pk, "layout", ci.layout);
    rc |= cd_pack_str(pk, "block");
    rc |= msgpack_pack_int(pk, ci.block);
    return rc;
}

void cd_cpu_print(FILE *f) {
    cd_cpu_info ci;
    cd_runtime_cpu_info(&ci);
    fprintf(f, "cpu: %s; kernels %s%s; dnnl %s; layout %s\n", cd_cpu_model(), ci.kernels_isa,
            ci.kernels_capped ? " (capped by --max-isa)" : "", ci.dnnl_isa, ci.layout);
}
