// The sizes to plan inputs with symbolic dims at (runtime.h,
// cd_input_shape): "[name=]1x3x512x512[,...]" from flags and settings.

#include "core/errors.h"
#include "runtime/runtime.h"

#include <string.h>

int cd_input_shape_parse(const char *spec, cd_input_shape *out, int max, int *n, char *err, size_t errlen) {
    *n = 0;
    const char *p = spec;
    while (*p) {
        if (*n >= max) return cd_errf(CD_EPARAMS, err, errlen, "input shape '%.64s': more than %d inputs", spec, max);
        cd_input_shape *s = &out[*n];
        memset(s, 0, sizeof *s);
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        const char *dims = p;
        if (eq) {
            size_t nl = (size_t)(eq - p);
            if (nl == 0 || nl >= sizeof s->name)
                return cd_errf(CD_EPARAMS, err, errlen, "input shape '%.64s': bad input name", spec);
            memcpy(s->name, p, nl);
            dims = eq + 1;
        }
        const char *q = dims, *stop = p + len;
        while (q < stop) {
            if (s->rank >= CD_MAX_RANK)
                return cd_errf(CD_EPARAMS, err, errlen, "input shape '%.64s': rank above %d", spec, CD_MAX_RANK);
            int64_t v = 0;
            const char *d0 = q;
            while (q < stop && *q >= '0' && *q <= '9' && v <= (1 << 24)) v = v * 10 + (*q++ - '0');
            if (q == d0 || v < 1 || v > (1 << 24) || (q < stop && *q != 'x'))
                return cd_errf(CD_EPARAMS, err, errlen,
                               "input shape '%.64s': write [name=]1x3x512x512 (dims 1..%d), several joined by ','",
                               spec, 1 << 24);
            s->shape[s->rank++] = v;
            if (q < stop) q++; // the 'x'
            if (q == stop && stop[-1] == 'x')
                return cd_errf(CD_EPARAMS, err, errlen, "input shape '%.64s': trailing 'x'", spec);
        }
        if (s->rank < 1) return cd_errf(CD_EPARAMS, err, errlen, "input shape '%.64s': no dims", spec);
        (*n)++;
        p = end ? end + 1 : stop;
        if (end && !*p) return cd_errf(CD_EPARAMS, err, errlen, "input shape '%.64s': trailing ','", spec);
    }
    return 0;
}

const cd_input_shape *cd_input_shape_find(const cd_input_shape *specs, int n, const char *name, int rank) {
    for (int i = 0; i < n; i++)
        if (specs[i].name[0] && strcmp(specs[i].name, name) == 0) return specs[i].rank == rank ? &specs[i] : NULL;
    for (int i = 0; i < n; i++)
        if (!specs[i].name[0] && specs[i].rank == rank) return &specs[i];
    return NULL;
}
