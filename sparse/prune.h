#ifndef CD_SPARSE_PRUNE_H
#define CD_SPARSE_PRUNE_H

// One-shot magnitude pruning of conv/FC weights (`convctl prune`). Pure functions on float arrays and shapes: no ONNX here.
//
// Layout. A layer's weight is k filters (output channels) of cols = cpg*ksize
// floats each, in OIHW order: filter f is w[f*cols .. (f+1)*cols), its column
// j = c*ksize + t is input channel c (of its group) at kernel position t. An
// FC weight is k outputs x cpg inputs with ksize 1 (the caller transposes a
// [K, N] matrix first). With groups g, filters [i*kpg, (i+1)*kpg) (kpg =
// k/groups) read the input channels [i*cpg, (i+1)*cpg) of the layer. This is
// the view of sparse/analysis.h, so `convctl plan` finds what was pruned.
//
// Units. Each mode zeroes whole units, ranked by a score:
//   unstructured  one weight; score |w|
//   filter        one filter (all its cols weights); score its L1 or L2 norm
//   channel       one input channel of one group: the ksize columns of that
//                 channel in each of the group's kpg filters; zeroing it makes
//                 the layer's input channel unused
//   block:RxC     R consecutive filters x C consecutive columns of one group's
//                 kpg x cols matrix, tiled from (0, 0) per group; edge blocks
//                 are cut (fewer weights); score the L2 norm. 4x1 = 4
//                 consecutive filters at the same input position (ci, kh, kw).
//   nm:N:M        every run of M consecutive columns of one filter (the last
//                 run of a filter may be shorter, L < M) keeps its min(N, L)
//                 largest |w|; the sparsity is fixed by N/M
// For filter/channel/block the score is the unit's norm divided by
// size^(1/p) (L1: mean |w|, L2: root mean square), so cut edge blocks compete
// fairly with whole ones; units of one size rank exactly as by the norm.
//
// Amount. With sparsity S the units are zeroed in ascending score order and
// the prefix whose weight count is nearest to S * (weights of the layers) is
// taken (on a tie the shorter prefix). Weights that were zero already score 0
// and come first, so the achieved sparsity is at least S (within one unit).
// Ties between equal scores: the unit that comes first (lower layer index,
// then lower unit index in the order above) is pruned first. Same for N:M:
// among equal |w| in a run the later weights are kept.
//
// Global (several layers, one ranking): unstructured uses one magnitude
// threshold across all layers (plain |w|). Structured modes divide each
// unit's score by the same statistic of its whole layer (mean |w| for L1, RMS
// for L2), so a unit competes by how weak it is relative to its own layer, not
// by the layer's weight scale. A layer whose weights are all zero scores 0.
// Per-layer: each layer on its own reaches S (no normalisation needed).
//
// NaN weights score as +infinity (never pruned first).

#include <stddef.h>
#include <stdint.h>

typedef enum {
    CD_PRUNE_UNSTRUCTURED = 0,
    CD_PRUNE_FILTER,
    CD_PRUNE_CHANNEL,
    CD_PRUNE_BLOCK,
    CD_PRUNE_NM,
} cd_prune_kind;

#define CD_PRUNE_MAX_BLOCK 4096 // largest R or C of block:RxC
#define CD_PRUNE_MAX_M 1024     // largest M of nm:N:M

typedef struct {
    cd_prune_kind kind;
    int norm;   // FILTER, CHANNEL: 1 (L1) or 2 (L2); BLOCK: 2; others 0
    int bh, bw; // BLOCK: R filters x C columns
    int n, m;   // NM: keep n of every m (1 <= n < m)
} cd_prune_mode;

typedef struct {
    int k;      // filters (output channels), divisible by groups
    int cpg;    // input channels per group
    int ksize;  // kernel positions per channel (kh*kw...; 1 for FC)
    int groups; // conv groups (1 for FC)
} cd_prune_shape;

// One layer handed to cd_prune_run.
typedef struct {
    float *w; // k*cpg*ksize weights in the layout above, pruned in place
    cd_prune_shape shape;
} cd_prune_layer;

// What a layer's weights show for a mode (cd_prune_count).
typedef struct {
    size_t total;      // weights
    size_t zeros;      // weights equal to 0
    size_t units;      // units of the mode (unstructured: weights; nm: runs of M)
    size_t zero_units; // of which all zero (nm: runs that conform, <= N nonzeros)
} cd_prune_stat;

// Parses a mode: "unstructured", "filter", "filter:l1", "filter:l2",
// "channel", "channel:l1", "channel:l2" (default L2), "block:RxC" (R, C in
// 1..CD_PRUNE_MAX_BLOCK), "nm:N:M" (1 <= N < M <= CD_PRUNE_MAX_M). Returns 0,
// or CD_EPARAMS with a readable reason in err.
int cd_prune_parse_mode(const char *s, cd_prune_mode *m, char *err, size_t errlen);

// Writes the canonical spelling of a mode ("filter:l2", "block:4x1",
// "nm:2:4") into buf (NUL-terminated when n > 0). Returns buf.
const char *cd_prune_mode_name(const cd_prune_mode *m, char *buf, size_t n);

// Parses a sparsity: a fraction "0.5" (0..1) or a percentage "50%" (0..100).
// Returns 0 with *out in [0, 1], or CD_EPARAMS with a reason in err.
int cd_prune_parse_sparsity(const char *s, double *out, char *err, size_t errlen);

// Weights of a shape (k*cpg*ksize), or 0 when the shape is invalid (a
// dimension < 1, k not divisible by groups, overflow).
size_t cd_prune_numel(const cd_prune_shape *s);

// Units of a mode in a layer of shape s (see above), 0 for a bad shape/mode.
size_t cd_prune_units(const cd_prune_shape *s, const cd_prune_mode *m);

// Weights in unit u (u < cd_prune_units): 1, cols, kpg*ksize, or the block's
// (cut) area; for NM the length of run u. 0 when u is out of range.
size_t cd_prune_unit_size(const cd_prune_shape *s, const cd_prune_mode *m, size_t u);

// Scores of every unit of a filter/channel/block/unstructured mode into
// score[cd_prune_units] (norm / size^(1/p), unnormalised). Returns 0 or
// CD_EPARAMS (bad shape, NM mode).
int cd_prune_unit_scores(const float *w, const cd_prune_shape *s, const cd_prune_mode *m, double *score);

// Sets unit u of a filter/channel/block/unstructured mode to zero. Returns 0
// or CD_EPARAMS.
int cd_prune_zero_unit(float *w, const cd_prune_shape *s, const cd_prune_mode *m, size_t u);

// Counts zeros and all-zero (NM: conforming) units. Returns 0 or CD_EPARAMS.
int cd_prune_count(const float *w, const cd_prune_shape *s, const cd_prune_mode *m, cd_prune_stat *out);

// Prunes n layers in place to sparsity (0..1; ignored for NM) by the rules
// above: global != 0 ranks all layers together, else each layer alone.
// Returns 0, CD_EPARAMS (bad shape, mode or sparsity; nothing changed) or
// CD_ENOMEM (nothing changed).
int cd_prune_run(cd_prune_layer *layers, int n, const cd_prune_mode *m, double sparsity, int global);

#endif // CD_SPARSE_PRUNE_H
