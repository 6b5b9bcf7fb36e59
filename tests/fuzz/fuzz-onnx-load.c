// libFuzzer target for loading a model file: the ONNX importer (protobuf,
// initializers, external data, topological sort), the lowering (shapes,
// constant folding, fusion), the compaction and the planner (layouts,
// reorders, arena) of whatever gets that far. Built only by `make fuzz`
// (clang), never by `make`:
//
//   make fuzz SECONDS=600          # every fuzz target, 600 s each
//   python3 tests/fuzz/make-corpus.py /tmp/onnx-seeds
//   build/bin/fuzz-onnx-load -max_total_time=60 -dict=tests/fuzz/onnx.dict /tmp/onnx-corpus /tmp/onnx-seeds
//
// The planner runs on a stub backend that accepts every op, so that the
// loader's own code, not the kernels' weight packing, takes the time: the
// kernels' preparation is tested by the unit and model tests. The first
// input byte picks max_batch, the backend's blocked layout and the plan
// mode; the rest is the file. External data resolves in a folder made at
// start-up that holds a data file and a symlink pointing outside it.

#include "backends/devices.h"
#include "core/errors.h"
#include "runtime/graph.h"
#include "runtime/model.h"
#include "sparse/spmm-ukernel.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// ---- a stub backend -------------------------------------------------------------

static void fz_free(cd_backend_t be) {}
// Constants live in host memory; a model asking for more than 64 MiB is
// refused as a device would (CD_ENOMEM), which also keeps RSS bounded.
static int fz_alloc(cd_backend_t be, size_t size, void **out) {
    *out = size <= ((size_t)64 << 20) ? malloc(size ? size : 1) : NULL;
    return *out ? 0 : CD_ENOMEM;
}
static void fz_buf_free(cd_backend_t be, void *buf) { free(buf); }
static int fz_copy(cd_backend_t be, void *dst, const void *src, size_t size) {
    memcpy(dst, src, size); // reads every byte the planner claims the constant has
    return 0;
}
static bool fz_supports(cd_backend_t be, const cd_bop_desc *d) { return !d->sparse; }
static const char *fz_kernel(cd_backend_t be, cd_op_state *st) { return "fuzz"; }
static void fz_state_free(cd_backend_t be, cd_op_state *st) { free(st); }
static int fz_init(cd_backend_t be, const cd_bop_desc *d, cd_op_state **out) {
    // What a kernel would read of its description: the weights of a conv or
    // a gemm, sized from the description (an inconsistency is an ASan report).
    volatile float sink = 0;
    if (d->op == CD_BOP_CONV2D && d->w) {
        const cd_conv_desc *c = &d->u.conv;
        size_t n = (size_t)c->k * (size_t)(c->c / c->groups) * (size_t)c->r * (size_t)c->s;
        sink += d->w[0] + d->w[n - 1] + (d->bias ? d->bias[c->k - 1] : 0);
    } else if (d->op == CD_BOP_GEMM && d->w) {
        size_t n = (size_t)d->u.gemm.n * (size_t)d->u.gemm.k;
        sink += d->w[n - 1] + (d->bias ? d->bias[d->u.gemm.n - 1] : 0);
    }
    (void)sink;
    *out = malloc(16); // leak-checked like a real op state
    return *out ? 0 : CD_ENOMEM;
}
static int fz_run(cd_backend_t be, cd_backend_ctx *ctx, cd_op_state *st, int batch, const cd_btensor *const *srcs,
                  cd_btensor *dst) {
    return CD_EINTERNAL; // never run
}
static cd_layout g_blocked;
static void fz_caps(cd_backend_t be, cd_backend_caps *out) {
    *out = (cd_backend_caps){
        .name = "fuzz", .description = "fuzz", .blocked_layout = g_blocked, .native_layout = g_blocked, .isa = "fuzz"};
}

static const struct cd_backend_i fz_iface = {
    .get_caps = fz_caps,
    .free = fz_free,
    .buffer_alloc = fz_alloc,
    .buffer_free = fz_buf_free,
    .upload = fz_copy,
    .download = fz_copy,
    .supports_op = fz_supports,
    .op_init = fz_init,
    .op_run = fz_run,
    .op_kernel = fz_kernel,
    .op_state_free = fz_state_free,
};
static struct cd_backend g_be = {&fz_iface, NULL};

// The planner asks the table of devices (backends/devices.c, not linked: it
// would pull in the real backends) for the host's caps: the stub backend's.
cd_backend_caps cd_backends_host_caps(void) {
    cd_backend_caps c;
    fz_caps(NULL, &c);
    return c;
}
// The planner names the sparse kernels' ISA in its cache key; the target
// links no kernels.
cd_sparse_isa cd_sparse_isa_best(void) { return (cd_sparse_isa)0; }
const char *cd_sparse_isa_name(cd_sparse_isa isa) { return "fuzz"; }
// runtime/options.c hands the ISA cap to the (unlinked) kernels.
void cd_sparse_isa_set_cap(cd_isa_cap cap) { (void)cap; }

// ---- the target -----------------------------------------------------------------

static char g_dir[64];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    snprintf(g_dir, sizeof g_dir, "/tmp/fuzz-onnx-load-%d", (int)getpid());
    char p[128];
    mkdir(g_dir, 0700);
    snprintf(p, sizeof p, "%s/w.bin", g_dir);
    FILE *f = fopen(p, "wb");
    if (f) {
        for (int i = 0; i < 4096; i++) fputc(i * 37, f);
        fclose(f);
    }
    snprintf(p, sizeof p, "%s/out.bin", g_dir);
    if (symlink("/etc/hostname", p)) { /* already there */
    }
    return 0;
}

// What the executor relies on in a plan that loaded: layers name existing
// tensors, and every activation's bytes at max_batch lie inside the arena.
static void check_plan(const cd_model *m) {
    if (m->ninputs < 1 || m->noutputs < 1) abort();
    for (int i = 0; i < m->nlayers; i++) {
        const cd_layer *l = &m->layers[i];
        if (l->out < 0 || l->out >= m->ntensors || l->nin < 0 || l->nin > CD_OP_MAX_IN) abort();
        for (int j = 0; j < l->nin; j++)
            if (l->in[j] < 0 || l->in[j] >= m->ntensors) abort();
    }
    for (int i = 0; i < m->ntensors; i++) {
        const cd_ptensor *t = &m->tensors[i];
        if (t->root < 0 || t->root >= m->ntensors) abort();
        const cd_ptensor *r = &m->tensors[t->root];
        if (t->t.is_const || r->first == -2) continue;
        // An alias is no larger than its root (same bytes, new shape).
        if (t->item_bytes > r->item_bytes) abort();
        if (r->offset > m->arena_bytes || r->item_bytes * (size_t)m->max_batch > m->arena_bytes - r->offset) abort();
    }
    for (int i = 0; i < m->ninputs + m->noutputs; i++) {
        const cd_io *io = i < m->ninputs ? &m->inputs[i] : &m->outputs[i - m->ninputs];
        if (io->tensor < 0 || io->tensor >= m->ntensors || !io->d.name) abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const uint8_t cfg = data[0];
    static const cd_layout layouts[4] = {CD_LAYOUT_NCHW, CD_LAYOUT_NCHW16C, CD_LAYOUT_NCHW8C, CD_LAYOUT_NCHW16C};
    static const cd_plan_mode modes[4] = {CD_PLAN_AUTO, CD_PLAN_DENSE, CD_PLAN_SPARSE, CD_PLAN_COMPACT};
    g_blocked = layouts[cfg & 3];
    cd_graph g;
    memset(&g, 0, sizeof g);
    cd_model m;
    memset(&m, 0, sizeof m);
    m.be = &g_be;
    m.max_batch = (cfg >> 4) % 2 ? 1 + (cfg >> 5) * 16 : 1;
    m.popts.mode = modes[(cfg >> 2) & 3];
    m.popts.max_batch = m.max_batch;
    char err[700];
    int rc = cd_onnx_import_buffer(data + 1, size - 1, g_dir, &g, err, sizeof err);
    if (!rc) rc = cd_graph_lower(&g, err, sizeof err);
    if (!rc) rc = cd_graph_compact(&g, m.popts.mode != CD_PLAN_DENSE, err, sizeof err);
    if (!rc) rc = cd_plan_build(&m, &g, err, sizeof err);
    if (getenv("FUZZ_ONNX_VERBOSE")) fprintf(stderr, "%s\n", rc ? err : "loaded");
    // Every failure is one of the documented codes with a message.
    if (rc && (rc >= 0 || !strcmp(cd_err_name(rc), "E_UNKNOWN") || rc == CD_EINTERNAL || !err[0])) abort();
    if (!rc) check_plan(&m);
    cd_plan_free(&m);
    cd_graph_free(&g);
    return 0;
}
