// convctl: global options, the subcommand table, help, exit codes.
//
//   convctl [--socket PATH] [--json] [--timeout MS] COMMAND [ARGS...]
//   convctl COMMAND --help      convctl help [COMMAND]

#include "tools/convctl/convctl.h"

#include "convd-version.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const ctl_command commands[] = {
    {"hello", "", "who the daemon is: version, protocol, device, features",
     "Prints the daemon's identity. --json prints the raw answer.", ctl_cmd_hello},
    {"health", "", "liveness: status, uptime, models loaded",
     "Prints status (ok or draining), uptime and the number of models. Exit\n"
     "code 0 also when the daemon is draining.",
     ctl_cmd_health},
    {"models", "", "the loaded models: inputs, outputs, size, FLOPs",
     "One row per model: name, inputs and outputs (name:dtype[shape], N = any\n"
     "batch), max batch, parameters, GFLOPs per sample, weight memory,\n"
     "density of the weights, file.",
     ctl_cmd_models},
    {"stats", "", "the daemon's counters",
     "Connections, requests by method, errors by code, bytes, memory and\n"
     "per-model counters. --json prints every counter the daemon reports.",
     ctl_cmd_stats},
    {"top", "[--interval S] [--count N]", "live per-model view of stats, refreshed every second",
     "Redraws connections, requests and the per-model table (REQ/S is the rate\n"
     "over the last interval; P50..P999 are receipt-to-answer latencies) every\n"
     "--interval seconds (default 1). On a terminal the screen is cleared each\n"
     "time; when stdout is not a terminal one snapshot per interval is printed\n"
     "without escape codes.\n"
     "  --interval S   seconds between refreshes (0.1..3600, default 1)\n"
     "  --count N      stop after N snapshots (default: until interrupted)",
     ctl_cmd_top},
    {"metrics", "", "the daemon's metrics in Prometheus text format",
     "Prints the answer of the `metrics` method: Prometheus text exposition\n"
     "(version 0.0.4), the same text convd writes to --metrics-file.",
     ctl_cmd_metrics},
    {"load", "NAME PATH [--max-batch N]", "load an ONNX model under NAME",
     "PATH is relative to the daemon's --models directory (it must resolve\n"
     "inside it). Loading an existing NAME replaces it.\n"
     "  --max-batch N   largest batch the model accepts (default: the daemon's)",
     ctl_cmd_load},
    {"unload", "NAME", "unload a model", "Requests already running on the model finish first.", ctl_cmd_unload},
    {"infer", "MODEL --input [NAME=]FILE.npy... [--output [NAME=]FILE.npy]...",
     "run a model on .npy inputs, write .npy outputs",
     "  --input [NAME=]FILE    an input tensor (.npy, C order). Without NAME the\n"
     "                         files fill the model's inputs in order.\n"
     "  --output [NAME=]FILE   write an output (.npy). Without NAME: the model's\n"
     "                         outputs in order. Only the outputs named are\n"
     "                         computed when every --output has a NAME.\n"
     "Without --output a summary (name, dtype, shape, min, max, mean) of every\n"
     "output is printed.",
     ctl_cmd_infer},
    {"prune", "IN.onnx OUT.onnx --sparsity S [--mode M] [--per-layer] [--skip first,last,NAME,...]",
     "prune weights by magnitude, write a new model (offline)", ctl_prune_help, ctl_cmd_prune},
    {"quantize",
     "IN.onnx OUT.onnx [--calib DIR | --calib-random N] [--method minmax|percentile|entropy] [--act u8|s8] "
     "[--exclude NAME,...]",
     "quantize to int8 (QDQ), calibrated on convd's runtime (offline)", ctl_quantize_help, ctl_cmd_quantize},
    {"plan", "FILE|NAME [--batch B] [--runs N] [--all] [--json] [--tune] [--threads T] [--plan MODE] [--vs-dense]",
     "per-layer structure, kernel, layout, predicted and measured time (a loaded model: measured in the daemon; a "
     "file: offline)",
     ctl_plan_help, ctl_cmd_plan},
    {"ops", "[--markdown]", "the operators a model may use: opsets, attributes, backends (offline)", ctl_ops_help,
     ctl_cmd_ops},
};
static const size_t n_commands = sizeof commands / sizeof commands[0];

// The subcommand being run (for --help and usage errors).
static const ctl_command *g_current;

static const ctl_command *find_command(const char *name) {
    for (size_t i = 0; i < n_commands; i++)
        if (strcmp(commands[i].name, name) == 0) return &commands[i];
    return NULL;
}

static void print_usage(FILE *f) {
    fprintf(f, "usage: convctl [--socket PATH] [--json] [--timeout MS] COMMAND [ARGS...]\n"
               "\n"
               "Administers a running convd daemon.\n"
               "\n"
               "commands:\n");
    for (size_t i = 0; i < n_commands; i++) fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(f,
            "\n"
            "options (accepted before or after COMMAND):\n"
            "  --socket PATH   daemon socket (default: $CONVD_SOCKET, else %s as root,\n"
            "                  else $XDG_RUNTIME_DIR/%s)\n"
            "  --json          machine-readable JSON output\n"
            "  --timeout MS    per-call timeout in milliseconds (default 30000)\n"
            "  --help          this help; `convctl COMMAND --help` for a command\n"
            "  --version       print convctl's version and exit\n"
            "\n"
            "exit status: 0 ok, 1 the operation failed (error printed as\n"
            "`convctl: E_CODE: message`), 2 usage error, 3 cannot connect.\n",
            CONVD_SYSTEM_SOCKET, CONVD_SOCKET_NAME);
}

static void print_command_help(const ctl_command *c) {
    printf("usage: convctl [--socket PATH] [--json] %s%s%s\n\n%s.\n", c->name, c->args[0] ? " " : "", c->args,
           c->summary);
    if (c->help) printf("\n%s\n", c->help);
}

int ctl_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "convctl%s%s: ", cmd ? " " : "", cmd ? cmd : "");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    const ctl_command *c = cmd ? find_command(cmd) : NULL;
    if (c)
        fprintf(stderr, "\nusage: convctl %s%s%s (see convctl %s --help)\n", c->name, c->args[0] ? " " : "", c->args,
                c->name);
    else
        fprintf(stderr, "\nsee convctl --help\n");
    return CTL_EXIT_USAGE;
}

// Parses a positive int option value.
static int parse_ms(const char *cmd, const char *s, int *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == 0 || *end != 0 || v < 1 || v > 86400000)
        return ctl_usage_error(cmd, "--timeout wants milliseconds 1..86400000, got '%s'", s);
    *out = (int)v;
    return 0;
}

int ctl_common_opt(ctl_ctx *ctx, int argc, char **argv, int *i) {
    const char *a = argv[*i];
    const char *cmd = g_current ? g_current->name : NULL;
    if (strcmp(a, "--json") == 0) {
        ctx->json = true;
        return 1;
    }
    if (strcmp(a, "--version") == 0) {
        printf("convctl %s (libconvd %s, protocol %d)\n", CD_VERSION, convd_version(), CONVD_PROTOCOL);
        exit(CTL_EXIT_OK);
    }
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
        if (g_current)
            print_command_help(g_current);
        else
            print_usage(stdout);
        exit(CTL_EXIT_OK);
    }
    if (strcmp(a, "--socket") == 0 || strcmp(a, "--timeout") == 0) {
        if (*i + 1 >= argc) {
            ctl_usage_error(cmd, "%s needs a value", a);
            return -1;
        }
        const char *v = argv[++*i];
        if (a[2] == 's') {
            ctx->socket = v;
            return 1;
        }
        return parse_ms(cmd, v, &ctx->timeout_ms) == 0 ? 1 : -1;
    }
    if (strncmp(a, "--socket=", 9) == 0) {
        ctx->socket = a + 9;
        return 1;
    }
    if (strncmp(a, "--timeout=", 10) == 0) return parse_ms(cmd, a + 10, &ctx->timeout_ms) == 0 ? 1 : -1;
    return 0;
}

int ctl_connect(ctl_ctx *ctx) {
    if (ctx->conn) return 0;
    convd_opts o;
    convd_opts_init(&o);
    if (ctx->timeout_ms > 0) o.timeout_ms = ctx->timeout_ms;
    int rc = convd_connect(ctx->socket, &o, &ctx->conn);
    return rc == 0 ? 0 : ctl_fail(rc);
}

int ctl_fail(int status) {
    fprintf(stderr, "convctl: %s: %s\n", convd_errname(status), convd_errmsg(NULL));
    return status == CONVD_ECONNECT ? CTL_EXIT_CONNECT : CTL_EXIT_FAIL;
}

int ctl_fail_msg(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "convctl: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    return CTL_EXIT_FAIL;
}

int ctl_print_json(const void *msgpack, size_t len) {
    char *json;
    int rc = convd_to_json(msgpack, len, &json);
    if (rc != 0) return ctl_fail(rc);
    printf("%s\n", json);
    convd_free(json);
    return CTL_EXIT_OK;
}

int ctl_print_json_call(ctl_ctx *ctx, const char *method, const void *params, size_t len) {
    int rc = ctl_connect(ctx);
    if (rc) return rc;
    void *res;
    size_t rlen;
    rc = convd_call(ctx->conn, method, params, len, &res, &rlen, CONVD_TIMEOUT_DEFAULT);
    if (rc != 0) return ctl_fail(rc);
    rc = ctl_print_json(res, rlen);
    convd_free(res);
    return rc;
}

int main(int argc, char **argv) {
    ctl_ctx ctx = {0};
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        int r = ctl_common_opt(&ctx, argc, argv, &i);
        if (r < 0) return CTL_EXIT_USAGE;
        if (r == 0) return ctl_usage_error(NULL, "unknown option '%s'", argv[i]);
    }
    if (i >= argc) {
        print_usage(stderr);
        return CTL_EXIT_USAGE;
    }
    const char *name = argv[i];
    if (strcmp(name, "help") == 0) {
        if (i + 1 < argc) {
            const ctl_command *c = find_command(argv[i + 1]);
            if (!c) return ctl_usage_error(NULL, "unknown command '%s'", argv[i + 1]);
            print_command_help(c);
        } else {
            print_usage(stdout);
        }
        return CTL_EXIT_OK;
    }
    g_current = find_command(name);
    if (!g_current) return ctl_usage_error(NULL, "unknown command '%s'", name);
    int rc = g_current->run(&ctx, argc - i, argv + i);
    convd_close(ctx.conn);
    if (fflush(stdout) != 0 && rc == 0) rc = CTL_EXIT_FAIL;
    return rc;
}
