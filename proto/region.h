#ifndef CD_PROTO_REGION_H
#define CD_PROTO_REGION_H

// The wire parts of shared-memory regions (docs/PROTOCOL.md, "Shared-memory
// regions"). A tensor may name bytes of a registered region instead of
// carrying them:
//   input:  {dtype, shape, region: name, offset: uint}
//   output: the infer param `into: {output name: {region, offset, size}}`;
//           its reply is {dtype, shape, region, offset}, with no data.
// Decoding never resolves the name: that is the daemon's (daemon/regions.c).

#include "proto/tensor.h"

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// Longest region name, in bytes.
#define CD_MAX_REGION_NAME 64

// Where a tensor's bytes lie in a region: a view of the name in the message.
typedef struct {
    const char *name; // region name (not NUL-terminated), NULL: inline tensor
    size_t name_len;  // 1..CD_MAX_REGION_NAME
    uint64_t offset;  // first byte in the region
    uint64_t size;    // bytes the client gives (inputs: the tensor's nbytes)
} cd_region_ref;

// True when obj is a tensor map that names a region (has a 'region' key).
bool cd_tensor_is_ref(const msgpack_object *obj);

// Decodes {dtype, shape, region, offset}: t gets dtype, shape and nbytes
// (data NULL), ref the name, offset and size (= nbytes). Returns 0,
// CD_EPARAMS, CD_EDTYPE, CD_ESHAPE or CD_ETOO_LARGE with a reason in err.
int cd_tensor_ref_decode(const msgpack_object *obj, cd_tensor *t, cd_region_ref *ref, char *err, size_t errlen);

// Decodes an output placement {region, offset, size}. Returns 0 or
// CD_EPARAMS with a reason.
int cd_region_ref_decode(const msgpack_object *obj, cd_region_ref *ref, char *err, size_t errlen);

// Checks a region name (1..CD_MAX_REGION_NAME bytes of printable ASCII).
// Returns 0 or CD_EPARAMS with a reason.
int cd_region_name_check(const char *name, size_t len, char *err, size_t errlen);

// Packs a tensor whose bytes are in a region: {dtype, shape, region, offset}.
// Returns 0 or CD_ENOMEM.
int cd_tensor_ref_pack(msgpack_packer *pk, const cd_tensor *t, const char *region, size_t region_len, uint64_t offset);

#endif // CD_PROTO_REGION_H
