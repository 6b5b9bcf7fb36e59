#ifndef CD_DAEMON_MODEL_CONF_H
#define CD_DAEMON_MODEL_CONF_H

// Scheduling settings of one model: daemon defaults, then the model's
// `<file>.conf` next to it, then the `load` params. Each field is a row of the
// settings table with a `model_key` (daemon/settings.toml): its range, its
// parser and its default are that row's, so the daemon-wide flag and the
// per-model key cannot disagree. The model's registry entry holds the one
// copy; its queue reads it there.

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int64_t max_batch;     // largest batch per request and per model run
    int64_t max_delay_us;  // dynamic batching: wait this long for more items
    int64_t max_queue;     // queued requests before E_OVERLOADED
    int64_t max_shapes;    // input sizes planned at once (models with symbolic dims)
    char input_shape[256]; // their first plan's sizes ("[name=]1x3xHxW,..."; "" none)
} cd_model_conf;

// The check of an input-shape spec ("[name=]1x3xHxW[,...]", or "" for none):
// the `check` of the input-shape row, for the flag and the per-model key
// alike. 0, or -1 with why.
int cd_input_shape_check(const char *spec, char *why, size_t whylen);

#endif
