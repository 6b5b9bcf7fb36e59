// The wire parts of shared-memory regions (see proto/region.h).

#include "proto/region.h"

#include "core/errors.h"
#include "proto/describe.h"
#include "proto/params.h"
#include "proto/rpc.h"

#include <inttypes.h>
#include <string.h>

bool cd_tensor_is_ref(const msgpack_object *obj) {
    return obj && obj->type == MSGPACK_OBJECT_MAP && cd_map_get(obj, "region") != NULL;
}

int cd_region_name_check(const char *name, size_t len, char *err, size_t errlen) {
    if (len < 1 || len > CD_MAX_REGION_NAME)
        return cd_errf(CD_EPARAMS, err, errlen, "a region name must be 1..%d bytes, got %zu", CD_MAX_REGION_NAME, len);
    for (size_t i = 0; i < len; i++)
        if (name[i] < 0x21 || name[i] > 0x7e)
            return cd_errf(CD_EPARAMS, err, errlen, "a region name must be printable ASCII without spaces");
    return 0;
}

// Finds the n fields `names` of map obj, each at most once, no others.
// Returns 0 (absent fields NULL) or CD_EPARAMS.
static int ref_fields(const msgpack_object *obj, const char *what, const char *const *names, int n,
                      const msgpack_object **f, char *err, size_t errlen) {
    if (!obj || obj->type != MSGPACK_OBJECT_MAP)
        return cd_errf(CD_EPARAMS, err, errlen, "%s must be a map, got %s", what,
                       obj ? cd_obj_type_name(obj) : "nothing");
    for (int j = 0; j < n; j++) f[j] = NULL;
    for (uint32_t i = 0; i < obj->via.map.size; i++) {
        const msgpack_object *k = &obj->via.map.ptr[i].key;
        int j = 0;
        while (j < n && !cd_obj_streq(k, names[j])) j++;
        if (j == n) return cd_errf(CD_EPARAMS, err, errlen, "%s has an unknown field", what);
        if (f[j]) return cd_errf(CD_EPARAMS, err, errlen, "%s field '%s' appears twice", what, names[j]);
        f[j] = &obj->via.map.ptr[i].val;
    }
    return 0;
}

static int ref_name(const msgpack_object *o, cd_region_ref *ref, char *err, size_t errlen) {
    if (!o) return cd_errf(CD_EPARAMS, err, errlen, "'region' is missing");
    if (!cd_obj_text(o, &ref->name, &ref->name_len))
        return cd_errf(CD_EPARAMS, err, errlen, "'region' must be a str, got %s", cd_obj_type_name(o));
    return cd_region_name_check(ref->name, ref->name_len, err, errlen);
}

static int ref_uint(const msgpack_object *o, const char *key, uint64_t *out, char *err, size_t errlen) {
    if (!o) return cd_errf(CD_EPARAMS, err, errlen, "'%s' is missing", key);
    if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        return cd_errf(CD_EPARAMS, err, errlen, "'%s' must be an int >= 0, got %s", key, cd_obj_type_name(o));
    *out = o->via.u64;
    return 0;
}

int cd_tensor_ref_decode(const msgpack_object *obj, cd_tensor *t, cd_region_ref *ref, char *err, size_t errlen) {
    static const char *const names[] = {"dtype", "shape", "region", "offset"};
    const msgpack_object *f[4];
    memset(ref, 0, sizeof *ref);
    int rc = ref_fields(obj, "a region tensor {dtype, shape, region, offset}", names, 4, f, err, errlen);
    if (rc) return rc;
    if (!f[0] || !f[1]) return cd_errf(CD_EPARAMS, err, errlen, "a region tensor needs 'dtype' and 'shape'");
    rc = cd_tensor_decode_head(f[0], f[1], t, err, errlen);
    if (!rc) rc = ref_name(f[2], ref, err, errlen);
    if (!rc) rc = ref_uint(f[3], "offset", &ref->offset, err, errlen);
    ref->size = t->nbytes;
    return rc;
}

int cd_region_ref_decode(const msgpack_object *obj, cd_region_ref *ref, char *err, size_t errlen) {
    static const char *const names[] = {"region", "offset", "size"};
    const msgpack_object *f[3];
    memset(ref, 0, sizeof *ref);
    int rc = ref_fields(obj, "an output placement {region, offset, size}", names, 3, f, err, errlen);
    if (!rc) rc = ref_name(f[0], ref, err, errlen);
    if (!rc) rc = ref_uint(f[1], "offset", &ref->offset, err, errlen);
    if (!rc) rc = ref_uint(f[2], "size", &ref->size, err, errlen);
    return rc;
}

int cd_tensor_ref_pack(msgpack_packer *pk, const cd_tensor *t, const char *region, size_t region_len, uint64_t offset) {
    const char *name = cd_dtype_name(t->dtype);
    int rc = msgpack_pack_map(pk, 4);
    rc |= cd_pack_str(pk, "dtype");
    rc |= cd_pack_str(pk, name);
    rc |= cd_pack_str(pk, "shape");
    rc |= msgpack_pack_array(pk, (size_t)t->rank);
    for (int i = 0; i < t->rank; i++) rc |= msgpack_pack_int64(pk, t->shape[i]);
    rc |= cd_pack_str(pk, "region");
    rc |= msgpack_pack_str(pk, region_len);
    rc |= msgpack_pack_str_body(pk, region, region_len);
    rc |= cd_pack_str(pk, "offset");
    rc |= msgpack_pack_uint64(pk, offset);
    return rc ? CD_ENOMEM : 0;
}
