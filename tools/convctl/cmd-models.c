// convctl load | unload: change the daemon's model registry.

#include "tools/convctl/convctl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ctl_cmd_load(ctl_ctx *ctx, int argc, char **argv) {
    const char *pos[2] = {NULL, NULL};
    int npos = 0;
    long max_batch = 0;
    for (int i = 1; i < argc; i++) {
        int r = ctl_common_opt(ctx, argc, argv, &i);
        if (r < 0) return CTL_EXIT_USAGE;
        if (r > 0) continue;
        const char *a = argv[i];
        if (strcmp(a, "--max-batch") == 0 || strncmp(a, "--max-batch=", 12) == 0) {
            const char *v = a[11] == '=' ? a + 12 : (i + 1 < argc ? argv[++i] : NULL);
            char *end;
            max_batch = v ? strtol(v, &end, 10) : 0;
            if (!v || !*v || *end || max_batch < 1 || max_batch > 1 << 20)
                return ctl_usage_error(argv[0], "--max-batch wants an integer 1..%d", 1 << 20);
        } else if (a[0] == '-' && a[1]) {
            return ctl_usage_error(argv[0], "unknown option '%s'", a);
        } else if (npos < 2) {
            pos[npos++] = a;
        } else {
            return ctl_usage_error(argv[0], "unexpected argument '%s'", a);
        }
    }
    if (npos != 2) return ctl_usage_error(argv[0], "NAME and PATH are required");
    int rc = ctl_connect(ctx);
    if (rc) return rc;
    if (ctx->json) {
        ctl_mp m;
        ctl_mp_init(&m);
        msgpack_pack_map(&m.pk, max_batch > 0 ? 3 : 2);
        ctl_mp_kv_str(&m.pk, "name", pos[0]);
        ctl_mp_kv_str(&m.pk, "path", pos[1]);
        if (max_batch > 0) ctl_mp_kv_i64(&m.pk, "max_batch", max_batch);
        return ctl_mp_json_call(ctx, "load", &m);
    }
    convd_model_list *info;
    rc = convd_load(ctx->conn, pos[0], pos[1], (int)max_batch, &info);
    if (rc) return ctl_fail(rc);
    const convd_model_info *m = &info->models[0];
    printf("loaded %s from %s", m->name ? m->name : pos[0], m->path ? m->path : pos[1]);
    if (m->max_batch > 0) printf(" (max batch %lld)", (long long)m->max_batch);
    printf("\n");
    for (size_t i = 0; i < m->n_inputs + m->n_outputs; i++) {
        const convd_tensor_info *t = i < m->n_inputs ? &m->inputs[i] : &m->outputs[i - m->n_inputs];
        char sh[160];
        printf("  %-6s %s %s%s\n", i < m->n_inputs ? "input" : "output", t->name ? t->name : "?",
               convd_dtype_name(t->dtype), ctl_fmt_shape(sh, sizeof sh, t->rank, t->shape));
    }
    convd_model_list_free(info);
    return CTL_EXIT_OK;
}

int ctl_cmd_unload(ctl_ctx *ctx, int argc, char **argv) {
    const char *name = NULL;
    for (int i = 1; i < argc; i++) {
        int r = ctl_common_opt(ctx, argc, argv, &i);
        if (r < 0) return CTL_EXIT_USAGE;
        if (r > 0) continue;
        if (argv[i][0] == '-' && argv[i][1]) return ctl_usage_error(argv[0], "unknown option '%s'", argv[i]);
        if (name) return ctl_usage_error(argv[0], "unexpected argument '%s'", argv[i]);
        name = argv[i];
    }
    if (!name) return ctl_usage_error(argv[0], "NAME is required");
    int rc = ctl_connect(ctx);
    if (rc) return rc;
    if (ctx->json) {
        ctl_mp m;
        ctl_mp_init(&m);
        msgpack_pack_map(&m.pk, 1);
        ctl_mp_kv_str(&m.pk, "name", name);
        return ctl_mp_json_call(ctx, "unload", &m);
    }
    if ((rc = convd_unload(ctx->conn, name))) return ctl_fail(rc);
    printf("unloaded %s\n", name);
    return CTL_EXIT_OK;
}
