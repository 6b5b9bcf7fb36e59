// Per-model settings: `<model file>.conf` next to the model, read with the
// daemon's config-file parser (cd_config_read).
//
//   # resnet18.onnx.conf
//   max_batch    = 16
//   max_delay_us = 2000
//   max_queue    = 512
//   max_shapes   = 4               # models with symbolic input dims:
//   input_shape  = 1x3x512x512     # plans kept, and the first one's size
#include "core/errors.h"
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

const cd_model_conf_key cd_model_conf_keys[CD_MODEL_CONF_NKEYS] = {
    {"max_batch", 1, CD_MAX_BATCH, offsetof(cd_model_conf, max_batch)},
    {"max_delay_us", 0, CD_MAX_DELAY_US, offsetof(cd_model_conf, max_delay_us)},
    {"max_queue", 1, CD_MAX_QUEUE, offsetof(cd_model_conf, max_queue)},
    {"max_shapes", 1, CD_MAX_SHAPES, offsetof(cd_model_conf, max_shapes)},
};

// The string key of a .conf (and of `load`): input_shape, checked here so
// that a bad one names its file and line. Returns 0 or -1 with why.
int cd_model_conf_input_shape(cd_model_conf *c, const char *val, char *why, size_t whylen) {
    cd_input_shape s[CD_MAX_TENSORS];
    int n;
    char e[200];
    if (strlen(val) >= sizeof c->input_shape || cd_input_shape_parse(val, s, CD_MAX_TENSORS, &n, e, sizeof e) != 0) {
        snprintf(why, whylen, "input_shape: %s", strlen(val) >= sizeof c->input_shape ? "too long" : e);
        return -1;
    }
    snprintf(c->input_shape, sizeof c->input_shape, "%s", val);
    return 0;
}

static int conf_line(void *ud, const char *key, const char *val, char *why, size_t whylen) {
    if (strcmp(key, "input_shape") == 0) return cd_model_conf_input_shape(ud, val, why, whylen);
    for (size_t i = 0; i < CD_MODEL_CONF_NKEYS; i++) {
        const cd_model_conf_key *k = &cd_model_conf_keys[i];
        if (strcmp(k->key, key) != 0) continue;
        char *end;
        errno = 0;
        long long x = strtoll(val, &end, 10);
        if (errno || end == val || *end != '\0') {
            snprintf(why, whylen, "%s: '%.64s' is not an integer", key, val);
            return -1;
        }
        if (x < k->min || x > k->max) {
            snprintf(why, whylen, "%s: %lld is out of range %lld..%lld", key, x, (long long)k->min, (long long)k->max);
            return -1;
        }
        int64_t v = x;
        memcpy((char *)ud + k->offset, &v, sizeof v);
        return 0;
    }
    snprintf(why, whylen, "unknown key '%.64s' (max_batch, max_delay_us, max_queue, max_shapes, input_shape)", key);
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
