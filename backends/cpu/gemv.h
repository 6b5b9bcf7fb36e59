// A batch-1 fully connected layer on weights in oneDNN's OIhw16i64o
// (ABcd16b64a, h = w = 1) packing: blocks of 64 outputs x 16 inputs, each
// stored as 16 rows of 64 outputs, the blocks of 64 outputs contiguous; the
// padding past n and k is zero. Used by backends/cpu/dnnl-ip.c at batch 1,
// where oneDNN 2.6's inner product reads the weights ~1.5x slower than memory
// allows. y[0..n) = W x (no bias, no activation); runs on the calling OpenMP
// team. w 64-byte aligned.
#ifndef CD_BACKENDS_CPU_GEMV_H
#define CD_BACKENDS_CPU_GEMV_H

void cd_cpu_gemv_oi16i64o_avx512f(int n, int k, const float *w, const float *x, float *y);

#endif
