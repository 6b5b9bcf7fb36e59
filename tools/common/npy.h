#ifndef CD_TOOLS_COMMON_NPY_H
#define CD_TOOLS_COMMON_NPY_H

// Reading and writing NumPy .npy files (format versions 1.0, 2.0 and 3.0),
// C order, little-endian. Supported dtypes: f32, f16, f64, i8, u8, i16, i32,
// i64, bool. Everything read is validated: magic, version, header length and
// syntax, dtype, fortran_order (must be False), rank (<= CD_MAX_RANK), dims
// (>= 0, product without overflow) and the data length (exactly the rest of
// the file).

#include "core/limits.h"
#include "proto/tensor.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    cd_dtype dtype;
    int rank; // 0 for a scalar
    int64_t shape[CD_MAX_RANK];
    void *data; // nbytes bytes, malloc'd (NULL when nbytes is 0)
    size_t nbytes;
} cd_npy;

// Reads path into out. Returns 0, CD_EIO (cannot open/read), CD_EPARAMS
// (not a valid .npy file: bad magic, header, shape or size; err says which),
// CD_EDTYPE (dtype not supported), CD_ETOO_LARGE (rank or size over limits)
// or CD_ENOMEM. On failure out holds nothing to free.
int cd_npy_read(const char *path, cd_npy *out, char *err, size_t errlen);

// Writes a C-order array. rank 0..CD_MAX_RANK. Returns 0, CD_EIO, CD_EDTYPE
// or CD_EPARAMS (bad rank or dims).
int cd_npy_write(const char *path, cd_dtype dt, int rank, const int64_t *shape, const void *data, char *err,
                 size_t errlen);

// Frees the data of n (safe on a zeroed or already freed struct).
void cd_npy_free(cd_npy *n);

// Size of one element of dt in bytes (0 for an invalid dtype). Same as
// proto's cd_dtype_size, kept here so tools need no wire code.
size_t cd_npy_itemsize(cd_dtype dt);

#endif // CD_TOOLS_COMMON_NPY_H
