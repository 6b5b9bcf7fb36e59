#include "daemon/features.h"

size_t cd_features_list(const char **names, size_t max) {
    size_t n = 0;
#define ADD(s)                                                                  \
    do {                                                                        \
        if (n < max)                                                            \
            names[n++] = (s);                                                   \
    } while (0)
    ADD("cpu");  // the CPU backend is always built
    ADD("dnnl"); // the runtime links oneDNN for dense convolution (Makefile)
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2"))
        ADD("sse4.2");
    if (__builtin_cpu_supports("avx"))
        ADD("avx");
    if (__builtin_cpu_supports("avx2"))
        ADD("avx2");
    if (__builtin_cpu_supports("fma"))
        ADD("fma");
    if (__builtin_cpu_supports("avx512f"))
        ADD("avx512f");
    if (__builtin_cpu_supports("avx512bw"))
        ADD("avx512bw");
    if (__builtin_cpu_supports("avx512vl"))
        ADD("avx512vl");
    if (__builtin_cpu_supports("avx512dq"))
        ADD("avx512dq");
#endif
#undef ADD
    return n;
}
