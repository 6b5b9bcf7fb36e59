// Batches run image by image (cd_model.batch_split): the choice at load and
// the run.
//
// Why: a layer runs on the whole batch before the next one starts, so at
// batch 16 the activations between layers (ResNet-50 @56: 16 x 3.2 MB out
// of a 1x1 64>256) no longer stay in L2/L3 and every early layer streams
// its input and output through DRAM. Measured (CPU time, 1 thread, loaded
// machine, sparse/ kernels alone, ResNet-50 u90 layers): per image at batch
// 16 against batch 1, 1x1 @56 2.9-3.3x, 3x3 @56 1.5x, 1x1 @28 1.8-2.1x,
// 1x1 @14 1.4-1.7x, 3x3 @28/@14 and every 7x7 layer within 5%; the whole
// model 27.2 against 20.6 ms per image. The sparse kernels gain nothing from
// the batch inside a layer (their 64-pixel tiles already fill on one image;
// a weight-chunk-major order with all images prepared was 1.0-1.35x slower),
// so a batch of a mostly sparse model runs fastest as its images one after
// the other, each with all the threads, its activations in cache.

#include "runtime/model.h"

#include "core/errors.h"
#include "runtime/options.h"

#include <stdlib.h>
#include <string.h>

int cd_batch_split_wanted(const cd_model *m) {
    const int mode = cd_runtime_opts()->batch_split; // 0 auto, 1 off, 2 on
    if (mode == 1 || m->max_batch < 2) return 0;
    if (cd_backend_get_caps(m->be).device_memory) return 0; // one launch per image on a device
    if (mode == 2) return 1;
    // Auto: most of the model's arithmetic (the FLOPs of its kernels at
    // batch 1) on the sparse kernels; dense ones keep the batch (oneDNN
    // gains a little from it: ResNet-50 dense 40.9 -> 39.2 ms per image).
    int64_t sparse = 0, all = 0;
    for (int i = 0; i < m->nlayers; i++) {
        const cd_layer *l = &m->layers[i];
        all += l->flops_run;
        if (l->sparse) sparse += l->flops_run;
    }
    return all > 0 && 2 * sparse > all;
}

int cd_batch_split_run(cd_exec *ex, int batch, const void *const *inputs, void *const *outputs, char *err,
                       size_t errlen, double *layer_ms, cd_run_one_fn one) {
    const cd_model *m = ex->m;
    const void *in[CD_SPLIT_MAX_IO];
    void *out[CD_SPLIT_MAX_IO];
    if (m->ninputs > CD_SPLIT_MAX_IO || m->noutputs > CD_SPLIT_MAX_IO)
        return one(ex, batch, inputs, outputs, err, errlen, layer_ms);
    // Staged inputs (inputs NULL: cd_exec_stage_inputs) live in the arena on
    // the cpu: the first image runs from there as it is (staged, batch 1),
    // and the later ones, which its run may overwrite, are copied aside into
    // the exec's split buffer (grown once, kept for the next batch).
    const char *src[CD_SPLIT_MAX_IO];
    size_t rest = 0;
    for (int i = 0; i < m->ninputs && !inputs; i++)
        rest += m->tensors[m->inputs[i].tensor].item_bytes * (size_t)(batch - 1);
    if (rest > ex->split_cap) {
        char *p = realloc(ex->split_buf, rest);
        if (!p) return cd_errf(CD_ENOMEM, err, errlen, "out of memory for the batch's inputs");
        ex->split_buf = p, ex->split_cap = rest;
    }
    // With more than one thread and no per-layer timing: the images in
    // lanes (batch-lanes.c), each thread whole images on an exec of its own,
    // but for the last batch % threads in auto (they would leave threads
    // idle: those run wide after the lanes).
    const int lanes = layer_ms ? 0 : cd_batch_lanes_wanted(m, batch);
    for (size_t i = 0, at = 0; i < (size_t)m->ninputs; i++) {
        const size_t item = m->tensors[m->inputs[i].tensor].item_bytes;
        if (inputs) {
            src[i] = inputs[i];
            continue;
        }
        memcpy(ex->split_buf + at, (const char *)ex->stage_host[i] + item, item * (size_t)(batch - 1));
        src[i] = ex->split_buf + at; // image 1 (image b at src[i] + (b - 1) * item)
        at += item * (size_t)(batch - 1);
    }
    int rc = 0, b0 = 0;
    if (lanes) {
        b0 = cd_runtime_opts()->batch_lanes == 2 ? batch : batch - batch % lanes;
        rc = cd_batch_lanes_run(ex, b0, src, inputs ? 0 : 1, outputs, err, errlen, one);
    }
    for (int b = b0; b < batch && !rc; b++) {
        const int staged0 = !inputs && b == 0; // image 0 of staged inputs: where it was staged
        for (int i = 0; i < m->ninputs && !staged0; i++)
            in[i] = src[i] + m->tensors[m->inputs[i].tensor].item_bytes * (size_t)(inputs ? b : b - 1);
        for (int o = 0; o < m->noutputs; o++)
            out[o] = (char *)outputs[o] + m->tensors[m->outputs[o].tensor].item_bytes * (size_t)b;
        ex->staged = staged0;
        rc = one(ex, 1, staged0 ? NULL : in, out, err, errlen, layer_ms);
        // The next image reuses the arena: this one's downloads first.
        if (!rc && b + 1 < batch) {
            rc = cd_backend_synchronize(m->be, ex->ctx);
            if (rc) cd_errf(CD_EINTERNAL, err, errlen, "synchronize failed: %s", cd_strerror(rc));
        }
    }
    return rc;
}
