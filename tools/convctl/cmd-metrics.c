// convctl metrics: the `metrics` method's Prometheus text, printed as is.

#include "tools/convctl/convctl.h"

#include <stdio.h>

int ctl_cmd_metrics(ctl_ctx *ctx, int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        int r = ctl_common_opt(ctx, argc, argv, &i);
        if (r < 0) return CTL_EXIT_USAGE;
        if (r == 0) return ctl_usage_error(argv[0], "unexpected argument '%s'", argv[i]);
    }
    int rc = ctl_connect(ctx);
    if (rc) return rc;
    void *res;
    size_t len;
    if ((rc = convd_call(ctx->conn, "metrics", NULL, 0, &res, &len, CONVD_TIMEOUT_DEFAULT))) return ctl_fail(rc);
    if (ctx->json) {
        rc = ctl_print_json(res, len);
        convd_free(res);
        return rc;
    }
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    size_t off = 0;
    if (msgpack_unpack_next(&up, res, len, &off) != MSGPACK_UNPACK_SUCCESS || up.data.type != MSGPACK_OBJECT_STR) {
        msgpack_unpacked_destroy(&up);
        convd_free(res);
        return ctl_fail_msg("E_PROTOCOL: the metrics answer is not a string");
    }
    fwrite(up.data.via.str.ptr, 1, up.data.via.str.size, stdout);
    msgpack_unpacked_destroy(&up);
    convd_free(res);
    return CTL_EXIT_OK;
}
