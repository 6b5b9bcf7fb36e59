#ifndef CD_TOOLS_CONVCTL_H
#define CD_TOOLS_CONVCTL_H

// convctl: the admin CLI. main.c parses the global options and dispatches to
// one function per subcommand (the table in main.c); the online subcommands
// talk to the daemon through libconvd only.
//
// Exit codes (docs/CLIENT.md): 0 success; 1 the operation failed (the daemon
// answered an error, a timeout, a lost connection, an unreadable input file);
// 2 usage error; 3 cannot connect to the daemon.

#include "client/convd.h"

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
    CTL_EXIT_OK = 0,
    CTL_EXIT_FAIL = 1,
    CTL_EXIT_USAGE = 2,
    CTL_EXIT_CONNECT = 3,
};

// Settings shared by every subcommand.
typedef struct {
    const char *socket; // --socket, or NULL ($CONVD_SOCKET, then the default)
    bool json;          // --json: machine-readable output
    int timeout_ms;     // --timeout, 0 = the library default
    convd_conn *conn;   // open connection (ctl_connect)
} ctl_ctx;

// One subcommand.
typedef struct {
    const char *name;
    const char *args;                                // synopsis after the name, e.g. "NAME PATH [--max-batch N]"
    const char *summary;                             // one line
    const char *help;                                // details printed by `convctl NAME --help` (may be NULL)
    int (*run)(ctl_ctx *ctx, int argc, char **argv); // argv[0] is the name
} ctl_command;

// Subcommands (one file each group).
int ctl_cmd_hello(ctl_ctx *ctx, int argc, char **argv);
int ctl_cmd_health(ctl_ctx *ctx, int argc, char **argv);
int ctl_cmd_models(ctl_ctx *ctx, int argc, char **argv);
int ctl_cmd_stats(ctl_ctx *ctx, int argc, char **argv);
int ctl_cmd_load(ctl_ctx *ctx, int argc, char **argv);
int ctl_cmd_unload(ctl_ctx *ctx, int argc, char **argv);
int ctl_cmd_infer(ctl_ctx *ctx, int argc, char **argv);
int ctl_cmd_top(ctl_ctx *ctx, int argc, char **argv);
int ctl_cmd_metrics(ctl_ctx *ctx, int argc, char **argv);

// Reading decoded answers: the value at key in map (NULL when absent or map
// is not a map); a number at map[k1][k2] (k2 may be NULL; -1 when absent or
// not a number); a str at map[key] copied into buf ("-" when absent/empty).
const msgpack_object *ctl_map_get(const msgpack_object *map, const char *key);
double ctl_get_num(const msgpack_object *map, const char *k1, const char *k2);
const char *ctl_get_str(const msgpack_object *map, const char *key, char *buf, size_t len);

// Prints the per-model table of a `stats` answer's "models" map; with prev
// (the previous answer's "models") and dt seconds, REQ/S is the rate.
void ctl_render_models_table(const msgpack_object *models, const msgpack_object *prev, double dt, int indent);
// Offline (no daemon): prune a model file; ctl_prune_help is its --help text.
int ctl_cmd_prune(ctl_ctx *ctx, int argc, char **argv);
extern const char ctl_prune_help[];
// Offline: static quantization of a model file into QDQ (cmd-quantize.c).
int ctl_cmd_quantize(ctl_ctx *ctx, int argc, char **argv);
extern const char ctl_quantize_help[];
// Offline: the plan of a model file per layer (runtime in-process).
int ctl_cmd_plan(ctl_ctx *ctx, int argc, char **argv);
extern const char ctl_plan_help[];
// Offline: the operators the loader accepts (cmd-ops.c; --markdown: docs/OPERATORS.md).
int ctl_cmd_ops(ctl_ctx *ctx, int argc, char **argv);
extern const char ctl_ops_help[];

// Parses the options every subcommand accepts anywhere (--json, --socket P,
// --timeout MS, --help): returns 1 when argv[*i] was one of them (and
// advances *i past its value), 0 when it is not, or -1 after printing a usage
// error. --help prints the subcommand's help and exits 0.
int ctl_common_opt(ctl_ctx *ctx, int argc, char **argv, int *i);

// Prints the usage error "convctl NAME: msg" and the synopsis; returns 2.
int ctl_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// Connects (once). Returns 0, or the exit code after printing the error.
int ctl_connect(ctl_ctx *ctx);

// Prints "convctl: E_NAME: message" for a failed library call and returns
// the exit code for it (3 for CONVD_ECONNECT, 1 otherwise).
int ctl_fail(int status);
// Prints "convctl: msg" and returns 1.
int ctl_fail_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

// Calls method with an optional msgpack params buffer and prints the result
// as JSON on stdout. Returns the exit code.
int ctl_print_json_call(ctl_ctx *ctx, const char *method, const void *params, size_t len);
// Prints a msgpack value as one JSON line. Returns the exit code.
int ctl_print_json(const void *msgpack, size_t len);

// A msgpack buffer and its packer (mp.c): the params of a call or a --json
// document. ctl_mp_json_call sends it as method's params, prints the
// answer as JSON, frees the buffer and returns the exit code; ctl_mp_print
// prints a document the command built itself.
typedef struct {
    msgpack_sbuffer sb;
    msgpack_packer pk;
} ctl_mp;
void ctl_mp_init(ctl_mp *m);
void ctl_mp_free(ctl_mp *m);
void ctl_mp_str(msgpack_packer *pk, const char *s);
void ctl_mp_kv_str(msgpack_packer *pk, const char *k, const char *v); // NULL v: nil
void ctl_mp_kv_i64(msgpack_packer *pk, const char *k, int64_t v);
void ctl_mp_kv_u64(msgpack_packer *pk, const char *k, uint64_t v);
void ctl_mp_kv_f64(msgpack_packer *pk, const char *k, double v);
void ctl_mp_kv_bool(msgpack_packer *pk, const char *k, int v);
int ctl_mp_json_call(ctl_ctx *ctx, const char *method, ctl_mp *params);
// Prints the document as one JSON line, frees it; returns the exit code.
int ctl_mp_print(ctl_mp *m);

// ---- human output ------------------------------------------------------------

// A table of strings printed in aligned columns (two spaces apart); columns
// flagged numeric are right-aligned.
typedef struct {
    int ncols;
    const char **heads;
    const bool *numeric;
    char **cells; // rows * ncols owned strings
    size_t rows, cap;
} ctl_table;

void ctl_table_init(ctl_table *t, int ncols, const char **heads, const bool *numeric);
// Adds a row of ncols printf'd cells (each argument is a const char *).
void ctl_table_add(ctl_table *t, ...);
// Adds a row of ncols cells.
void ctl_table_add_row(ctl_table *t, const char *const *cells);
void ctl_table_print(const ctl_table *t, int indent);
void ctl_table_free(ctl_table *t);

// Human formats into buf: 1536 -> "1.5 KiB"; 1234567 -> "1.23M"; 83.2 s ->
// "1m 23s".
const char *ctl_fmt_bytes(char *buf, size_t len, double bytes);
const char *ctl_fmt_count(char *buf, size_t len, double n);
const char *ctl_fmt_duration(char *buf, size_t len, double seconds);
// A shape as "[1, 3, 224, 224]" (-1 printed as "N").
const char *ctl_fmt_shape(char *buf, size_t len, int rank, const int64_t *shape);

#endif // CD_TOOLS_CONVCTL_H
