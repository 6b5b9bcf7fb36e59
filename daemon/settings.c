#include "daemon/settings.h"

#include "core/errors.h"
#include "core/limits.h"
#include "daemon/version.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const log_levels[] = {"debug", "info", "warn", "error", NULL};
static const char *const off_on[] = {"off", "on", NULL};
const char *const cd_max_isa_names[] = {"native", "avx512", "avx2", "scalar", NULL};
static const char *const cpu_kernel_modes[] = {"auto", "ref", NULL};
static const char *const plan_modes[] = {"auto", "dense", "sparse", "compact", NULL};
static const char *const auto_off_on[] = {"auto", "off", "on", NULL};

#define OFF(field) offsetof(cd_settings, field)
#define FSIZE(field) ((int64_t)sizeof(((cd_settings *)0)->field) - 1)

// The one table. Ranges: INT/SIZE inclusive; STR/PATH max = field capacity.
const cd_setting_desc cd_setting_table[] = {
    {"socket", CD_SET_PATH, 0, FSIZE(socket), "", 0,
     "Unix socket path to listen on [default: " CD_SYSTEM_SOCKET " as root, else "
     "$XDG_RUNTIME_DIR/" CD_SOCKET_NAME "]",
     "PATH", OFF(socket), NULL,
     .doc = "Unix socket to listen on. The default is what `convctl`, libconvd and the Python "
            "client use when given no path and no `$CONVD_SOCKET` (the same rule, for the user "
            "running them). As root, `/run/convd` is created (0755) if missing; a non-root "
            "daemon without `XDG_RUNTIME_DIR` needs `--socket` (exit 1 otherwise). The directory "
            "must not be writable by others unless sticky, and must belong to root or the "
            "daemon's user (see \"The socket file at start\")",
     .doc_default = "`/run/convd/convd.sock` as root, else `$XDG_RUNTIME_DIR/convd.sock`"},
    {"models", CD_SET_PATH, 0, FSIZE(models), "", 0,
     "directory of *.onnx models loaded at start; `load` paths resolve inside it", "DIR", OFF(models), NULL,
     .doc = "every `*.onnx` in it is loaded at start (name = file stem; files sorted by name); a "
            "model that fails to load is logged and skipped, never fatal. `load` paths resolve "
            "inside it only; without it `load` is refused (`E_ACCESS`)"},
    {"threads", CD_SET_INT, 0, 1024, "0", 0, "intra-op threads for the kernels (0 = all cores)", "N", OFF(threads),
     NULL, .doc = "intra-op threads of the kernels (0 = all cores)"},
    {"workers", CD_SET_INT, 1, 256, "2", 0, "inference worker threads (requests run on them, never on the event loop)",
     "N", OFF(workers), NULL,
     .doc = "worker threads that run `infer` and `load` (each with its own activation arena per "
            "model)"},
    {"max-batch", CD_SET_INT, 1, CD_MAX_BATCH, "8", CD_SETF_RELOAD,
     "largest batch of models loaded from --models (and of `load` without max_batch)", "N", OFF(max_batch), NULL,
     .doc = "`max_batch` of models loaded from `--models`, and of `load` without one"},
    {"device", CD_SET_STR, 1, FSIZE(device), "cpu", 0,
     "execution device: cpu, hip-emu (HIP kernels on the CPU emulator), hip[:N] (AMD GPU, GPU=hip plugin)", "DEV",
     OFF(device), NULL,
     .doc = "execution device: `cpu`; `hip-emu`, the HIP kernels on the CPU emulator of the HIP "
            "execution model (for tests: slow); `hip` or `hip:N`, an AMD GPU through the GPU=hip "
            "plugin (`hip-plugin`)"},
    {"max-message", CD_SET_SIZE, CD_MAX_MESSAGE_MIN, (int64_t)1 << 30, "64M", 0,
     "largest accepted message in bytes (K/M/G suffixes allowed)", "BYTES", OFF(max_message), NULL,
     .doc = "largest accepted message; larger ones are answered `E_TOO_LARGE` and that "
            "connection is closed"},
    {"log-level", CD_SET_ENUM, 0, 3, "info", CD_SETF_RELOAD, "lowest level logged: debug|info|warn|error", "LEVEL",
     OFF(log_level), log_levels, .doc = "lowest level logged"},
    {"config", CD_SET_PATH, 0, FSIZE(config), "", CD_SETF_CLI_ONLY,
     "read settings from FILE (`name = value` lines; flags override it)", "FILE", OFF(config), NULL,
     .doc = "read settings from this file (command line only)"},
    {"max-connections", CD_SET_INT, 1, 1000000, "1024", 0,
     "concurrent connections; more are answered E_OVERLOADED and closed "
     "(also capped by RLIMIT_NOFILE)",
     "N", OFF(max_connections), NULL,
     .doc = "open connections; more are answered `E_OVERLOADED` (msgid 0) and closed. Lowered at "
            "start to RLIMIT_NOFILE minus 32 (the soft limit is first raised to the hard one), "
            "with a warning"},
    {"max-inflight", CD_SET_INT, 1, 1000000, "1024", CD_SETF_RELOAD,
     "unanswered requests per connection before its reads pause", "N", OFF(max_inflight), NULL,
     .doc = "unanswered requests per connection before convd stops reading from it (TCP-style "
            "backpressure, nothing is refused)"},
    {"drain-timeout", CD_SET_INT, 0, 3600, "30", CD_SETF_RELOAD,
     "seconds SIGTERM/SIGINT waits for in-flight work before closing connections", "SECONDS", OFF(drain_timeout), NULL,
     .doc = "how long shutdown waits for connections to finish (0: close them at once)"},
    {"max-delay-us", CD_SET_INT, 0, CD_MAX_DELAY_US, "0", CD_SETF_RELOAD,
     "dynamic batching: how long a model's first queued request waits for more "
     "(default of models loaded later; per model: .conf file, `load`)",
     "US", OFF(max_delay_us), NULL,
     .doc = "dynamic batching: how long a model's oldest queued request may wait for more to "
            "join its run (default of models loaded later; per model: `.conf`, `load`)"},
    {"max-queue", CD_SET_INT, 1, CD_MAX_QUEUE, "2048", CD_SETF_RELOAD,
     "queued infer requests per model; more are answered E_OVERLOADED at once "
     "(default of models loaded later)",
     "N", OFF(max_queue), NULL,
     .doc = "queued `infer` requests per model; more are answered `E_OVERLOADED` at once "
            "(default of models loaded later)"},
    {"metrics-file", CD_SET_PATH, 0, FSIZE(metrics_file), "", 0,
     "write Prometheus metrics to FILE every --metrics-interval s (atomic rename; "
     "for node_exporter's textfile collector)",
     "FILE", OFF(metrics_file), NULL,
     .doc = "write the Prometheus metrics to this file every `metrics-interval` s (and at start "
            "and at a clean exit), atomically: `FILE.tmp` is created with "
            "`O_CREAT\\|O_EXCL\\|O_NOFOLLOW` (anything already there, e.g. a planted symlink, is "
            "unlinked, never followed), then renamed over FILE"},
    {"metrics-interval", CD_SET_INT, 1, 3600, "10", 0, "seconds between --metrics-file writes", "SECONDS",
     OFF(metrics_interval), NULL, .doc = "period of the `metrics-file` writes"},
    {"tune", CD_SET_ENUM, 0, 1, "off", 0,
     "planner: time the dense and sparse kernels of each layer at load instead of the cost model "
     "(results cached on disk): off|on",
     "off|on", OFF(tune), off_on},
    {"tune-cache", CD_SET_PATH, 0, FSIZE(tune_cache), "", 0,
     "folder of the --tune cache (default $XDG_CACHE_HOME/convd, ~/.cache/convd)", "DIR", OFF(tune_cache), NULL},
    {"worker-spin-us", CD_SET_INT, 0, 10000, "0", 0,
     "an idle worker polls for new work this long before it sleeps (lower latency "
     "at low load, CPU while idle)",
     "US", OFF(worker_spin_us), NULL,
     .doc = "an idle worker polls for new work this long after its last item before it sleeps "
            "(yielding the core between polls); saves the wake-up of a sleeping thread per "
            "request at low load, costs CPU only while a worker is idle and only for that long. "
            "Off by default: measured on this shared 2-core VM (see \"Worker spinning\" below) "
            "it made the round trip slower, not faster"},
    // ---- access control and bounded shutdown (daemon/access.c, server.c) ----
    {"socket-mode", CD_SET_STR, 1, FSIZE(socket_mode), "0660", 0,
     "permissions of the socket file, octal: who may connect", "MODE", OFF(socket_mode), NULL,
     .doc = "permissions of the socket file, set before it accepts anything: who may connect "
            "(read+write). See \"Access control\""},
    {"socket-group", CD_SET_STR, 0, FSIZE(socket_group), "", 0,
     "group of the socket file, name or number (default: the daemon's group)", "GROUP", OFF(socket_group), NULL,
     .doc = "group of the socket file: with the default mode its members may connect",
     .doc_default = "the daemon's group"},
    {"admin-group", CD_SET_STR, 0, FSIZE(admin_group), "", 0,
     "members of this group (name or number) may call the admin methods (load, "
     "unload), as root and the daemon's own uid may; nobody else",
     "GROUP", OFF(admin_group), NULL,
     .doc = "its members may call the admin methods (`load`, `unload`), as root and the daemon's "
            "own uid may; decided by the peer's primary gid or its user's groups (`getgrouplist`)"},
    {"shutdown-grace", CD_SET_INT, 0, 600, "5", CD_SETF_RELOAD,
     "seconds after --drain-timeout before convd exits whatever its workers are "
     "still doing (exit 3)",
     "SECONDS", OFF(shutdown_grace), NULL,
     .doc = "after the drain (its timeout, or the last connection closing) running work gets "
            "this long; then convd logs what it abandons and exits 3"},
    // -- limits: connection timeouts, the request-memory budget, replies, models --
    {"idle-timeout", CD_SET_INT, 0, 86400, "300", CD_SETF_RELOAD,
     "close a connection that has had nothing in flight and sent nothing for this "
     "many seconds (0: never)",
     "SECONDS", OFF(idle_timeout), NULL,
     .doc = "a connection with nothing in flight (no request queued or running, nothing unsent, "
            "no complete message waiting) that has sent nothing for this long is closed "
            "(`connections.idle_timeouts`). The clock restarts at every byte received and every "
            "answer. 0: never"},
    {"read-timeout", CD_SET_INT, 0, 3600, "30", CD_SETF_RELOAD,
     "a message must arrive whole within this many seconds of its first byte, "
     "else E_TIMEOUT and the connection is closed (0: no limit)",
     "SECONDS", OFF(read_timeout), NULL,
     .doc = "a message must arrive whole within this long of its first byte; otherwise it is "
            "answered `E_TIMEOUT` (msgid 0) and the connection closed "
            "(`connections.read_timeouts`): slow senders cannot hold a connection and a partial "
            "message. While convd itself pauses reading (backpressure), the clock does not run "
            "against the client: it restarts when reading resumes. 0: no limit"},
    {"max-buffered", CD_SET_SIZE, 0, (int64_t)1 << 40, "0", 0,
     "bytes of requests held at once, partly received or accepted and unanswered; "
     "past it new work gets E_OVERLOADED (0: 8 x max-message)",
     "BYTES", OFF(max_buffered), NULL,
     .doc = "bytes of requests held at once: partly received messages (charged at the size their "
            "headers declare, before the payload arrives) and accepted, unanswered requests "
            "(their whole message). Past it, new work gets `E_OVERLOADED` (see \"Load shedding "
            "and limits\"); nothing accepted is dropped",
     .doc_default = "0 (= 8 x `max-message`, 512 MiB)"},
    {"max-reply", CD_SET_SIZE, 64 << 10, (int64_t)16 << 30, "4G", CD_SETF_RELOAD,
     "largest reply; an infer whose outputs would be larger gets E_TOO_LARGE", "BYTES", OFF(max_reply), NULL,
     .doc = "largest reply: an `infer` whose outputs would be larger is answered `E_TOO_LARGE` "
            "before it runs (also any single output over 4 GiB - 1, the largest msgpack bin)"},
    {"max-models", CD_SET_INT, 1, 100000, "256", CD_SETF_RELOAD,
     "models loaded at once; a load of one more gets E_TOO_LARGE", "N", OFF(max_models), NULL,
     .doc = "models loaded at once; a `load` of a new name beyond it is `E_TOO_LARGE` (replacing "
            "a loaded name is allowed); at start the files past it are skipped with a warning"},
    {"max-model-bytes", CD_SET_SIZE, 1 << 10, (int64_t)2 << 30, "1G", CD_SETF_RELOAD,
     "largest model file (with its external data); larger ones are refused with "
     "E_TOO_LARGE before they are read",
     "BYTES", OFF(max_model_bytes), NULL,
     .doc = "largest model file, with its external data; larger ones are refused with "
            "`E_TOO_LARGE` before they are read (`fstat`, then the importer checks again)"},
    {"max-pending-loads", CD_SET_INT, 1, 1024, "8", CD_SETF_RELOAD,
     "`load` requests queued or running; more get E_OVERLOADED", "N", OFF(max_pending_loads), NULL,
     .doc = "`load` requests queued or running; more get `E_OVERLOADED` (SIGHUP rescans are not "
            "counted)"},
    // ---- the runtime's options (cd_runtime_options, fixed at start) and the infer path ----
    {"max-isa", CD_SET_ENUM, 0, 3, "native", 0,
     "cap of convd's own kernels: native|avx512|avx2|scalar (oneDNN has its own cap, "
     "ONEDNN_MAX_CPU_ISA in the environment)",
     "ISA", OFF(max_isa), cd_max_isa_names},
    {"cpu-kernels", CD_SET_ENUM, 0, 1, "auto", 0,
     "cpu backend: auto (oneDNN and our own kernels) or ref (the reference kernels "
     "everywhere: the tests' oracle, slow)",
     "auto|ref", OFF(cpu_kernels), cpu_kernel_modes},
    {"plan", CD_SET_ENUM, 0, 3, "auto", 0,
     "planner: auto (cost model or --tune), dense (no compaction, dense kernels), sparse "
     "(sparse kernels wherever possible), compact (compaction, dense kernels)",
     "MODE", OFF(plan), plan_modes},
    {"profile", CD_SET_ENUM, 0, 1, "off", 0,
     "log the mean time of every layer of a model when a worker's execution state of it "
     "is freed (unload, replace, exit): off|on",
     "off|on", OFF(profile), off_on},
    {"hip-plugin", CD_SET_PATH, 0, FSIZE(hip_plugin), "", 0,
     "the GPU=hip plugin for --device hip (default: ../lib/libconvd-hip.so next to the "
     "convd binary)",
     "FILE", OFF(hip_plugin), NULL},
    {"double-buffer", CD_SET_ENUM, 0, 2, "auto", 0,
     "a worker submits its next batch before it waits for the last: auto (where it "
     "overlaps: --device hip), off, on (also where it does not: how the path is tested)",
     "auto|off|on", OFF(double_buffer), auto_off_on},
    {"help", CD_SET_ACTION, 0, 0, NULL, CD_SETF_CLI_ONLY | CD_SETF_NO_STATS, "print this help and exit", NULL, 0, NULL},
    {"version", CD_SET_ACTION, 0, 0, NULL, CD_SETF_CLI_ONLY | CD_SETF_NO_STATS, "print the version and exit", NULL, 0,
     NULL},
    {"settings-markdown", CD_SET_ACTION, 0, 0, NULL, CD_SETF_CLI_ONLY | CD_SETF_NO_STATS,
     "print the settings table of docs/OPERATIONS.md and exit", NULL, 0, NULL},
};
const size_t cd_setting_count = sizeof cd_setting_table / sizeof cd_setting_table[0];

const cd_setting_desc *cd_settings_find(const char *name, size_t len) {
    for (size_t i = 0; i < cd_setting_count; i++) {
        const char *n = cd_setting_table[i].name;
        if (strlen(n) == len && memcmp(n, name, len) == 0) return &cd_setting_table[i];
    }
    return NULL;
}

// Parses a decimal integer with an optional K/M/G (x1024) suffix when
// allow_suffix. Returns 0 or -1.
static int parse_int(const char *v, int allow_suffix, int64_t *out) {
    if (*v == '\0' || isspace((unsigned char)*v)) return -1;
    errno = 0;
    char *end;
    long long x = strtoll(v, &end, 10);
    if (errno != 0 || end == v) return -1;
    int shift = 0;
    if (allow_suffix && *end != '\0') {
        switch (toupper((unsigned char)*end)) {
        case 'K': shift = 10; break;
        case 'M': shift = 20; break;
        case 'G': shift = 30; break;
        default: return -1;
        }
        end++;
        if (toupper((unsigned char)*end) == 'I') // "MiB", "Mi"
            end++;
        if (toupper((unsigned char)*end) == 'B') end++;
    }
    if (*end != '\0') return -1;
    if (shift && (x > (INT64_MAX >> shift) || x < -(INT64_MAX >> shift))) return -1;
    *out = (int64_t)x * ((int64_t)1 << shift);
    return 0;
}

int cd_settings_set(cd_settings *s, const cd_setting_desc *d, const char *value, char *err, size_t errlen) {
    char *base = (char *)s;
    switch (d->type) {
    case CD_SET_STR:
    case CD_SET_PATH: {
        size_t n = strlen(value);
        if ((int64_t)n < d->min || (int64_t)n > d->max) {
            snprintf(err, errlen, "%s must be %" PRId64 "..%" PRId64 " bytes long (got %zu)", d->name, d->min, d->max,
                     n);
            return -1;
        }
        memcpy(base + d->offset, value, n + 1);
        return 0;
    }
    case CD_SET_INT:
    case CD_SET_SIZE: {
        int64_t x;
        if (parse_int(value, d->type == CD_SET_SIZE, &x) != 0) {
            snprintf(err, errlen, "%s: '%.64s' is not %s", d->name, value,
                     d->type == CD_SET_SIZE ? "a byte count (e.g. 65536, 64M)" : "an integer");
            return -1;
        }
        if (x < d->min || x > d->max) {
            snprintf(err, errlen, "%s: %" PRId64 " is out of range %" PRId64 "..%" PRId64, d->name, x, d->min, d->max);
            return -1;
        }
        memcpy(base + d->offset, &x, sizeof x);
        return 0;
    }
    case CD_SET_ENUM:
        for (int64_t i = 0; d->choices[i]; i++) {
            if (strcmp(d->choices[i], value) == 0) {
                memcpy(base + d->offset, &i, sizeof i);
                return 0;
            }
        }
        snprintf(err, errlen, "%s: '%.64s' is not one of", d->name, value);
        for (int i = 0; d->choices[i]; i++) {
            size_t l = strlen(err);
            snprintf(err + l, errlen - l, "%s%s", i ? "|" : " ", d->choices[i]);
        }
        return -1;
    case CD_SET_ACTION: snprintf(err, errlen, "%s takes no value", d->name); return -1;
    }
    return -1;
}

static char *trim(char *p) {
    while (isspace((unsigned char)*p)) p++;
    size_t n = strlen(p);
    while (n > 0 && isspace((unsigned char)p[n - 1])) p[--n] = '\0';
    return p;
}

int cd_config_read(const char *path, cd_config_line_fn fn, void *ud, char *err, size_t errlen) {
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "cannot read config file %s: %s", path, strerror(errno));
        return -1;
    }
    char line[8192];
    int lineno = 0, rc = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n') {
            snprintf(err, errlen, "%s:%d: line too long", path, lineno);
            rc = -1;
            break;
        }
        // A '#' at the start of the line or after whitespace starts a comment.
        for (size_t i = 0; i < len; i++) {
            if (line[i] == '#' && (i == 0 || isspace((unsigned char)line[i - 1]))) {
                line[i] = '\0';
                break;
            }
        }
        char *p = trim(line);
        if (*p == '\0') continue;
        char *eq = strchr(p, '=');
        if (!eq) {
            snprintf(err, errlen, "%s:%d: expected 'name = value', got '%.64s'", path, lineno, p);
            rc = -1;
            break;
        }
        *eq = '\0';
        char *key = trim(p), *val = trim(eq + 1);
        char why[512];
        if (fn(ud, key, val, why, sizeof why) != 0) {
            snprintf(err, errlen, "%s:%d: %s", path, lineno, why);
            rc = -1;
            break;
        }
    }
    if (rc == 0 && ferror(f)) {
        snprintf(err, errlen, "error reading %s", path);
        rc = -1;
    }
    fclose(f);
    return rc;
}

// A line of convd's own config file: a setting of the table.
static int settings_line(void *ud, const char *key, const char *val, char *why, size_t whylen) {
    const cd_setting_desc *d = cd_settings_find(key, strlen(key));
    if (!d || (d->flags & CD_SETF_CLI_ONLY)) {
        snprintf(why, whylen, "unknown setting '%.64s'%s", key, d ? " (command line only)" : " (see convd --help)");
        return -1;
    }
    return cd_settings_set(ud, d, val, why, whylen);
}

int cd_settings_load_file(cd_settings *s, const char *path, char *err, size_t errlen) {
    return cd_config_read(path, settings_line, s, err, errlen);
}

// One command-line argument, split into its setting and value.
typedef struct {
    const cd_setting_desc *d;
    const char *value; // NULL for actions
} cli_arg;

// Splits argv into settings. Returns the number of entries, or -1 with err.
static int split_argv(int argc, char **argv, cli_arg *out, char *err, size_t errlen) {
    int n = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0 || a[2] == '\0') {
            snprintf(err, errlen, "unexpected argument '%.64s' (flags are --name VALUE)", a);
            return -1;
        }
        const char *name = a + 2;
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const cd_setting_desc *d = cd_settings_find(name, len);
        if (!d) {
            snprintf(err, errlen, "unknown flag '--%.*s' (see convd --help)", (int)(len > 64 ? 64 : len), name);
            return -1;
        }
        const char *value = NULL;
        if (d->type == CD_SET_ACTION) {
            if (eq) {
                snprintf(err, errlen, "--%s takes no value", d->name);
                return -1;
            }
        } else if (eq) {
            value = eq + 1;
        } else if (i + 1 < argc) {
            value = argv[++i];
        } else {
            snprintf(err, errlen, "--%s needs a value (%s)", d->name, d->arg);
            return -1;
        }
        out[n].d = d;
        out[n].value = value;
        n++;
    }
    return n;
}

cd_settings_outcome cd_settings_parse(cd_settings *s, int argc, char **argv) {
    char err[1024];
    memset(s, 0, sizeof *s);
    for (size_t i = 0; i < cd_setting_count; i++) {
        const cd_setting_desc *d = &cd_setting_table[i];
        if (d->type == CD_SET_ACTION) continue;
        if (cd_settings_set(s, d, d->def, err, sizeof err) != 0) {
            fprintf(stderr, "convd: bad built-in default: %s\n", err);
            return CD_SETTINGS_BAD;
        }
    }
    cli_arg *args = calloc((size_t)argc + 1, sizeof *args);
    if (!args) return CD_SETTINGS_BAD;
    cd_settings_outcome outcome = CD_SETTINGS_RUN;
    int n = split_argv(argc, argv, args, err, sizeof err);
    if (n < 0) {
        fprintf(stderr, "convd: %s\n", err);
        outcome = CD_SETTINGS_BAD;
        goto out;
    }
    const char *config = NULL;
    for (int i = 0; i < n; i++) {
        if (strcmp(args[i].d->name, "help") == 0) {
            cd_settings_print_help(stdout);
            outcome = CD_SETTINGS_HELP;
            goto out;
        }
        if (strcmp(args[i].d->name, "settings-markdown") == 0) {
            cd_settings_print_markdown(stdout);
            outcome = CD_SETTINGS_MARKDOWN;
            goto out;
        }
        if (strcmp(args[i].d->name, "version") == 0) {
            printf("%s %s (protocol %d)\n", CD_DAEMON_NAME, CD_DAEMON_VERSION, CD_PROTOCOL_VERSION);
            outcome = CD_SETTINGS_VERSION;
            goto out;
        }
        if (strcmp(args[i].d->name, "config") == 0) config = args[i].value;
    }
    if (config && *config) {
        if (cd_settings_load_file(s, config, err, sizeof err) != 0) {
            fprintf(stderr, "convd: %s\n", err);
            outcome = CD_SETTINGS_BAD;
            goto out;
        }
    }
    for (int i = 0; i < n; i++) {
        if (cd_settings_set(s, args[i].d, args[i].value, err, sizeof err) != 0) {
            fprintf(stderr, "convd: --%s\n", err);
            outcome = CD_SETTINGS_BAD;
            goto out;
        }
    }
    // No --socket: the default of this user (left empty when there is none;
    // the server then refuses to start and says why).
    if (outcome == CD_SETTINGS_RUN && !s->socket[0])
        (void)cd_settings_default_socket(s->socket, sizeof s->socket, err, sizeof err);
    if (s->max_buffered != 0 && s->max_buffered < s->max_message) {
        fprintf(stderr,
                "convd: --max-buffered %" PRId64 " is less than --max-message %" PRId64
                ": no message of the largest size could be accepted\n",
                s->max_buffered, s->max_message);
        outcome = CD_SETTINGS_BAD;
    }
out:
    free(args);
    return outcome;
}

int cd_settings_default_socket(char *out, size_t outlen, char *err, size_t errlen) {
    const char *dir = CD_SYSTEM_SOCKET_DIR;
    if (geteuid() != 0) {
        dir = getenv("XDG_RUNTIME_DIR");
        if (!dir || !*dir) {
            snprintf(err, errlen,
                     "no --socket given and XDG_RUNTIME_DIR is not set: "
                     "give --socket PATH (in a directory only you can write)");
            return -1;
        }
    }
    int n = snprintf(out, outlen, "%s/%s", dir, CD_SOCKET_NAME);
    if (n < 0 || (size_t)n >= outlen || n > CD_SOCKET_PATH_MAX) {
        snprintf(err, errlen,
                 "default socket path %s/%s is longer than %d bytes: "
                 "give --socket PATH",
                 dir, CD_SOCKET_NAME, CD_SOCKET_PATH_MAX);
        return -1;
    }
    return 0;
}

int64_t cd_settings_max_buffered(const cd_settings *s) {
    return s->max_buffered ? s->max_buffered : 8 * s->max_message;
}

void cd_settings_print_help(FILE *f) {
    fprintf(f,
            "usage: convd [--name VALUE | --name=VALUE]...\n\n"
            "%s %s: sparse-CNN inference daemon (msgpack-RPC over a Unix socket).\n"
            "Every flag except --config/--help/--version may also be set in the\n"
            "config file as `name = value`; flags override the file.\n\n",
            CD_DAEMON_NAME, CD_DAEMON_VERSION);
    for (size_t i = 0; i < cd_setting_count; i++) {
        const cd_setting_desc *d = &cd_setting_table[i];
        char left[64];
        if (d->arg)
            snprintf(left, sizeof left, "--%s %s", d->name, d->arg);
        else
            snprintf(left, sizeof left, "--%s", d->name);
        fprintf(f, "  %-26s %s", left, d->help);
        if (d->def && *d->def) fprintf(f, " [default: %s]", d->def);
        fprintf(f, "\n");
    }
}

int cd_settings_pack(msgpack_packer *pk, const cd_settings *s) {
    size_t n = 0;
    for (size_t i = 0; i < cd_setting_count; i++)
        if (!(cd_setting_table[i].flags & CD_SETF_NO_STATS)) n++;
    int rc = msgpack_pack_map(pk, n);
    const char *base = (const char *)s;
    for (size_t i = 0; i < cd_setting_count; i++) {
        const cd_setting_desc *d = &cd_setting_table[i];
        if (d->flags & CD_SETF_NO_STATS) continue;
        size_t kl = strlen(d->name);
        rc |= msgpack_pack_str(pk, kl);
        rc |= msgpack_pack_str_body(pk, d->name, kl);
        int64_t x;
        switch (d->type) {
        case CD_SET_STR:
        case CD_SET_PATH: {
            const char *v = base + d->offset;
            size_t vl = strlen(v);
            rc |= msgpack_pack_str(pk, vl);
            rc |= msgpack_pack_str_body(pk, v, vl);
            break;
        }
        case CD_SET_INT:
        case CD_SET_SIZE:
            memcpy(&x, base + d->offset, sizeof x);
            rc |= msgpack_pack_int64(pk, x);
            break;
        case CD_SET_ENUM: {
            memcpy(&x, base + d->offset, sizeof x);
            const char *v = d->choices[x];
            size_t vl = strlen(v);
            rc |= msgpack_pack_str(pk, vl);
            rc |= msgpack_pack_str_body(pk, v, vl);
            break;
        }
        case CD_SET_ACTION: rc |= msgpack_pack_nil(pk); break;
        }
    }
    return rc ? CD_ENOMEM : 0;
}

// A byte count as the table writes it: 0, or the largest exact K/M/G/T.
static void fmt_size(char *out, size_t len, int64_t v) {
    static const char units[] = "KMGT";
    int u = -1;
    while (v != 0 && u < 3 && v % 1024 == 0) {
        v /= 1024;
        u++;
    }
    if (u < 0)
        snprintf(out, len, "%" PRId64, v);
    else
        snprintf(out, len, "%" PRId64 "%c", v, units[u]);
}

// The range column of d.
static void doc_range(char *out, size_t len, const cd_setting_desc *d) {
    char lo[32], hi[32];
    const char *unit = !d->arg ? "" : !strcmp(d->arg, "SECONDS") ? " s" : !strcmp(d->arg, "US") ? " µs" : "";
    switch (d->type) {
    case CD_SET_INT: snprintf(out, len, "%" PRId64 "..%" PRId64 "%s", d->min, d->max, unit); return;
    case CD_SET_SIZE:
        fmt_size(lo, sizeof lo, d->min);
        fmt_size(hi, sizeof hi, d->max);
        snprintf(out, len, "%s..%s, K/M/G suffixes", lo, hi);
        return;
    case CD_SET_ENUM: {
        size_t n = 0;
        out[0] = '\0';
        for (const char *const *c = d->choices; *c && n < len; c++)
            n += (size_t)snprintf(out + n, len - n, "%s`%s`", c == d->choices ? "" : " ", *c);
        return;
    }
    default: break;
    }
    static const struct {
        const char *arg, *range;
    } by_arg[] = {{"DIR", "directory"},
                  {"FILE", "file"},
                  {"GROUP", "group name or number"},
                  {"MODE", "octal mode"},
                  {"DEV", "`cpu`, `hip-emu`, `hip`, `hip:N`"}};
    for (size_t i = 0; i < sizeof by_arg / sizeof by_arg[0]; i++)
        if (d->arg && !strcmp(d->arg, by_arg[i].arg)) {
            snprintf(out, len, "%s", by_arg[i].range);
            return;
        }
    snprintf(out, len, "%s, <= %" PRId64 " bytes", d->type == CD_SET_PATH ? "path" : "text", d->max);
}

// Writes plain text into a table cell: '|' escaped.
static void put_cell(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '|') fputc('\\', f);
        fputc(*s, f);
    }
}

void cd_settings_print_markdown(FILE *f) {
    fprintf(f, "| setting | default | range | meaning |\n| ------- | ------- | ----- | ------- |\n");
    for (size_t i = 0; i < cd_setting_count; i++) {
        const cd_setting_desc *d = &cd_setting_table[i];
        if (d->type == CD_SET_ACTION) continue;
        char def[128], range[256];
        if (d->doc_default)
            snprintf(def, sizeof def, "%s", d->doc_default);
        else if (!d->def || !*d->def)
            snprintf(def, sizeof def, "none");
        else if (d->type == CD_SET_INT)
            snprintf(def, sizeof def, "%s", d->def);
        else
            snprintf(def, sizeof def, "`%s`", d->def);
        doc_range(range, sizeof range, d);
        fprintf(f, "| `%s` | %s | %s | ", d->name, def, range);
        if (d->doc)
            fputs(d->doc, f); // markdown already
        else
            put_cell(f, d->help);
        fprintf(f, "%s |\n", d->flags & CD_SETF_RELOAD ? " (SIGHUP applies a new value)" : "");
    }
}
