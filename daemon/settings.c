#include "daemon/settings.h"

#include "core/errors.h"
#include "daemon/version.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// cd_setting_table itself is data: daemon/settings.toml, which
// scripts/gen-settings-table.py turns into C at build time.

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

int cd_setting_parse(const cd_setting_desc *d, const char *label, const char *value, void *field, char *err,
                     size_t errlen) {
    switch (d->type) {
    case CD_SET_STR:
    case CD_SET_PATH: {
        size_t n = strlen(value);
        if ((int64_t)n < d->min || (int64_t)n > d->max) {
            snprintf(err, errlen, "%s must be %" PRId64 "..%" PRId64 " bytes long (got %zu)", label, d->min, d->max, n);
            return -1;
        }
        char why[400];
        if (d->check && d->check(value, why, sizeof why) != 0) {
            snprintf(err, errlen, "%s: %s", label, why);
            return -1;
        }
        memcpy(field, value, n + 1);
        return 0;
    }
    case CD_SET_INT:
    case CD_SET_SIZE: {
        int64_t x;
        if (parse_int(value, d->type == CD_SET_SIZE, &x) != 0) {
            snprintf(err, errlen, "%s: '%.64s' is not %s", label, value,
                     d->type == CD_SET_SIZE ? "a byte count (e.g. 65536, 64M)" : "an integer");
            return -1;
        }
        if (x < d->min || x > d->max) {
            snprintf(err, errlen, "%s: %" PRId64 " is out of range %" PRId64 "..%" PRId64, label, x, d->min, d->max);
            return -1;
        }
        memcpy(field, &x, sizeof x);
        return 0;
    }
    case CD_SET_ENUM:
        for (int64_t i = 0; d->choices[i]; i++) {
            if (strcmp(d->choices[i], value) == 0) {
                memcpy(field, &i, sizeof i);
                return 0;
            }
        }
        snprintf(err, errlen, "%s: '%.64s' is not one of", label, value);
        for (int i = 0; d->choices[i]; i++) {
            size_t l = strlen(err);
            snprintf(err + l, errlen - l, "%s%s", i ? "|" : " ", d->choices[i]);
        }
        return -1;
    case CD_SET_ACTION: snprintf(err, errlen, "%s takes no value", label); return -1;
    }
    return -1;
}

int cd_settings_set(cd_settings *s, const cd_setting_desc *d, const char *value, char *err, size_t errlen) {
    return cd_setting_parse(d, d->name, value, (char *)s + d->offset, err, errlen);
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
        if (d->model_key) fprintf(f, "; per model: `%s` in `<model>.conf` and `load`", d->model_key);
        fprintf(f, "%s |\n", d->flags & CD_SETF_RELOAD ? " (SIGHUP applies a new value)" : "");
    }
}
