#ifndef CD_PROTO_TENSOR_H
#define CD_PROTO_TENSOR_H

// The tensor codec: on the wire a tensor is the map
//   {dtype: "f32", shape: [d0, d1, ...], data: bin}
// with data in C order, little-endian. Decoding validates: rank 1..CD_MAX_RANK,
// every dim >= 1, product * itemsize == len(data) computed without overflow.

#include "core/dtype.h"
#include "core/limits.h"

#include <msgpack.h>
#include <stddef.h>
#include <stdint.h>

// A tensor view. Decoding never copies: data points into the message.
typedef struct {
    cd_dtype dtype;
    int rank;
    int64_t shape[CD_MAX_RANK];
    const void *data;
    size_t nbytes;
} cd_tensor;

// Number of elements, or -1 on overflow (never happens for decoded tensors).
int64_t cd_tensor_numel(const cd_tensor *t);

// Decodes and validates a tensor object. Returns 0, CD_EPARAMS (not a map,
// missing/ill-typed fields), CD_EDTYPE (unknown dtype), CD_ESHAPE (rank or
// dims out of range, size mismatch) or CD_ETOO_LARGE (size overflow). err
// gets a readable reason naming the field.
int cd_tensor_decode(const msgpack_object *obj, cd_tensor *t, char *err, size_t errlen);

// The dtype and shape fields of a tensor map (either form: inline data or a
// region reference, proto/region.h) into t, with t->nbytes from them and
// t->data NULL. Returns 0, CD_EPARAMS, CD_EDTYPE, CD_ESHAPE or CD_ETOO_LARGE.
int cd_tensor_decode_head(const msgpack_object *dtype, const msgpack_object *shape, cd_tensor *t, char *err,
                          size_t errlen);

// Largest payload of one msgpack bin (bin 32: a 32-bit length).
#define CD_MAX_BIN UINT32_MAX

// CD_ETOO_LARGE (reason in err, which may be NULL) when t's data cannot be
// one msgpack bin (over CD_MAX_BIN bytes); else 0. Looks at t->nbytes only.
int cd_tensor_pack_check(const cd_tensor *t, char *err, size_t errlen);
// An upper bound of the bytes cd_tensor_pack writes for t (payload included);
// computed from the shape and nbytes alone (data is not read).
uint64_t cd_tensor_packed_size(const cd_tensor *t);
// CD_ETOO_LARGE with a reason when a reply of `bytes` exceeds `limit`, else 0:
// replies are checked before anything is packed.
int cd_reply_size_check(uint64_t bytes, uint64_t limit, char *err, size_t errlen);

// Packs a tensor map. Returns 0, CD_ENOMEM, or CD_ETOO_LARGE (nothing packed)
// when the data is over CD_MAX_BIN bytes: msgpack-c would cut its length to
// 32 bits.
int cd_tensor_pack(msgpack_packer *pk, const cd_tensor *t);
// cd_tensor_pack up to and including the data's bin header: the caller packs
// the t->nbytes bytes of the body next (or sends them from where they lie,
// daemon/reply.h). Same returns.
int cd_tensor_pack_head(msgpack_packer *pk, const cd_tensor *t);

#endif // CD_PROTO_TENSOR_H
