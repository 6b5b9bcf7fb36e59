// The tensor codec (see proto/tensor.h).

#include "proto/tensor.h"

#include "core/errors.h"
#include "proto/describe.h"
#include "proto/params.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

int64_t cd_tensor_numel(const cd_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++)
        if (t->shape[i] < 0 || __builtin_mul_overflow(n, t->shape[i], &n)) return -1;
    return n;
}

// Writes "[d0, d1, ...]" for the first rank dims of shape.
static const char *shape_str(char *buf, size_t len, const int64_t *shape, int rank) {
    size_t o = 0;
    buf[0] = '\0';
    o += (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < rank && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s%" PRId64, i ? ", " : "", shape[i]);
    if (o < len) snprintf(buf + o, len - o, "]");
    return buf;
}

// Finds the three fields of a tensor map. Returns 0 or CD_EPARAMS.
static int tensor_fields(const msgpack_object *obj, const msgpack_object *f[3], char *err, size_t errlen) {
    static const char *names[3] = {"dtype", "shape", "data"};
    if (!obj || obj->type != MSGPACK_OBJECT_MAP)
        return cd_errf(CD_EPARAMS, err, errlen, "a tensor must be a map {dtype, shape, data}, got %s",
                       obj ? cd_obj_type_name(obj) : "nothing");
    f[0] = f[1] = f[2] = NULL;
    for (uint32_t i = 0; i < obj->via.map.size; i++) {
        const msgpack_object *k = &obj->via.map.ptr[i].key;
        const char *ks;
        size_t kn;
        if (!cd_obj_text(k, &ks, &kn))
            return cd_errf(CD_EPARAMS, err, errlen, "tensor keys must be str, got %s%s", cd_obj_type_name(k),
                           k->type == MSGPACK_OBJECT_BIN ? " that is not valid UTF-8" : "");
        int j = 0;
        while (j < 3 && !(kn == strlen(names[j]) && memcmp(ks, names[j], kn) == 0)) j++;
        if (j == 3) {
            char name[64];
            cd_sanitize(name, sizeof name, ks, kn);
            return cd_errf(CD_EPARAMS, err, errlen, "tensor has unknown field '%s' (expected dtype, shape, data)",
                           name);
        }
        if (f[j]) return cd_errf(CD_EPARAMS, err, errlen, "tensor field '%s' appears twice", names[j]);
        f[j] = &obj->via.map.ptr[i].val;
    }
    for (int j = 0; j < 3; j++)
        if (!f[j]) return cd_errf(CD_EPARAMS, err, errlen, "tensor is missing field '%s'", names[j]);
    return 0;
}

int cd_tensor_decode_head(const msgpack_object *dtype, const msgpack_object *shape, cd_tensor *t, char *err,
                          size_t errlen) {
    memset(t, 0, sizeof *t);
    const char *dts;
    size_t dtn;
    if (!cd_obj_text(dtype, &dts, &dtn))
        return cd_errf(CD_EPARAMS, err, errlen, "tensor field 'dtype' must be a str, got %s%s", cd_obj_type_name(dtype),
                       dtype->type == MSGPACK_OBJECT_BIN ? " that is not valid UTF-8" : "");
    cd_dtype dt = cd_dtype_from_name(dts, dtn);
    if (dt == CD_DTYPE_INVALID) {
        char name[40];
        cd_sanitize(name, sizeof name, dts, dtn);
        return cd_errf(CD_EDTYPE, err, errlen,
                       "tensor dtype '%s' is not one of f32, f16, bf16, f64, i8, u8, "
                       "i16, i32, i64, bool",
                       name);
    }

    if (shape->type != MSGPACK_OBJECT_ARRAY)
        return cd_errf(CD_EPARAMS, err, errlen, "tensor field 'shape' must be an array, got %s",
                       cd_obj_type_name(shape));
    uint32_t rank = shape->via.array.size;
    if (rank < 1 || rank > CD_MAX_RANK)
        return cd_errf(CD_ESHAPE, err, errlen, "tensor rank %" PRIu32 " is out of range 1..%d", rank, CD_MAX_RANK);
    for (uint32_t i = 0; i < rank; i++) {
        const msgpack_object *d = &shape->via.array.ptr[i];
        if (d->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
            return cd_errf(CD_ESHAPE, err, errlen, "tensor shape[%" PRIu32 "] is %" PRId64 ", every dim must be >= 1",
                           i, d->via.i64);
        if (d->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
            return cd_errf(CD_ESHAPE, err, errlen, "tensor shape[%" PRIu32 "] must be an int, got %s", i,
                           cd_obj_type_name(d));
        if (d->via.u64 == 0)
            return cd_errf(CD_ESHAPE, err, errlen, "tensor shape[%" PRIu32 "] is 0, every dim must be >= 1", i);
        if (d->via.u64 > INT64_MAX)
            return cd_errf(CD_ETOO_LARGE, err, errlen, "tensor shape[%" PRIu32 "] is %" PRIu64 ", larger than 2^63-1",
                           i, d->via.u64);
        t->shape[i] = (int64_t)d->via.u64;
    }
    t->rank = (int)rank;

    char sbuf[8 * 24 + 4];
    int64_t numel = cd_tensor_numel(t);
    if (numel < 0)
        return cd_errf(CD_ETOO_LARGE, err, errlen, "tensor shape %s has more elements than fit in 64 bits",
                       shape_str(sbuf, sizeof sbuf, t->shape, t->rank));
    int64_t nbytes;
    if (__builtin_mul_overflow(numel, (int64_t)cd_dtype_size(dt), &nbytes))
        return cd_errf(CD_ETOO_LARGE, err, errlen, "tensor shape %s of %s is more bytes than fit in 64 bits",
                       shape_str(sbuf, sizeof sbuf, t->shape, t->rank), cd_dtype_name(dt));
    t->dtype = dt;
    t->nbytes = (size_t)nbytes;
    return 0;
}

int cd_tensor_decode(const msgpack_object *obj, cd_tensor *t, char *err, size_t errlen) {
    memset(t, 0, sizeof *t);
    const msgpack_object *f[3];
    int rc = tensor_fields(obj, f, err, errlen);
    if (rc < 0) return rc;
    const msgpack_object *data = f[2];
    rc = cd_tensor_decode_head(f[0], f[1], t, err, errlen);
    if (rc < 0) return rc;
    if (data->type != MSGPACK_OBJECT_BIN)
        return cd_errf(CD_EPARAMS, err, errlen, "tensor field 'data' must be bin, got %s", cd_obj_type_name(data));
    char sbuf[8 * 24 + 4];
    if ((uint64_t)t->nbytes != data->via.bin.size)
        return cd_errf(CD_ESHAPE, err, errlen, "tensor data is %" PRIu32 " bytes, shape %s of %s needs %zu",
                       data->via.bin.size, shape_str(sbuf, sizeof sbuf, t->shape, t->rank), cd_dtype_name(t->dtype),
                       t->nbytes);
    t->data = data->via.bin.ptr;
    return 0;
}

uint64_t cd_tensor_packed_size(const cd_tensor *t) {
    // map header, "dtype" + name, "shape" + array header + up to 9 bytes a
    // dim, "data" + bin header (5), then the payload.
    return 1 + 6 + 1 + strlen(cd_dtype_name(t->dtype)) + 6 + 5 + 9 * (uint64_t)t->rank + 5 + 5 + (uint64_t)t->nbytes;
}

int cd_reply_size_check(uint64_t bytes, uint64_t limit, char *err, size_t errlen) {
    if (bytes > limit)
        return cd_errf(CD_ETOO_LARGE, err, errlen, "the reply would be %" PRIu64 " bytes, over the limit of %" PRIu64,
                       bytes, limit);
    return 0;
}

int cd_tensor_pack_check(const cd_tensor *t, char *err, size_t errlen) {
    if ((uint64_t)t->nbytes > CD_MAX_BIN)
        return cd_errf(CD_ETOO_LARGE, err, errlen,
                       "tensor of %" PRIu64 " bytes does not fit one msgpack bin "
                       "(at most %" PRIu64 " bytes)",
                       (uint64_t)t->nbytes, (uint64_t)CD_MAX_BIN);
    return 0;
}

int cd_tensor_pack_head(msgpack_packer *pk, const cd_tensor *t) {
    int rc = cd_tensor_pack_check(t, NULL, 0);
    if (rc < 0) return rc; // msgpack-c would cut the length to 32 bits
    const char *name = cd_dtype_name(t->dtype);
    size_t nlen = strlen(name);
    if (msgpack_pack_map(pk, 3) != 0) return CD_ENOMEM;
    if (msgpack_pack_str(pk, 5) != 0 || msgpack_pack_str_body(pk, "dtype", 5) != 0) return CD_ENOMEM;
    if (msgpack_pack_str(pk, nlen) != 0 || msgpack_pack_str_body(pk, name, nlen) != 0) return CD_ENOMEM;
    if (msgpack_pack_str(pk, 5) != 0 || msgpack_pack_str_body(pk, "shape", 5) != 0) return CD_ENOMEM;
    if (msgpack_pack_array(pk, (size_t)t->rank) != 0) return CD_ENOMEM;
    for (int i = 0; i < t->rank; i++)
        if (msgpack_pack_int64(pk, t->shape[i]) != 0) return CD_ENOMEM;
    if (msgpack_pack_str(pk, 4) != 0 || msgpack_pack_str_body(pk, "data", 4) != 0) return CD_ENOMEM;
    if (msgpack_pack_bin(pk, t->nbytes) != 0) return CD_ENOMEM;
    return 0;
}

int cd_tensor_pack(msgpack_packer *pk, const cd_tensor *t) {
    int rc = cd_tensor_pack_head(pk, t);
    if (rc < 0) return rc;
    if (t->nbytes && msgpack_pack_bin_body(pk, t->data, t->nbytes) != 0) return CD_ENOMEM;
    return 0;
}
