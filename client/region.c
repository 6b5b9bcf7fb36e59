// libconvd shared-memory regions (see convd.h, "shared-memory regions"): a
// sealed memfd mapped here, its registration (the descriptor goes with the
// region_register request), and inferences that name places in regions.

#include "client/client-internal.h"
#include "core/errors.h"
#include "proto/region.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct convd_region {
    int fd;      // the memfd
    void *base;  // its mapping
    size_t size; // bytes
};

int convd_region_create(size_t size, convd_region **out) {
    if (out) *out = NULL;
    if (!out || size == 0) return cd_client_fail(CD_EPARAMS, "a region needs out and at least one byte");
    convd_region *r = calloc(1, sizeof *r);
    if (!r) return cd_client_fail(CD_ENOMEM, "out of memory");
    r->size = size;
    r->fd = memfd_create("convd-region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    const char *step = "memfd_create";
    if (r->fd >= 0) step = ftruncate(r->fd, (off_t)size) == 0 ? NULL : "ftruncate";
    // The daemon refuses a region that could shrink under it (a SIGBUS).
    if (!step && fcntl(r->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) step = "F_ADD_SEALS";
    if (!step) {
        r->base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
        if (r->base == MAP_FAILED) step = "mmap";
    }
    if (step) {
        int e = errno;
        if (r->fd >= 0) close(r->fd);
        free(r);
        return cd_client_fail(e == ENOMEM ? CD_ENOMEM : CD_EIO, "cannot create a region of %zu bytes: %s: %s", size,
                              step, strerror(e));
    }
    *out = r;
    return 0;
}

void *convd_region_data(const convd_region *r) { return r ? r->base : NULL; }
size_t convd_region_size(const convd_region *r) { return r ? r->size : 0; }
int convd_region_fd(const convd_region *r) { return r ? r->fd : -1; }

void convd_region_free(convd_region *r) {
    if (!r) return;
    munmap(r->base, r->size);
    close(r->fd);
    free(r);
}

static int pack_name(msgpack_packer *pk, void *ud) {
    int rc = msgpack_pack_map(pk, 1);
    rc |= cd_pack_kv_str(pk, "name", ud);
    return rc ? cd_client_fail(CD_ENOMEM, "out of memory packing the request") : 0;
}

static int check_name(const char *name) {
    char err[128];
    if (!name) return cd_client_fail(CD_EPARAMS, "a region name is required");
    if (cd_region_name_check(name, strlen(name), err, sizeof err) != 0) return cd_client_fail(CD_EPARAMS, "%s", err);
    return 0;
}

int convd_region_register(convd_conn *c, const convd_region *r, const char *name, int timeout_ms) {
    if (!c || !r) return cd_client_fail(CD_EPARAMS, "conn and region are required");
    int rc = check_name(name);
    if (rc) return rc;
    cd_rpc_msg m;
    rc = cd_client_call_fd(c, "region_register", pack_name, (void *)name, r->fd, timeout_ms, &m);
    if (rc == 0) cd_rpc_msg_free(&m);
    return rc;
}

int convd_region_unregister(convd_conn *c, const char *name, int timeout_ms) {
    if (!c) return cd_client_fail(CD_EPARAMS, "conn is required");
    int rc = check_name(name);
    if (rc) return rc;
    cd_rpc_msg m;
    rc = cd_client_call(c, "region_unregister", pack_name, (void *)name, timeout_ms, &m);
    if (rc == 0) cd_rpc_msg_free(&m);
    return rc;
}

int convd_infer_regions(convd_conn *c, const char *model, size_t n_inputs, const char *const *names,
                        const convd_tensor *inputs, const convd_region_ref *input_refs, size_t n_outputs,
                        const char *const *output_names, const convd_region_ref *output_refs, convd_outputs **out,
                        int timeout_ms) {
    if (out) *out = NULL;
    if (!c || !model || !out) return cd_client_fail(CD_EPARAMS, "conn, model and out are required");
    if (output_refs && n_outputs == 0)
        return cd_client_fail(CD_EPARAMS, "output_refs needs the output_names they belong to");
    for (size_t i = 0; input_refs && i < n_inputs; i++)
        if (input_refs[i].region && check_name(input_refs[i].region)) return CD_EPARAMS;
    for (size_t i = 0; output_refs && i < n_outputs; i++)
        if (output_refs[i].region && check_name(output_refs[i].region)) return CD_EPARAMS;
    cd_client_infer_params ip;
    int rc =
        cd_client_infer_check(c, model, n_inputs, names, inputs, input_refs, n_outputs, output_names, timeout_ms, &ip);
    if (rc) return rc;
    ip.out_refs = output_refs;
    cd_rpc_msg m;
    rc = cd_client_call(c, "infer", cd_client_pack_infer, &ip, timeout_ms, &m);
    if (rc != 0) return rc;
    return cd_client_infer_outputs(&m, out);
}
