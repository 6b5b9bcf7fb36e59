#include "tools/common/npy.h"

#include "core/errors.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAX_HEADER (1u << 20) // headers are tiny; refuse absurd lengths

// descr strings as numpy writes them on a little-endian machine.
static const struct {
    const char *descr;
    cd_dtype dt;
} g_descr[] = {
    {"<f4", CD_DTYPE_F32}, {"<f2", CD_DTYPE_F16}, {"<f8", CD_DTYPE_F64}, {"|i1", CD_DTYPE_I8},   {"|u1", CD_DTYPE_U8},
    {"<i2", CD_DTYPE_I16}, {"<i4", CD_DTYPE_I32}, {"<i8", CD_DTYPE_I64}, {"|b1", CD_DTYPE_BOOL},
};

size_t cd_npy_itemsize(cd_dtype dt) {
    switch (dt) {
#define XX(e, name, size) \
    case CD_DTYPE_##e: return size;
        CD_DTYPE_MAP(XX)
#undef XX
    case CD_DTYPE_INVALID: break;
    }
    return 0;
}

// Maps a descr to a dtype; accepts '=' (native, little-endian here) and the
// byte-order-free '|' for one-byte types written with '<'.
static cd_dtype dtype_from_descr(const char *s, size_t n) {
    if (n != 3) return CD_DTYPE_INVALID;
    char c0 = s[0];
    if (c0 == '=') c0 = '<';
    for (size_t i = 0; i < sizeof g_descr / sizeof g_descr[0]; i++) {
        const char *d = g_descr[i].descr;
        if (s[1] != d[1] || s[2] != d[2]) continue;
        if (c0 == d[0] || (d[0] == '|' && c0 == '<') || (d[0] == '<' && c0 == '|' && s[2] == '1')) return g_descr[i].dt;
    }
    return CD_DTYPE_INVALID;
}

static const char *descr_of(cd_dtype dt) {
    for (size_t i = 0; i < sizeof g_descr / sizeof g_descr[0]; i++)
        if (g_descr[i].dt == dt) return g_descr[i].descr;
    return NULL;
}

// A minimal parser for the header dict: {'descr': '<f4', 'fortran_order':
// False, 'shape': (2, 3), }. Keys may come in any order; each must appear once.
typedef struct {
    const char *p, *end;
} cursor;

static void skip_ws(cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) c->p++;
}

static int eat(cursor *c, char ch) {
    skip_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return 1;
    }
    return 0;
}

// Reads a quoted string; returns its start and length.
static int read_str(cursor *c, const char **s, size_t *n) {
    skip_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return 0;
    char q = *c->p++;
    const char *st = c->p;
    while (c->p < c->end && *c->p != q) c->p++;
    if (c->p >= c->end) return 0;
    *s = st;
    *n = (size_t)(c->p - st);
    c->p++;
    return 1;
}

static int parse_header(const char *h, size_t len, cd_npy *out, char *err, size_t errlen) {
    cursor c = {h, h + len};
    int have_descr = 0, have_fo = 0, have_shape = 0;
    if (!eat(&c, '{')) return cd_errf(CD_EPARAMS, err, errlen, "npy header: expected '{'");
    for (;;) {
        if (eat(&c, '}')) break;
        const char *key;
        size_t klen;
        if (!read_str(&c, &key, &klen)) return cd_errf(CD_EPARAMS, err, errlen, "npy header: expected a quoted key");
        if (!eat(&c, ':')) return cd_errf(CD_EPARAMS, err, errlen, "npy header: expected ':'");
        if (klen == 5 && memcmp(key, "descr", 5) == 0) {
            const char *v;
            size_t vlen;
            if (have_descr++) return cd_errf(CD_EPARAMS, err, errlen, "npy header: duplicate 'descr'");
            if (!read_str(&c, &v, &vlen))
                return cd_errf(CD_EPARAMS, err, errlen, "npy header: 'descr' is not a string");
            out->dtype = dtype_from_descr(v, vlen);
            if (out->dtype == CD_DTYPE_INVALID)
                return cd_errf(
                    CD_EDTYPE, err, errlen,
                    "npy: dtype '%.*s' not supported (f32, f16, f64, i8, u8, i16, i32, i64, bool; little-endian)",
                    (int)(vlen > 16 ? 16 : vlen), v);
        } else if (klen == 13 && memcmp(key, "fortran_order", 13) == 0) {
            if (have_fo++) return cd_errf(CD_EPARAMS, err, errlen, "npy header: duplicate 'fortran_order'");
            skip_ws(&c);
            if ((size_t)(c.end - c.p) >= 5 && memcmp(c.p, "False", 5) == 0) {
                c.p += 5;
            } else if ((size_t)(c.end - c.p) >= 4 && memcmp(c.p, "True", 4) == 0) {
                return cd_errf(CD_EPARAMS, err, errlen,
                               "npy: fortran_order arrays are not supported (save a C-order array)");
            } else {
                return cd_errf(CD_EPARAMS, err, errlen, "npy header: 'fortran_order' is not a boolean");
            }
        } else if (klen == 5 && memcmp(key, "shape", 5) == 0) {
            if (have_shape++) return cd_errf(CD_EPARAMS, err, errlen, "npy header: duplicate 'shape'");
            if (!eat(&c, '(')) return cd_errf(CD_EPARAMS, err, errlen, "npy header: 'shape' is not a tuple");
            out->rank = 0;
            for (;;) {
                if (eat(&c, ')')) break;
                skip_ws(&c);
                if (c.p >= c.end || !isdigit((unsigned char)*c.p))
                    return cd_errf(CD_EPARAMS, err, errlen, "npy header: bad dimension in 'shape'");
                int64_t v = 0;
                while (c.p < c.end && isdigit((unsigned char)*c.p)) {
                    if (v > (INT64_MAX - 9) / 10)
                        return cd_errf(CD_ETOO_LARGE, err, errlen, "npy: dimension too large");
                    v = v * 10 + (*c.p++ - '0');
                }
                if (c.p < c.end && *c.p == 'L') c.p++; // Python 2 longs
                if (out->rank >= CD_MAX_RANK)
                    return cd_errf(CD_ETOO_LARGE, err, errlen, "npy: rank above %d", CD_MAX_RANK);
                out->shape[out->rank++] = v;
                if (!eat(&c, ',')) {
                    if (!eat(&c, ')'))
                        return cd_errf(CD_EPARAMS, err, errlen, "npy header: expected ',' or ')' in 'shape'");
                    break;
                }
            }
        } else {
            return cd_errf(CD_EPARAMS, err, errlen, "npy header: unknown key '%.*s'", (int)(klen > 32 ? 32 : klen),
                           key);
        }
        if (!eat(&c, ',')) {
            if (!eat(&c, '}')) return cd_errf(CD_EPARAMS, err, errlen, "npy header: expected ',' or '}'");
            break;
        }
    }
    if (!have_descr || !have_fo || !have_shape)
        return cd_errf(CD_EPARAMS, err, errlen, "npy header: missing %s",
                       !have_descr ? "'descr'"
                       : !have_fo  ? "'fortran_order'"
                                   : "'shape'");
    return 0;
}

int cd_npy_read(const char *path, cd_npy *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f) return cd_errf(CD_EIO, err, errlen, "cannot open %s: %s", path, strerror(errno));
    int rc = 0;
    char *hdr = NULL;
    unsigned char pre[12];
    if (fread(pre, 1, 10, f) != 10 || memcmp(pre, NPY_MAGIC, 6) != 0) {
        rc = cd_errf(CD_EPARAMS, err, errlen, "%s: not a .npy file (bad magic)", path);
        goto done;
    }
    size_t hlen, prefix;
    if (pre[6] == 1) {
        hlen = pre[8] | (size_t)pre[9] << 8;
        prefix = 10;
    } else if (pre[6] == 2 || pre[6] == 3) {
        if (fread(pre + 10, 1, 2, f) != 2) {
            rc = cd_errf(CD_EPARAMS, err, errlen, "%s: truncated header", path);
            goto done;
        }
        hlen = pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
        prefix = 12;
    } else {
        rc = cd_errf(CD_EPARAMS, err, errlen, "%s: .npy version %d.%d not supported", path, pre[6], pre[7]);
        goto done;
    }
    (void)prefix;
    if (hlen == 0 || hlen > NPY_MAX_HEADER) {
        rc = cd_errf(CD_EPARAMS, err, errlen, "%s: bad header length %zu", path, hlen);
        goto done;
    }
    hdr = malloc(hlen);
    if (!hdr) {
        rc = cd_errf(CD_ENOMEM, err, errlen, "out of memory");
        goto done;
    }
    if (fread(hdr, 1, hlen, f) != hlen) {
        rc = cd_errf(CD_EPARAMS, err, errlen, "%s: truncated header", path);
        goto done;
    }
    char perr[200] = "";
    rc = parse_header(hdr, hlen, out, perr, sizeof perr);
    if (rc) {
        cd_errf(rc, err, errlen, "%s: %s", path, perr);
        goto done;
    }
    size_t item = cd_npy_itemsize(out->dtype);
    uint64_t total = item;
    for (int i = 0; i < out->rank; i++) {
        if (out->shape[i] != 0 && total > (UINT64_MAX >> 1) / (uint64_t)out->shape[i]) {
            rc = cd_errf(CD_ETOO_LARGE, err, errlen, "%s: array size overflows", path);
            goto done;
        }
        total *= (uint64_t)out->shape[i];
    }
    if (total > (uint64_t)SIZE_MAX / 2) {
        rc = cd_errf(CD_ETOO_LARGE, err, errlen, "%s: array too large", path);
        goto done;
    }
    // The data must be exactly the rest of the file.
    long here = ftell(f);
    if (here < 0 || fseek(f, 0, SEEK_END) != 0) {
        rc = cd_errf(CD_EIO, err, errlen, "%s: cannot seek", path);
        goto done;
    }
    long end = ftell(f);
    if (end < here || (uint64_t)(end - here) != total) {
        rc = cd_errf(CD_EPARAMS, err, errlen, "%s: data is %ld bytes, the header says %llu", path, end - here,
                     (unsigned long long)total);
        goto done;
    }
    fseek(f, here, SEEK_SET);
    out->nbytes = (size_t)total;
    if (total) {
        out->data = malloc(out->nbytes);
        if (!out->data) {
            rc = cd_errf(CD_ENOMEM, err, errlen, "out of memory for %zu bytes", out->nbytes);
            goto done;
        }
        if (fread(out->data, 1, out->nbytes, f) != out->nbytes) {
            rc = cd_errf(CD_EIO, err, errlen, "%s: short read", path);
            goto done;
        }
    }
done:
    free(hdr);
    fclose(f);
    if (rc) cd_npy_free(out);
    return rc;
}

int cd_npy_write(const char *path, cd_dtype dt, int rank, const int64_t *shape, const void *data, char *err,
                 size_t errlen) {
    const char *descr = descr_of(dt);
    if (!descr) return cd_errf(CD_EDTYPE, err, errlen, "npy: cannot write dtype %d", (int)dt);
    if (rank < 0 || rank > CD_MAX_RANK) return cd_errf(CD_EPARAMS, err, errlen, "npy: bad rank %d", rank);
    char dict[512];
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    uint64_t total = cd_npy_itemsize(dt);
    for (int i = 0; i < rank; i++) {
        if (shape[i] < 0) return cd_errf(CD_EPARAMS, err, errlen, "npy: negative dimension");
        n += snprintf(dict + n, sizeof dict - n, rank == 1 ? "%lld," : (i ? ", %lld" : "%lld"), (long long)shape[i]);
        total *= (uint64_t)shape[i];
    }
    n += snprintf(dict + n, sizeof dict - n, "), }");
    // Pad with spaces so magic + version + length + dict + '\n' is a multiple of 64.
    size_t pre = 10, hl = (size_t)n + 1;
    size_t pad = (64 - (pre + hl) % 64) % 64;
    hl += pad;
    unsigned char head[10] = {
        0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hl & 0xff), (unsigned char)(hl >> 8)};
    FILE *f = fopen(path, "wb");
    if (!f) return cd_errf(CD_EIO, err, errlen, "cannot create %s: %s", path, strerror(errno));
    int ok = fwrite(head, 1, 10, f) == 10 && fwrite(dict, 1, (size_t)n, f) == (size_t)n;
    for (size_t i = 0; ok && i < pad; i++) ok = fputc(' ', f) != EOF;
    ok = ok && fputc('\n', f) != EOF;
    ok = ok && (total == 0 || fwrite(data, 1, (size_t)total, f) == (size_t)total);
    if (fclose(f) != 0) ok = 0;
    if (!ok) return cd_errf(CD_EIO, err, errlen, "cannot write %s", path);
    return 0;
}

void cd_npy_free(cd_npy *n) {
    if (!n) return;
    free(n->data);
    n->data = NULL;
    n->nbytes = 0;
}
