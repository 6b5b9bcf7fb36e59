#ifndef CD_RUNTIME_ONNX_FILE_H
#define CD_RUNTIME_ONNX_FILE_H

// Reading an ONNX file whole, shared by the importer and `convctl prune`.

#include <stddef.h>
#include <stdint.h>

#define CD_ONNX_MAX_BYTES ((size_t)2 << 30) // protobuf's own 2 GiB limit

// Reads the regular file at path into a malloc'd buffer (*out, *len; free it).
// max_bytes (0: none) is the caller's limit, checked with fstat before
// anything is read. Returns 0, CD_EIO (cannot open/read, not a regular file),
// CD_ETOO_LARGE (over max_bytes), CD_EMODEL (over CD_ONNX_MAX_BYTES) or
// CD_ENOMEM, with a reason in err.
int cd_onnx_read_file(const char *path, size_t max_bytes, uint8_t **out, size_t *len, char *err, size_t errlen);

#endif // CD_RUNTIME_ONNX_FILE_H
