// Calibration inputs of convctl quantize (quantize.h): the .npy batches of
// a folder, checked up front, or seeded uniform random items.

#include "tools/convctl/quantize.h"

#include "core/errors.h"
#include "tools/convctl/convctl.h"
#include "tools/common/npy.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

// Lists and checks every .npy of dir (dtype, rank, per-item dims) before
// anything runs. Returns the exit status.
int ctl_calib_open_dir(ctl_calib_src *c, const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return ctl_fail_msg("E_IO: --calib %s: cannot open the folder: %s", dir, strerror(errno));
    int cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".npy") != 0) continue;
        if (c->nfiles == cap) {
            cap = cap ? cap * 2 : 16;
            char **f = realloc(c->files, (size_t)cap * sizeof *f);
            if (!f) {
                closedir(d);
                return ctl_fail_msg("E_NOMEM: out of memory");
            }
            c->files = f;
        }
        char *p = malloc(strlen(dir) + len + 2);
        if (!p) {
            closedir(d);
            return ctl_fail_msg("E_NOMEM: out of memory");
        }
        sprintf(p, "%s/%s", dir, e->d_name);
        c->files[c->nfiles++] = p;
    }
    closedir(d);
    if (!c->nfiles) return ctl_fail_msg("E_PARAMS: --calib %s: no .npy file in the folder", dir);
    qsort(c->files, (size_t)c->nfiles, sizeof *c->files, cmp_str);
    char want[128], err[512];
    ctl_fmt_shape(want, sizeof want, c->rank, c->shape);
    for (int i = 0; i < c->nfiles; i++) {
        cd_npy a;
        int rc = cd_npy_read(c->files[i], &a, err, sizeof err);
        if (rc) return ctl_fail_msg("%s: --calib: %s", cd_err_name(rc), err);
        int ok = a.dtype == CD_DTYPE_F32 && a.rank == c->rank && a.shape[0] >= 1;
        for (int k = 1; ok && k < c->rank; k++) ok = a.shape[k] == c->shape[k];
        if (!ok) {
            char got[128];
            ctl_fmt_shape(got, sizeof got, a.rank, a.shape);
            cd_npy_free(&a);
            return ctl_fail_msg("E_PARAMS: --calib: %s is %s%s, the model's input wants float32 [N, ...] with "
                                "per-item dims of %s",
                                c->files[i], cd_dtype_name(a.dtype), got, want);
        }
        c->items += (int)a.shape[0];
        cd_npy_free(&a);
    }
    return CTL_EXIT_OK;
}

void ctl_calib_close(ctl_calib_src *c) {
    for (int i = 0; i < c->nfiles; i++) free(c->files[i]);
    free(c->files);
}

static float rand_uniform(uint64_t *s) { // xorshift64*: [-1, 1)
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    uint64_t r = *s * 0x2545F4914F6CDD1Dull;
    return (float)((double)(r >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

// Calls fn(ud, item, index) on every calibration item, in the same order on
// every call. Returns 0 or the first non-zero fn or read status.
int ctl_calib_each(const ctl_calib_src *c, int (*fn)(void *ud, const float *x, int index), void *ud) {
    if (!c->nfiles) {
        uint64_t s = c->seed * 0x9E3779B97F4A7C15ull + 0x1234567ull;
        float *x = malloc(c->item * sizeof(float));
        if (!x) return ctl_fail_msg("E_NOMEM: out of memory");
        int rc = 0;
        for (int i = 0; i < c->random_n && !rc; i++) {
            for (size_t k = 0; k < c->item; k++) x[k] = rand_uniform(&s);
            rc = fn(ud, x, i);
        }
        free(x);
        return rc;
    }
    int index = 0, rc = 0;
    char err[512];
    for (int f = 0; f < c->nfiles && !rc; f++) {
        cd_npy a;
        if ((rc = cd_npy_read(c->files[f], &a, err, sizeof err))) return ctl_fail_msg("%s: %s", cd_err_name(rc), err);
        for (int64_t i = 0; i < a.shape[0] && !rc; i++)
            rc = fn(ud, (const float *)a.data + (size_t)i * c->item, index++);
        cd_npy_free(&a);
    }
    return rc;
}
