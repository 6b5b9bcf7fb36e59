#ifndef CD_DAEMON_SETTINGS_H
#define CD_DAEMON_SETTINGS_H

// convd's settings. ONE table (`cd_setting_table`) describes every setting:
// name, type, range, default, flags and help. Its rows are data,
// daemon/settings.toml, made C at build time by scripts/gen-settings-table.py
// (which checks them); settings.c reads the table. The command-line flags
// (`--name VALUE` or `--name=VALUE`), the config file (`name = value` lines),
// `--help` and the settings section of the `stats` method are all generated
// from it. Precedence: built-in default < config file < command line.

#include <msgpack.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>

#define CD_SETTINGS_PATH_MAX 4096
#define CD_SOCKET_PATH_MAX 107 // sun_path minus the NUL
// The default socket when --socket is not given: CD_SYSTEM_SOCKET for root,
// $XDG_RUNTIME_DIR/CD_SOCKET_NAME for anyone else (the clients use the same
// rule; see cd_settings_default_socket).
#define CD_SYSTEM_SOCKET_DIR "/run/convd"
#define CD_SYSTEM_SOCKET CD_SYSTEM_SOCKET_DIR "/convd.sock"
#define CD_SOCKET_NAME "convd.sock"
// Upper bounds of a model's scheduling settings besides max_batch
// (CD_MAX_BATCH, core/limits.h): the daemon-wide defaults of the table and
// the per-model keys (their `model_key`, daemon/model-conf.h) share them.
#define CD_MAX_DELAY_US 10000000 // max-delay-us / max_delay_us (10 s)
#define CD_MAX_QUEUE 1000000     // max-queue / max_queue

// The values, filled from the table. Field names match the setting names with
// '-' replaced by '_'.
typedef struct {
    char socket[CD_SOCKET_PATH_MAX + 1];     // Unix socket path to listen on
    char models[CD_SETTINGS_PATH_MAX];       // models directory ("" = none)
    int64_t threads;                         // compute threads of the executor, 0 = the affinity mask's CPUs
    int64_t lanes;                           // 1: waiting runs may run side by side, a thread each
    int64_t fill_batches;                    // 1: requests wait to fill the batch after a running one
    int64_t workers;                         // inference worker threads
    int64_t max_batch;                       // default max_batch of loaded models
    char device[32];                         // "cpu"
    int64_t max_message;                     // largest accepted message, bytes
    int64_t log_level;                       // a cd_log_level
    char config[CD_SETTINGS_PATH_MAX];       // config file read ("" = none)
    int64_t max_connections;                 // concurrent connections accepted
    int64_t max_inflight;                    // unanswered requests per connection
    int64_t drain_timeout;                   // seconds to finish in-flight work at shutdown
    int64_t max_delay_us;                    // default dynamic-batching delay of models
    int64_t max_queue;                       // default queued requests per model
    char metrics_file[CD_SETTINGS_PATH_MAX]; // Prometheus textfile ("" = none)
    int64_t metrics_interval;                // seconds between metrics-file writes
    int64_t worker_spin_us;                  // idle workers poll this long before sleeping
    int64_t tune;                            // 1: time dense/sparse kernels per layer at load (runtime planner)
    char tune_cache[CD_SETTINGS_PATH_MAX];   // folder of the tuning cache ("" = $XDG_CACHE_HOME/convd)
    // -- access control and bounded shutdown (daemon/access.c, server.c) --
    char socket_mode[8];    // octal mode of the socket file ("0660")
    char socket_group[64];  // group of the socket file ("" = the daemon's)
    char admin_group[64];   // its members may call admin methods ("" = none)
    int64_t shutdown_grace; // seconds after the drain before a forced exit
    // -- limits: connection timeouts, the request-memory budget, replies, models --
    int64_t idle_timeout;      // s a connection may sit idle (0 = never closed)
    int64_t read_timeout;      // s one message may take to arrive (0 = no limit)
    int64_t max_buffered;      // bytes of requests held at once (0 = 8 x max-message)
    int64_t max_reply;         // largest reply (infer outputs), bytes
    int64_t max_models;        // models loaded at once
    int64_t max_model_bytes;   // largest model file
    int64_t max_pending_loads; // client `load`s queued or running
    int64_t max_shapes;        // input sizes planned at once per model with symbolic dims
    char input_shape[256];     // the first plan's sizes of such models ("" = refused)
    // -- the runtime's options (cd_runtime_options, set once at start) and the infer path --
    int64_t max_isa;                       // cap of our kernels: an index of cd_max_isa_names
    int64_t cpu_kernels;                   // 0 auto, 1 ref (reference kernels everywhere)
    int64_t plan;                          // 0 auto, 1 dense, 2 sparse, 3 compact
    int64_t int8;                          // 0 auto, 1 off, 2 on (int8 kernels of quantized models)
    int64_t batch_split;                   // 0 auto, 1 off, 2 on (batches image by image)
    int64_t batch_lanes;                   // 0 auto, 1 off, 2 on (a split batch's images in lanes)
    int64_t winograd;                      // 0 auto, 1 off, 2 on, 3 f2, 4 f4, 5 f6, 6 onednn (Winograd 3x3)
    int64_t bf16;                          // 0 off, 1 auto, 2 on (the dense f32 convs in bf16)
    int64_t profile;                       // 1: log per-layer times when a worker's exec is freed
    char hip_plugin[CD_SETTINGS_PATH_MAX]; // the GPU=hip plugin ("" = next to the binary)
    int64_t double_buffer;                 // 0 auto (where it overlaps), 1 off, 2 on
    // -- shared-memory regions (daemon/regions.c) --
    int64_t max_regions_per_conn;      // regions one connection may hold
    int64_t max_region_bytes_per_conn; // bytes of regions one connection may hold
    int64_t max_regions;               // regions held by all connections together
    int64_t max_region_bytes;          // bytes of regions held by all connections together
} cd_settings;

// The values of --max-isa, by index ("native": no cap); the runtime's
// max_isa gets the name, "" for native. A [choices] list of settings.toml.
extern const char *const cd_max_isa_names[];

// The request-memory budget in effect: max-buffered, or 8 x max-message
// when it is 0.
int64_t cd_settings_max_buffered(const cd_settings *s);

typedef enum {
    CD_SET_STR,    // free text (bounded by the field size)
    CD_SET_PATH,   // a file system path
    CD_SET_INT,    // integer in [min, max]
    CD_SET_SIZE,   // byte count in [min, max]; accepts K/M/G (binary) suffixes
    CD_SET_ENUM,   // one of `choices`; stored as its index
    CD_SET_ACTION, // command-line only action without value (--help)
} cd_setting_type;

// Setting flags.
enum {
    CD_SETF_CLI_ONLY = 1 << 0, // not accepted in the config file
    CD_SETF_NO_STATS = 1 << 1, // not shown in `stats`
    CD_SETF_RELOAD = 1 << 2,   // SIGHUP applies a new value from the config file
};

typedef struct {
    const char *name; // flag and config-file key ("max-message")
    cd_setting_type type;
    int64_t min, max;           // INT/SIZE: inclusive range; STR/PATH: max length
    const char *def;            // default, as text (parsed like user input)
    unsigned flags;             // CD_SETF_*
    const char *help;           // one line for --help
    const char *arg;            // placeholder in --help ("PATH", "N")
    size_t offset;              // field in cd_settings
    const char *const *choices; // ENUM: NULL-terminated names
    // docs/OPERATIONS.md's settings table (cd_settings_print_markdown):
    const char *doc;         // the meaning column, markdown (NULL: help)
    const char *doc_default; // the default column (NULL: from def)
    // STR: a further check of the text (NULL: none); 0, or -1 with why.
    int (*check)(const char *value, char *why, size_t whylen);
    // A per-model key too (NULL: daemon-wide only): its name in `<model>.conf`
    // files and `load` params, and its field in cd_model_conf
    // (daemon/model-conf.h), which the daemon-wide value is the default of.
    const char *model_key;
    size_t model_offset;
} cd_setting_desc;

extern const cd_setting_desc cd_setting_table[];
extern const size_t cd_setting_count;

// What cd_settings_parse decided.
typedef enum {
    CD_SETTINGS_RUN = 0,      // start the daemon
    CD_SETTINGS_HELP = 1,     // --help printed, exit 0
    CD_SETTINGS_VERSION = 2,  // --version printed, exit 0
    CD_SETTINGS_BAD = 3,      // bad flag/value/file: message printed, exit 2
    CD_SETTINGS_MARKDOWN = 4, // --settings-markdown printed, exit 0
} cd_settings_outcome;

// Fills s from defaults, then the config file (when --config is given), then
// argv. Errors go to stderr as one clear line naming the flag or file:line.
cd_settings_outcome cd_settings_parse(cd_settings *s, int argc, char **argv);

// Sets one setting from text, parsed and range-checked per its type.
// Returns 0, or -1 with err naming the setting and the problem.
int cd_settings_set(cd_settings *s, const cd_setting_desc *d, const char *value, char *err, size_t errlen);
// The parser behind it: value into *field (d's type: an int64_t, or a char
// array of d->max + 1 bytes), err naming `label`. Per-model keys use it with
// their own name and field.
int cd_setting_parse(const cd_setting_desc *d, const char *label, const char *value, void *field, char *err,
                     size_t errlen);

// Finds a setting by name (NULL when unknown).
const cd_setting_desc *cd_settings_find(const char *name, size_t len);

// One `key = value` line of a config file. Returns 0, or -1 with why.
typedef int (*cd_config_line_fn)(void *ud, const char *key, const char *value, char *why, size_t whylen);
// The config-file parser shared by convd's config and the per-model .conf
// files: `key = value` lines, '#' comments at the start of a line or after
// whitespace, blank lines ignored; fn gets each pair (trimmed). Returns 0, or
// -1 with err naming file:line.
int cd_config_read(const char *path, cd_config_line_fn fn, void *ud, char *err, size_t errlen);

// Reads a config file (`name = value` lines, '#' comments at the start of a
// line or after whitespace). Returns 0, or -1 with err naming file:line.
int cd_settings_load_file(cd_settings *s, const char *path, char *err, size_t errlen);

// The default socket path for this process (see CD_SYSTEM_SOCKET): 0 and
// out filled, or -1 with err (XDG_RUNTIME_DIR unset for a non-root user, or
// the path too long).
int cd_settings_default_socket(char *out, size_t outlen, char *err, size_t errlen);

// Prints --help text generated from the table.
void cd_settings_print_help(FILE *f);

// Prints the settings table of docs/OPERATIONS.md (`convd
// --settings-markdown`; scripts/gen-settings-doc puts it there and a test
// checks that the doc holds exactly this): one row per setting that takes a
// value, with its default, range and meaning.
void cd_settings_print_markdown(FILE *f);

// Packs {name: value} for every setting without CD_SETF_NO_STATS.
int cd_settings_pack(msgpack_packer *pk, const cd_settings *s);

#endif // CD_DAEMON_SETTINGS_H
