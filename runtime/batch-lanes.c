// A split batch's images in lanes (model.h, cd_batch_lanes_run): one OpenMP
// region of the job's threads, each thread taking whole images, the next
// free one, on an exec of its own for batch 1.
//
// Why: a split batch run wide (batch-split.c) runs each image on all the
// threads in turn, paying every layer's 2-thread scaling (1.7-1.85x on
// ResNet-50 u90) and a barrier per layer. Whole images per thread scale by
// the images instead (docs/PERFORMANCE.md, "Split batches in lanes").
//
// Inside the region each thread asks for one thread (omp_set_num_threads,
// as the executor's lanes do): our kernels then split nothing, and oneDNN,
// called inside a parallel region, runs its primitives on the calling
// thread (cd_dnnl_apply_threads leaves the count alone there). A lane's
// kernel workspaces are its exec's (the backend ctx: the sparse kernels'
// per-thread slots, oneDNN's scratchpad), so lanes share nothing they write
// but the outputs' items, one image each.

#include "runtime/model.h"

#include "core/errors.h"
#include "runtime/options.h"

#include <omp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Tests: the image whose run fails on purpose (-1: none).
static atomic_int g_fail_image = -1;

void cd_batch_lanes_fail_at(int image) { atomic_store(&g_fail_image, image); }

static atomic_ullong g_lane_batches, g_lane_images; // run in lanes (cd_runtime_lane_batches)

unsigned long long cd_runtime_lane_batches(unsigned long long *images) {
    if (images) *images = atomic_load(&g_lane_images);
    return atomic_load(&g_lane_batches);
}

int cd_batch_lanes_wanted(const cd_model *m, int batch) {
    const int mode = cd_runtime_opts()->batch_lanes; // 0 auto, 1 off (wide), 2 on
    if (mode == 1 || batch < 2 || !m->batch_split) return 0;
    const int threads = omp_in_parallel() ? 1 : omp_get_max_threads(); // 1 in a lane already
    return threads < 2 ? 0 : threads < batch ? threads : batch;
}

size_t cd_batch_lanes_arena_bytes(const cd_model *m) {
    size_t bytes = 0;
    return cd_model_arena_layout(m, 1, NULL, &bytes) ? 0 : bytes;
}

// Gives ex lanes execs in all (ex itself first), made once and kept. On
// running out of memory it keeps those it has: fewer lanes (0: no array),
// never an error.
static int ensure_lanes(cd_exec *ex, int lanes) {
    if (ex->nlane >= lanes) return lanes;
    const cd_model *m = ex->m;
    cd_exec **lane = realloc(ex->lane, sizeof *lane * (size_t)lanes);
    if (!lane) return ex->nlane;
    ex->lane = lane;
    if (ex->nlane == 0) lane[ex->nlane++] = ex;
    size_t *offsets = calloc((size_t)m->ntensors + 1, sizeof *offsets), bytes = 0;
    const int laid = offsets && !cd_model_arena_layout(m, 1, offsets, &bytes);
    while (laid && ex->nlane < lanes && !cd_exec_init_layout(m, bytes, offsets, &lane[ex->nlane])) ex->nlane++;
    free(offsets);
    return ex->nlane;
}

typedef struct {
    cd_exec *const *lane;
    int batch, first;
    const char *const *src;
    void *const *outputs;
    cd_run_one_fn one;
    atomic_int next;   // the next image no lane has taken
    atomic_int failed; // the first error's code (0: none)
    char *err;         // the first error's message
    size_t errlen;
} lanes_job;

// Runs image b on exec e: 0 or a negative code with err set.
static int run_image(const lanes_job *j, cd_exec *e, int b, char *err, size_t errlen) {
    const cd_model *m = e->m;
    const void *in[CD_SPLIT_MAX_IO];
    void *out[CD_SPLIT_MAX_IO];
    const int staged = b < j->first; // image 0, staged in ex's arena (e is ex)
    for (int i = 0; i < m->ninputs && !staged; i++)
        in[i] = j->src[i] + m->tensors[m->inputs[i].tensor].item_bytes * (size_t)(b - j->first);
    for (int o = 0; o < m->noutputs; o++)
        out[o] = (char *)j->outputs[o] + m->tensors[m->outputs[o].tensor].item_bytes * (size_t)b;
    if (b == atomic_load(&g_fail_image)) return cd_errf(CD_EINTERNAL, err, errlen, "image %d failed (test)", b);
    e->staged = staged;
    int rc = j->one(e, 1, staged ? NULL : in, out, err, errlen, NULL);
    // The lane's next image reuses its arena: this one's downloads first.
    if (!rc && (rc = cd_backend_synchronize(m->be, e->ctx)))
        cd_errf(CD_EINTERNAL, err, errlen, "synchronize failed: %s", cd_strerror(rc));
    return rc;
}

// Lane t: images from the shared count, lane 0 image 0 first (it may be
// staged in ex's arena), until none is left or a lane failed. Whatever the
// team's size (one thread without OpenMP, the TSan build), every image runs.
static void run_lane(lanes_job *j, int t) {
    char err[512] = "";
    for (int b = t == 0 ? 0 : atomic_fetch_add(&j->next, 1); b < j->batch && !atomic_load(&j->failed);
         b = atomic_fetch_add(&j->next, 1)) {
        const int rc = run_image(j, j->lane[t], b, err, sizeof err);
        int none = 0;
        if (rc && atomic_compare_exchange_strong(&j->failed, &none, rc)) {
            if (j->err && j->errlen) snprintf(j->err, j->errlen, "image %d: %s", b, err);
        }
    }
}

int cd_batch_lanes_run(cd_exec *ex, int batch, const char *const *src, int first, void *const *outputs, char *err,
                       size_t errlen, cd_run_one_fn one) {
    const int want = omp_get_max_threads() < batch ? omp_get_max_threads() : batch;
    cd_exec *solo[1] = {ex};
    int lanes = ensure_lanes(ex, want);
    lanes_job j = {lanes ? ex->lane : solo, batch, first, src, outputs, one, 1, 0, err, errlen};
    if (lanes < 2) { // no memory for a second exec: the images one after the other on ex
        run_lane(&j, 0);
        return atomic_load(&j.failed);
    }
    atomic_fetch_add(&g_lane_batches, 1);
    atomic_fetch_add(&g_lane_images, (unsigned long long)batch);
    const int saved = omp_get_max_threads(); // without OpenMP the "region" is this thread
#pragma omp parallel num_threads(lanes)
    {
        omp_set_num_threads(1); // the kernels a lane runs split nothing
        run_lane(&j, omp_get_thread_num());
    }
    omp_set_num_threads(saved);
    return atomic_load(&j.failed);
}
