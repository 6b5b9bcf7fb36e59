// Per-model settings: `<model file>.conf` next to the model, read with the
// daemon's config-file parser (cd_config_read), and the same keys in `load`.
//
//   # resnet18.onnx.conf
//   max_batch    = 16
//   max_delay_us = 2000
//   max_queue    = 512
//   max_shapes   = 4               # models with symbolic input dims:
//   input_shape  = 1x3x512x512     # plans kept, and the first one's size
//
// The keys are the rows of the settings table with a `model_key`
// (daemon/settings.toml): one parser, one range and one default per key.
#include "daemon/registry.h"
#include "daemon/settings.h"
#include "core/errors.h"
#include "core/limits.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int cd_input_shape_check(const char *spec, char *why, size_t whylen) {
    cd_input_shape s[CD_MAX_TENSORS];
    int n;
    return *spec && cd_input_shape_parse(spec, s, CD_MAX_TENSORS, &n, why, whylen) != 0 ? -1 : 0;
}

const cd_setting_desc *cd_model_key_next(const cd_setting_desc *prev) {
    const cd_setting_desc *end = cd_setting_table + cd_setting_count;
    for (const cd_setting_desc *d = prev ? prev + 1 : cd_setting_table; d < end; d++)
        if (d->model_key) return d;
    return NULL;
}

int cd_model_key_index(const cd_setting_desc *key) {
    int i = 0;
    for (const cd_setting_desc *d = cd_model_key_next(NULL); d; d = cd_model_key_next(d), i++)
        if (d == key) return i;
    return -1;
}

size_t cd_model_key_bytes(const cd_setting_desc *key) {
    return key->type == CD_SET_STR ? (size_t)key->max + 1 : sizeof(int64_t);
}

void cd_model_conf_defaults(const cd_settings *set, cd_model_conf *c) {
    memset(c, 0, sizeof *c);
    for (const cd_setting_desc *d = cd_model_key_next(NULL); d; d = cd_model_key_next(d))
        memcpy((char *)c + d->model_offset, (const char *)set + d->offset, cd_model_key_bytes(d));
}

int cd_model_conf_set(cd_model_conf *c, const cd_setting_desc *key, const char *val, char *why, size_t whylen) {
    return cd_setting_parse(key, key->model_key, val, (char *)c + key->model_offset, why, whylen);
}

static int conf_line(void *ud, const char *key, const char *val, char *why, size_t whylen) {
    for (const cd_setting_desc *d = cd_model_key_next(NULL); d; d = cd_model_key_next(d))
        if (strcmp(d->model_key, key) == 0) return cd_model_conf_set(ud, d, val, why, whylen);
    size_t l = (size_t)snprintf(why, whylen, "unknown key '%.64s' (", key);
    for (const cd_setting_desc *d = cd_model_key_next(NULL); d && l < whylen; d = cd_model_key_next(d))
        l += (size_t)snprintf(why + l, whylen - l, "%s%s", d->model_key, cd_model_key_next(d) ? ", " : ")");
    return -1;
}

int cd_model_conf_read(const char *model_path, cd_model_conf *c, time_t *mtime, off_t *size, char *err, size_t errlen) {
    char path[PATH_MAX + 8];
    snprintf(path, sizeof path, "%s.conf", model_path);
    struct stat st;
    if (mtime) *mtime = 0;
    if (size) *size = 0;
    if (stat(path, &st) != 0) {
        if (errno == ENOENT) return 0;
        snprintf(err, errlen, "cannot stat %s: %s", path, strerror(errno));
        return CD_EIO;
    }
    if (mtime) *mtime = st.st_mtime;
    if (size) *size = st.st_size;
    cd_model_conf tmp = *c;
    if (cd_config_read(path, conf_line, &tmp, err, errlen) != 0) return CD_EPARAMS;
    *c = tmp;
    return 0;
}
