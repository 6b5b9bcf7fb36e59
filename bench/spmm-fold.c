// What folding a batch into the pixel axis can bring the float32 CSR
// micro-kernel on one 1x1 layer: the layer's kernel calls on one image's
// plane (its pixels padded to whole vectors, as a prepared plane is) against
// the same calls on one plane holding `--batch` images' pixels back to back,
// per image. Everything the calls read stays where repeated runs leave it
// (the cache-friendliest case for both), so the ratio is the most a fold
// of that layer can gain: the padding it removes and the weights it reads
// once for more pixels.
//
//   spmm-fold [--c 512] [--k 2048] [--hw 49] [--batch 16] [--sparsity 0.9]
//             [--cin-block 0] [--tile 64] [--rounds 7]
//
// --cin-block N splits the input channels into blocks of N, each with its
// own CSR part, accumulating onto the output as sparse/sparse-conv-run.c's
// passes do (0: one block); --tile: pixels per pass over the blocks. The
// kernel is the registry's best one-channel (CSR) micro-kernel under
// CONVD_MAX_ISA. Printed: us per image and the useful vector FMAs per
// second, batch 1 and folded, and their ratio.

#include "core/isa-cap.h"
#include "sparse/spmm-ukernel.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    float *w;         // per block of input channels: the packed stream
    int32_t *off;     // its offsets
    uint32_t *nnz;    // entries per row
    size_t nnz_total; // of the block
} csr_part;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng = 0x9E3779B97F4A7C15u;
static uint32_t next_u32(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

// Rows of K output channels over input channels [c0, c1), each nonzero with
// probability 1 - sparsity, offsets into planes of `pitch` floats.
static int make_part(csr_part *p, int k, int c0, int c1, double sparsity, size_t pitch) {
    const size_t cols = (size_t)(c1 - c0);
    p->w = malloc(sizeof(float) * (size_t)k * (cols + 1));
    p->off = malloc(sizeof(int32_t) * (size_t)k * cols + sizeof(int32_t));
    p->nnz = malloc(sizeof(uint32_t) * (size_t)k);
    if (!p->w || !p->off || !p->nnz) return 1;
    size_t wi = 0, oi = 0;
    for (int r = 0; r < k; r++) {
        p->w[wi++] = 0.01f * (float)(r % 7); // the bias
        uint32_t n = 0;
        for (size_t c = 0; c < cols; c++) {
            if ((double)next_u32() / 4294967296.0 < sparsity) continue;
            p->w[wi++] = 0.001f * (float)(1 + next_u32() % 100);
            p->off[oi++] = (int32_t)((size_t)(c0 + c) * pitch);
            n++;
        }
        p->nnz[r] = n;
    }
    p->nnz_total = oi;
    return 0;
}

// One run of the layer over `pixels` pixels of planes of `pitch` floats:
// passes of `tile` pixels, each over every block (the first writes, the
// others accumulate).
static void run_layer(const cd_spmm_ukernel_info *uk, const csr_part *parts, int nparts, int k, const float *in,
                      float *out, size_t pixels, size_t pitch, size_t tile) {
    const cd_spmm_params none = {-INFINITY, INFINITY};
    for (size_t m = 0; m < pixels; m += tile) {
        const size_t mc = pixels - m < tile ? pixels - m : tile;
        for (int b = 0; b < nparts; b++)
            uk->fn(mc, (size_t)k, in + m, parts[b].w, parts[b].off, parts[b].nnz, b ? out + m : NULL, pitch, out + m,
                   pitch, &none);
    }
}

// Fastest of `rounds` rounds (each long enough to time) of one layout, in
// seconds per run.
static double time_layout(const cd_spmm_ukernel_info *uk, int c, int k, double sparsity, int cinb, size_t pixels,
                          size_t tile, int rounds, double *fmas) {
    const size_t pitch = (pixels + 15) / 16 * 16;
    float *in = aligned_alloc(64, sizeof(float) * (size_t)c * pitch);
    float *out = aligned_alloc(64, sizeof(float) * (size_t)k * pitch);
    const int blk = cinb > 0 && cinb < c ? cinb : c, nparts = (c + blk - 1) / blk;
    csr_part *parts = calloc((size_t)nparts, sizeof *parts);
    if (!in || !out || !parts) exit(1);
    for (size_t i = 0; i < (size_t)c * pitch; i++) in[i] = (float)(next_u32() % 1000) * 1e-3f;
    rng = 0x9E3779B97F4A7C15u; // the same weights for every layout
    size_t nz = 0;
    for (int b = 0; b < nparts; b++) {
        const int c0 = b * blk, c1 = c0 + blk < c ? c0 + blk : c;
        if (make_part(&parts[b], k, c0, c1, sparsity, pitch)) exit(1);
        nz += parts[b].nnz_total;
    }
    *fmas = (double)nz * (double)pixels / 16.0; // useful vector FMAs (16 floats)
    double best = INFINITY;
    for (int r = 0; r < rounds; r++) {
        int reps = 0;
        const double t0 = now_s();
        double t;
        do {
            run_layer(uk, parts, nparts, k, in, out, pixels, pitch, tile);
            reps++;
        } while ((t = now_s() - t0) < 0.05);
        if (t / reps < best) best = t / reps;
    }
    for (int b = 0; b < nparts; b++) free(parts[b].w), free(parts[b].off), free(parts[b].nnz);
    free(parts);
    free(in);
    free(out);
    return best;
}

int main(int argc, char **argv) {
    int c = 512, k = 2048, hw = 49, batch = 16, cinb = 0, rounds = 7;
    size_t tile = 64;
    double sparsity = 0.9;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--c"))
            c = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--k"))
            k = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--hw"))
            hw = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--batch"))
            batch = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--sparsity"))
            sparsity = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--cin-block"))
            cinb = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--tile"))
            tile = (size_t)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--rounds"))
            rounds = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "spmm-fold: unknown option %s (see the top of bench/spmm-fold.c)\n", argv[i]);
            return 2;
        }
    }
    if (c < 1 || k < 1 || hw < 1 || batch < 1 || rounds < 1 || tile < 16 || tile % 16 || !(sparsity < 1.0)) {
        fprintf(stderr, "spmm-fold: bad sizes\n");
        return 2;
    }
    cd_isa_cap cap = CD_ISA_CAP_NONE;
    const char *env = getenv("CONVD_MAX_ISA");
    if (env && cd_isa_cap_parse(env, &cap) != 0) {
        fprintf(stderr, "spmm-fold: CONVD_MAX_ISA=%s: want avx512vnni, avx512, avx2 or scalar\n", env);
        return 2;
    }
    cd_sparse_isa_set_cap(cap);
    const cd_spmm_ukernel_info *uk = cd_spmm_ukernel_find(cd_sparse_isa_best(), 1);
    if (!uk) {
        fprintf(stderr, "spmm-fold: no CSR micro-kernel on this CPU\n");
        return 1;
    }
    double f1, fn;
    const double t1 = time_layout(uk, c, k, sparsity, cinb, (size_t)hw, tile, rounds, &f1);
    const double tn = time_layout(uk, c, k, sparsity, cinb, (size_t)hw * batch, tile, rounds, &fn);
    printf(
        "| kernel | layer | cin block | batch 1 us | folded x%d us per image | batch 1 G vecFMA/s | folded G vecFMA/s "
        "| batch 1 / folded |\n|---|---|---|---|---|---|---|---|\n",
        batch);
    printf("| %s | 1x1 %d>%d, %d px, %.0f%% | %d | %.1f | %.1f | %.2f | %.2f | %.2fx |\n", uk->name, c, k, hw,
           100.0 * sparsity, cinb, 1e6 * t1, 1e6 * tn / batch, 1e-9 * f1 / t1, 1e-9 * fn / tn, t1 / (tn / batch));
    return 0;
}
