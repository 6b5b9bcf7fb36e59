#ifndef CD_DAEMON_REGISTRY_H
#define CD_DAEMON_REGISTRY_H

// The model registry: name -> the current version of that model. Loop thread
// only, except cd_model_entry fields marked otherwise.
//
// A cd_model_entry is refcounted: the registry holds one reference, and every
// request that uses the model holds one while it is queued or running. `load`
// of an existing name swaps in the new entry atomically (from the loop's point
// of view): requests already holding the old one finish on it, later ones get
// the new one, and the old memory is freed when its last reference goes.
// References are taken and dropped on the loop thread only.

#include "core/histogram.h"
#include "daemon/settings.h"
#include "daemon/stats.h"
#include "daemon/workers.h"
#include "runtime/runtime.h"

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

// The per-model keys (`<model>.conf` files and `load` params) are the rows
// of the settings table with a model_key: each call returns the next such row
// after prev (NULL: the first), NULL after the last.
const cd_setting_desc *cd_model_key_next(const cd_setting_desc *prev);
// Its ordinal among the per-model keys (< 64: the generator checks), -1 for
// any other row.
int cd_model_key_index(const cd_setting_desc *key);
// The bytes of its field (an int64_t, or a char array).
size_t cd_model_key_bytes(const cd_setting_desc *key);
// c = the daemon-wide values of every per-model key.
void cd_model_conf_defaults(const cd_settings *set, cd_model_conf *c);
// One key from text, parsed and checked like its setting, the error naming
// the key. 0, or -1 with why.
int cd_model_conf_set(cd_model_conf *c, const cd_setting_desc *key, const char *val, char *why, size_t whylen);

typedef struct cd_model_entry {
    int refs;             // registry + in-flight requests (loop thread only)
    char name[256];       // registry name (CD_MAX_NAME bytes at most)
    char path[PATH_MAX];  // path as given, relative to --models
    cd_model *model;      // the loaded model (immutable, shared)
    cd_model_conf conf;   // scheduling settings in effect
    cd_sched_queue queue; // its requests waiting for a worker
    bool from_dir;        // loaded by the --models scan (SIGHUP may unload it)
    time_t mtime;         // the file's mtime and size when loaded (SIGHUP
    off_t size;           //   reloads it when they change)
    time_t conf_mtime;    // the same for its .conf (0: none)
    off_t conf_size;
    int nexecs;      // = 2 * number of workers
    cd_exec **execs; // execs[2i], execs[2i+1]: worker i's two buffers,
                     // created and used by worker i only (the second
                     // only when double buffering)
} cd_model_entry;

// Counters of one model name (kept across `load` replacements; dropped on
// `unload`). Updated on the loop thread (the histograms are lock-free and
// could be fed from workers too).
typedef struct {
    uint64_t requests;               // infer requests naming it
    uint64_t errors;                 // of those, answered with an error
    uint64_t ok;                     // of those, answered with a result
    uint64_t by_code[CD_STATS_NERR]; // those errors by code (index -status)
    uint64_t batches;                // successful cd_model_run calls
    uint64_t items;                  // batch items those runs computed
    cd_histogram batch_size;         // items per successful model run
    cd_histogram queue_ns;           // received -> its run began (requests that ran)
    cd_histogram compute_ns;         // the model run it was part of
    cd_histogram total_ns;           // received -> answer queued for writing (every answer)
} cd_model_counters;

typedef struct cd_registry cd_registry;

int cd_registry_init(cd_registry **out, int nworkers);
// Drops every entry (their memory goes once unreferenced).
void cd_registry_free(cd_registry *r);

// Installs e under e->name (taking the caller's reference), replacing and
// releasing any previous entry of that name. Returns 0 or CD_ENOMEM.
int cd_registry_put(cd_registry *r, cd_model_entry *e);
// Removes a name. Returns 0 or CD_ENOT_FOUND.
int cd_registry_remove(cd_registry *r, const char *name, size_t len);
// The current entry of a name with a new reference, or NULL.
cd_model_entry *cd_registry_get(cd_registry *r, const char *name, size_t len);
// The counters of a name, or NULL when it is not loaded.
cd_model_counters *cd_registry_counters(cd_registry *r, const char *name, size_t len);

size_t cd_registry_count(const cd_registry *r);
// The i-th entry (0..count-1), in load order, without a reference.
const cd_model_entry *cd_registry_at(const cd_registry *r, size_t i);
const cd_model_counters *cd_registry_counters_at(const cd_registry *r, size_t i);

// Wraps a loaded model in a new entry with one reference. Returns NULL when
// out of memory (the model is then still the caller's).
cd_model_entry *cd_model_entry_new(const char *name, const char *path, cd_model *m, const cd_model_conf *conf,
                                   cd_batch_fn run, int nworkers);
void cd_model_entry_ref(cd_model_entry *e);
// Drops a reference; frees the execs and the model with the last one.
void cd_model_entry_unref(cd_model_entry *e);

// Resolves `rel` (as sent in `load`) inside models_dir into out (PATH_MAX).
// Returns 0, CD_EACCESS (no models dir, absolute path, a ".." component, or a
// symlink that leads outside the directory), or CD_EIO (missing, not a
// regular file). err gets the reason.
// Reads `<model_path>.conf` (`key = value` lines as in the daemon's config
// file; the per-model keys) into c, over what c holds. A missing file is
// fine (0, *mtime = 0). Returns 0, or CD_EPARAMS / CD_EIO with err naming
// file:line. mtime/size (may be NULL) get the file's.

int cd_model_conf_read(const char *model_path, cd_model_conf *c, time_t *mtime, off_t *size, char *err, size_t errlen);

int cd_model_path_resolve(const char *models_dir, const char *rel, char *out, char *err, size_t errlen);

#endif // CD_DAEMON_REGISTRY_H
