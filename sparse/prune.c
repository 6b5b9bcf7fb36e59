// Magnitude pruning of conv/FC weights: units, scores, selection (prune.h).
//
// The selection of the lowest-scored units is a weighted radix select over
// the bit patterns of the non-negative double scores (monotone in the value):
// four passes of 16 bits find the score t at which the cumulative weight
// count, in ascending (score, layer, unit) order, reaches the target; a last
// pass zeroes every unit below t and the tied units at t in order. No sort of
// all weights is needed, and memory stays at one double per structured unit
// (nothing per weight for unstructured).

#include "sparse/prune.h"

#include "core/errors.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- parsing --------------------------------------------------------------------

// Parses a decimal integer in [lo, hi] that spans [s, s+len). Returns 0 or -1.
static int parse_int(const char *s, size_t len, int lo, int hi, int *out) {
    if (len == 0 || len > 9) return -1;
    long v = 0;
    for (size_t i = 0; i < len; i++) {
        if (!isdigit((unsigned char)s[i])) return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

#define MODES_HELP "unstructured, filter[:l1|:l2], channel[:l1|:l2], block:RxC, nm:N:M"

int cd_prune_parse_mode(const char *s, cd_prune_mode *m, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    if (!s || !*s) return cd_errf(CD_EPARAMS, err, errlen, "empty mode (" MODES_HELP ")");
    if (strcmp(s, "unstructured") == 0) {
        m->kind = CD_PRUNE_UNSTRUCTURED;
        return 0;
    }
    if (strncmp(s, "filter", 6) == 0 || strncmp(s, "channel", 7) == 0) {
        const int is_filter = s[0] == 'f';
        const char *rest = s + (is_filter ? 6 : 7);
        m->kind = is_filter ? CD_PRUNE_FILTER : CD_PRUNE_CHANNEL;
        if (*rest == 0 || strcmp(rest, ":l2") == 0 || strcmp(rest, ":L2") == 0) {
            m->norm = 2;
            return 0;
        }
        if (strcmp(rest, ":l1") == 0 || strcmp(rest, ":L1") == 0) {
            m->norm = 1;
            return 0;
        }
        return cd_errf(CD_EPARAMS, err, errlen, "bad mode '%s': %s takes :l1 or :l2 (the norm that ranks %ss)", s,
                       is_filter ? "filter" : "channel", is_filter ? "filter" : "channel");
    }
    if (strncmp(s, "block:", 6) == 0) {
        const char *r = s + 6, *x = r;
        while (*x && *x != 'x' && *x != 'X') x++;
        m->kind = CD_PRUNE_BLOCK;
        m->norm = 2;
        if (*x == 0 || parse_int(r, (size_t)(x - r), 1, CD_PRUNE_MAX_BLOCK, &m->bh) ||
            parse_int(x + 1, strlen(x + 1), 1, CD_PRUNE_MAX_BLOCK, &m->bw))
            return cd_errf(CD_EPARAMS, err, errlen,
                           "bad mode '%s': block wants RxC, R filters by C input positions, each 1..%d "
                           "(e.g. block:4x1)",
                           s, CD_PRUNE_MAX_BLOCK);
        return 0;
    }
    if (strncmp(s, "nm:", 3) == 0) {
        const char *a = s + 3, *colon = strchr(a, ':');
        m->kind = CD_PRUNE_NM;
        if (!colon || parse_int(a, (size_t)(colon - a), 1, CD_PRUNE_MAX_M, &m->n) ||
            parse_int(colon + 1, strlen(colon + 1), 2, CD_PRUNE_MAX_M, &m->m))
            return cd_errf(CD_EPARAMS, err, errlen, "bad mode '%s': nm wants N:M with 1 <= N < M <= %d (e.g. nm:2:4)",
                           s, CD_PRUNE_MAX_M);
        if (m->n >= m->m)
            return cd_errf(CD_EPARAMS, err, errlen, "bad mode '%s': N must be below M (nm:%d:%d would prune nothing)",
                           s, m->n, m->m);
        return 0;
    }
    return cd_errf(CD_EPARAMS, err, errlen, "unknown mode '%s' (" MODES_HELP ")", s);
}

const char *cd_prune_mode_name(const cd_prune_mode *m, char *buf, size_t n) {
    if (!n) return buf;
    switch (m->kind) {
    case CD_PRUNE_UNSTRUCTURED: snprintf(buf, n, "unstructured"); break;
    case CD_PRUNE_FILTER: snprintf(buf, n, "filter:l%d", m->norm); break;
    case CD_PRUNE_CHANNEL: snprintf(buf, n, "channel:l%d", m->norm); break;
    case CD_PRUNE_BLOCK: snprintf(buf, n, "block:%dx%d", m->bh, m->bw); break;
    case CD_PRUNE_NM: snprintf(buf, n, "nm:%d:%d", m->n, m->m); break;
    default: snprintf(buf, n, "?"); break;
    }
    return buf;
}

int cd_prune_parse_sparsity(const char *s, double *out, char *err, size_t errlen) {
    if (!s || !*s) return cd_errf(CD_EPARAMS, err, errlen, "empty sparsity (0..1, or 0..100 with %%)");
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    const int pct = *end == '%';
    if (end == s || isspace((unsigned char)*s) || errno || !isfinite(v) || (pct ? end[1] != 0 : *end != 0))
        return cd_errf(CD_EPARAMS, err, errlen,
                       "bad sparsity '%s' (a fraction 0..1 like 0.9, or a percentage like 90%%)", s);
    if (pct) {
        if (v < 0 || v > 100) return cd_errf(CD_EPARAMS, err, errlen, "sparsity %s is out of range 0..100%%", s);
        v /= 100.0;
    } else if (v < 0 || v > 1) {
        if (v > 1 && v <= 100)
            return cd_errf(CD_EPARAMS, err, errlen, "sparsity %s is out of range 0..1 (write %s%% for a percentage)", s,
                           s);
        return cd_errf(CD_EPARAMS, err, errlen, "sparsity %s is out of range 0..1", s);
    }
    *out = v;
    return 0;
}

// ---- shapes and units -----------------------------------------------------------

static int mode_ok(const cd_prune_mode *m) {
    switch (m->kind) {
    case CD_PRUNE_UNSTRUCTURED: return 1;
    case CD_PRUNE_FILTER:
    case CD_PRUNE_CHANNEL: return m->norm == 1 || m->norm == 2;
    case CD_PRUNE_BLOCK: return m->bh >= 1 && m->bw >= 1 && m->bh <= CD_PRUNE_MAX_BLOCK && m->bw <= CD_PRUNE_MAX_BLOCK;
    case CD_PRUNE_NM: return m->n >= 1 && m->n < m->m && m->m <= CD_PRUNE_MAX_M;
    }
    return 0;
}

size_t cd_prune_numel(const cd_prune_shape *s) {
    if (!s || s->k < 1 || s->cpg < 1 || s->ksize < 1 || s->groups < 1 || s->k % s->groups) return 0;
    const size_t cols = (size_t)s->cpg * (size_t)s->ksize;
    if (cols > SIZE_MAX / 8 / (size_t)s->k) return 0;
    return cols * (size_t)s->k;
}

static size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

size_t cd_prune_units(const cd_prune_shape *s, const cd_prune_mode *m) {
    const size_t total = cd_prune_numel(s);
    if (!total || !m || !mode_ok(m)) return 0;
    const size_t cols = (size_t)s->cpg * (size_t)s->ksize, kpg = (size_t)(s->k / s->groups);
    switch (m->kind) {
    case CD_PRUNE_UNSTRUCTURED: return total;
    case CD_PRUNE_FILTER: return (size_t)s->k;
    case CD_PRUNE_CHANNEL: return (size_t)s->groups * (size_t)s->cpg;
    case CD_PRUNE_BLOCK: return (size_t)s->groups * ceil_div(kpg, (size_t)m->bh) * ceil_div(cols, (size_t)m->bw);
    case CD_PRUNE_NM: return (size_t)s->k * ceil_div(cols, (size_t)m->m);
    }
    return 0;
}

// A unit as a rectangle of the k x cols weight matrix.
typedef struct {
    size_t row0, rows; // filters [row0, row0 + rows)
    size_t col0, cols; // columns [col0, col0 + cols)
} rect;

// The rectangle of unit u (valid shape, mode and u assumed).
static rect unit_rect(const cd_prune_shape *s, const cd_prune_mode *m, size_t u) {
    const size_t cols = (size_t)s->cpg * (size_t)s->ksize, kpg = (size_t)(s->k / s->groups);
    rect r = {0, 1, 0, 1};
    switch (m->kind) {
    case CD_PRUNE_UNSTRUCTURED:
        r.row0 = u / cols;
        r.col0 = u % cols;
        break;
    case CD_PRUNE_FILTER:
        r.row0 = u;
        r.cols = cols;
        break;
    case CD_PRUNE_CHANNEL:
        r.row0 = u / (size_t)s->cpg * kpg;
        r.rows = kpg;
        r.col0 = u % (size_t)s->cpg * (size_t)s->ksize;
        r.cols = (size_t)s->ksize;
        break;
    case CD_PRUNE_BLOCK: {
        const size_t bh = (size_t)m->bh, bw = (size_t)m->bw;
        const size_t nbr = ceil_div(kpg, bh), nbc = ceil_div(cols, bw);
        const size_t g = u / (nbr * nbc), br = u % (nbr * nbc) / nbc, bc = u % nbc;
        r.row0 = g * kpg + br * bh;
        r.rows = bh < kpg - br * bh ? bh : kpg - br * bh;
        r.col0 = bc * bw;
        r.cols = bw < cols - bc * bw ? bw : cols - bc * bw;
        break;
    }
    case CD_PRUNE_NM: {
        const size_t runs = ceil_div(cols, (size_t)m->m);
        r.row0 = u / runs;
        r.col0 = u % runs * (size_t)m->m;
        r.cols = (size_t)m->m < cols - r.col0 ? (size_t)m->m : cols - r.col0;
        break;
    }
    }
    return r;
}

size_t cd_prune_unit_size(const cd_prune_shape *s, const cd_prune_mode *m, size_t u) {
    if (u >= cd_prune_units(s, m)) return 0;
    const rect r = unit_rect(s, m, u);
    return r.rows * r.cols;
}

// Score of a weight sum: L1 -> mean |w|, L2 -> RMS; NaN -> +inf; never -0.
static double finish_score(double acc, size_t size, int norm) {
    double v = norm == 1 ? acc / (double)size : sqrt(acc / (double)size);
    if (isnan(v)) return INFINITY;
    return v == 0.0 ? 0.0 : v;
}

static double rect_score(const float *w, size_t cols, rect r, int norm) {
    double acc = 0.0;
    for (size_t i = 0; i < r.rows; i++) {
        const float *row = w + (r.row0 + i) * cols + r.col0;
        if (norm == 1)
            for (size_t j = 0; j < r.cols; j++) acc += fabs((double)row[j]);
        else
            for (size_t j = 0; j < r.cols; j++) acc += (double)row[j] * row[j];
    }
    return finish_score(acc, r.rows * r.cols, norm);
}

static double weight_score(float v) {
    if (isnan(v)) return INFINITY;
    return v == 0.0f ? 0.0 : fabs((double)v);
}

int cd_prune_unit_scores(const float *w, const cd_prune_shape *s, const cd_prune_mode *m, double *score) {
    const size_t nu = cd_prune_units(s, m);
    if (!w || !score || !nu || m->kind == CD_PRUNE_NM) return CD_EPARAMS;
    const size_t cols = (size_t)s->cpg * (size_t)s->ksize;
    if (m->kind == CD_PRUNE_UNSTRUCTURED) {
        for (size_t u = 0; u < nu; u++) score[u] = weight_score(w[u]);
        return 0;
    }
    for (size_t u = 0; u < nu; u++) score[u] = rect_score(w, cols, unit_rect(s, m, u), m->norm);
    return 0;
}

static void zero_rect(float *w, size_t cols, rect r) {
    for (size_t i = 0; i < r.rows; i++) memset(w + (r.row0 + i) * cols + r.col0, 0, r.cols * sizeof *w);
}

int cd_prune_zero_unit(float *w, const cd_prune_shape *s, const cd_prune_mode *m, size_t u) {
    if (!w || m->kind == CD_PRUNE_NM || u >= cd_prune_units(s, m)) return CD_EPARAMS;
    zero_rect(w, (size_t)s->cpg * (size_t)s->ksize, unit_rect(s, m, u));
    return 0;
}

int cd_prune_count(const float *w, const cd_prune_shape *s, const cd_prune_mode *m, cd_prune_stat *out) {
    const size_t nu = cd_prune_units(s, m);
    if (!w || !out || !nu) return CD_EPARAMS;
    const size_t total = cd_prune_numel(s), cols = (size_t)s->cpg * (size_t)s->ksize;
    memset(out, 0, sizeof *out);
    out->total = total;
    for (size_t i = 0; i < total; i++) out->zeros += w[i] == 0.0f;
    out->units = nu;
    if (m->kind == CD_PRUNE_UNSTRUCTURED) {
        out->zero_units = out->zeros;
        return 0;
    }
    for (size_t u = 0; u < nu; u++) {
        const rect r = unit_rect(s, m, u);
        size_t nz = 0;
        for (size_t i = 0; i < r.rows; i++) {
            const float *row = w + (r.row0 + i) * cols + r.col0;
            for (size_t j = 0; j < r.cols; j++) nz += row[j] != 0.0f;
        }
        if (m->kind == CD_PRUNE_NM)
            out->zero_units += nz <= (size_t)m->n;
        else
            out->zero_units += nz == 0;
    }
    return 0;
}

// ---- selection ------------------------------------------------------------------

typedef struct {
    cd_prune_layer *layers;
    const cd_prune_mode *m;
    double **scores; // per layer unit scores; NULL for unstructured (|w| on the fly)
    uint64_t *hist;  // 65536 bins
} sel_ctx;

static uint64_t score_key(double v) {
    uint64_t k;
    memcpy(&k, &v, sizeof k); // v >= +0: the bit pattern orders like the value
    return k;
}

static uint64_t unit_key(const sel_ctx *c, int l, size_t u) {
    return score_key(c->scores ? c->scores[l][u] : weight_score(c->layers[l].w[u]));
}

static size_t unit_weight(const sel_ctx *c, int l, size_t u) {
    return c->m->kind == CD_PRUNE_UNSTRUCTURED ? 1 : cd_prune_unit_size(&c->layers[l].shape, c->m, u);
}

// Zeroes, among the units of layers [l0, l1), the prefix in ascending (score,
// layer, unit) order whose weight count is nearest to target (ties: shorter).
static void select_and_zero(sel_ctx *c, int l0, int l1, double target) {
    double total = 0;
    for (int l = l0; l < l1; l++) total += (double)cd_prune_numel(&c->layers[l].shape);
    if (target > total) target = total;
    if (!(target > 0)) return;
    uint64_t prefix = 0;
    double below = 0; // weight of the units whose key is below the current prefix range
    for (int shift = 48; shift >= 0; shift -= 16) {
        memset(c->hist, 0, 65536 * sizeof *c->hist);
        for (int l = l0; l < l1; l++) {
            const size_t nu = cd_prune_units(&c->layers[l].shape, c->m);
            for (size_t u = 0; u < nu; u++) {
                const uint64_t k = unit_key(c, l, u);
                if (shift == 48 || (k >> (shift + 16)) == (prefix >> (shift + 16)))
                    c->hist[(k >> shift) & 0xffff] += unit_weight(c, l, u);
            }
        }
        int b = 0;
        for (; b < 65535; b++) {
            if (below + (double)c->hist[b] >= target) break;
            below += (double)c->hist[b];
        }
        prefix |= (uint64_t)b << shift;
    }
    // below = weight of the units with key < prefix (all zeroed); the tied
    // units at prefix follow in order until the target is nearest.
    const uint64_t t = prefix;
    double have = below;
    int ties_done = 0;
    for (int l = l0; l < l1; l++) {
        cd_prune_layer *L = &c->layers[l];
        const size_t nu = cd_prune_units(&L->shape, c->m);
        const size_t cols = (size_t)L->shape.cpg * (size_t)L->shape.ksize;
        for (size_t u = 0; u < nu; u++) {
            const uint64_t k = unit_key(c, l, u);
            int zero = k < t;
            if (k == t && !ties_done) {
                const double sz = (double)unit_weight(c, l, u);
                if (have + sz <= target) {
                    zero = 1;
                    have += sz;
                } else {
                    zero = have + sz - target < target - have;
                    ties_done = 1;
                }
            }
            if (!zero) continue;
            if (c->m->kind == CD_PRUNE_UNSTRUCTURED)
                L->w[u] = 0.0f;
            else
                zero_rect(L->w, cols, unit_rect(&L->shape, c->m, u));
        }
    }
}

// ---- N:M ------------------------------------------------------------------------

typedef struct {
    double mag;
    size_t idx;
} mag_idx;

static int cmp_mag_idx(const void *a, const void *b) {
    const mag_idx *x = a, *y = b;
    if (x->mag != y->mag) return x->mag < y->mag ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

// Keeps the n largest |w| of every run of m columns (see prune.h).
static void prune_nm(cd_prune_layer *L, const cd_prune_mode *m, mag_idx *scratch) {
    const size_t nu = cd_prune_units(&L->shape, m);
    const size_t cols = (size_t)L->shape.cpg * (size_t)L->shape.ksize;
    for (size_t u = 0; u < nu; u++) {
        const rect r = unit_rect(&L->shape, m, u);
        float *run = L->w + r.row0 * cols + r.col0;
        const size_t keep = r.cols < (size_t)m->n ? r.cols : (size_t)m->n;
        if (keep == r.cols) continue;
        for (size_t j = 0; j < r.cols; j++) scratch[j] = (mag_idx){weight_score(run[j]), j};
        qsort(scratch, r.cols, sizeof *scratch, cmp_mag_idx);
        for (size_t j = 0; j < r.cols - keep; j++) run[scratch[j].idx] = 0.0f;
    }
}

// ---- entry ----------------------------------------------------------------------

int cd_prune_run(cd_prune_layer *layers, int n, const cd_prune_mode *m, double sparsity, int global) {
    if (n < 0 || (n > 0 && !layers) || !m || !mode_ok(m)) return CD_EPARAMS;
    if (m->kind != CD_PRUNE_NM && !(sparsity >= 0.0 && sparsity <= 1.0)) return CD_EPARAMS;
    for (int l = 0; l < n; l++)
        if (!layers[l].w || !cd_prune_numel(&layers[l].shape)) return CD_EPARAMS;
    if (n == 0) return 0;

    if (m->kind == CD_PRUNE_NM) {
        mag_idx *scratch = malloc((size_t)m->m * sizeof *scratch);
        if (!scratch) return CD_ENOMEM;
        for (int l = 0; l < n; l++) prune_nm(&layers[l], m, scratch);
        free(scratch);
        return 0;
    }

    sel_ctx c = {layers, m, NULL, malloc(65536 * sizeof(uint64_t))};
    int rc = 0;
    if (!c.hist) return CD_ENOMEM;
    if (m->kind != CD_PRUNE_UNSTRUCTURED) {
        c.scores = calloc((size_t)n, sizeof *c.scores);
        if (!c.scores) {
            rc = CD_ENOMEM;
            goto done;
        }
        for (int l = 0; l < n; l++) {
            const size_t nu = cd_prune_units(&layers[l].shape, m);
            if (!(c.scores[l] = malloc(nu * sizeof(double)))) {
                rc = CD_ENOMEM;
                goto done;
            }
            cd_prune_unit_scores(layers[l].w, &layers[l].shape, m, c.scores[l]);
            if (!global) continue;
            // Normalise by the layer's own statistic (mean |w| or RMS).
            const size_t total = cd_prune_numel(&layers[l].shape);
            double acc = 0.0;
            for (size_t i = 0; i < total; i++) {
                const double v = layers[l].w[i];
                acc += m->norm == 1 ? fabs(v) : v * v;
            }
            const double stat = finish_score(acc, total, m->norm);
            for (size_t u = 0; u < nu; u++) {
                double v = stat > 0.0 && isfinite(stat) ? c.scores[l][u] / stat : c.scores[l][u];
                c.scores[l][u] = isnan(v) ? INFINITY : v == 0.0 ? 0.0 : v;
            }
        }
    }
    if (global) {
        double total = 0;
        for (int l = 0; l < n; l++) total += (double)cd_prune_numel(&layers[l].shape);
        select_and_zero(&c, 0, n, sparsity * total);
    } else {
        for (int l = 0; l < n; l++) select_and_zero(&c, l, l + 1, sparsity * (double)cd_prune_numel(&layers[l].shape));
    }
done:
    if (c.scores)
        for (int l = 0; l < n; l++) free(c.scores[l]);
    free(c.scores);
    free(c.hist);
    return rc;
}
