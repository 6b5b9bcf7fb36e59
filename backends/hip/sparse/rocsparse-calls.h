#ifndef CD_BACKENDS_HIP_SPARSE_ROCSPARSE_CALLS_H
#define CD_BACKENDS_HIP_SPARSE_ROCSPARSE_CALLS_H

// Sparse x dense products on AMD GPUs through rocSPARSE 5.3 (Debian 12):
// CSR through the generic rocsparse_spmm with its three explicit stages
// (buffer size and preprocess at load, compute per request), BSR through
// rocsparse_sgebsrmm (general row_block_dim x col_block_dim blocks: the
// planner's 4x1 / 8x1) with column-major dense operands. Built only into the
// HIP plugin (make GPU=hip); rocSPARSE cannot run without a GPU, so the
// emulated backend routes SpMM to the CPU kernels instead (docs/GPU.md).
//
// Every HIP and rocSPARSE call is checked; failures are logged with the call,
// file:line and status name and returned as CD_E* codes. Nothing aborts.

#include "backends/hip/vendor-host.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// rocSPARSE's generic SpMM is slow for very narrow dense operands: a dense
// side narrower than this is padded to it (zero columns; see
// cd_rocsparse_csr_cols).
#define CD_ROCSPARSE_MIN_COLS 16

typedef struct cd_rocsparse_ctx cd_rocsparse_ctx;     // one rocSPARSE handle
typedef struct cd_rocsparse_csr cd_rocsparse_csr;     // CSR weights resident on the device
typedef struct cd_rocsparse_gebsr cd_rocsparse_gebsr; // general-BSR weights resident on the device

// A rocSPARSE handle (host pointer mode). Each costs device memory (about
// CD_HIP_SPARSE_HANDLE_BYTES, backends/hip/backend-hip-impl.h), an init kernel
// and a wait, so the backend makes one per worker context, not per layer;
// plans hold none. Calls on one handle must not overlap (one context is used
// by one thread at a time). Returns 0, CD_ENOMEM or CD_EDEVICE (logged).
int cd_rocsparse_ctx_create(cd_rocsparse_ctx **out);

// Destroys the handle (NULL is fine).
void cd_rocsparse_ctx_free(cd_rocsparse_ctx *rs);

// Dense column count a CSR plan for n columns works with: max(n, 16). The
// caller's B (k x cols) and C (m x cols) device buffers are row-major with
// leading dimension >= that; the padding columns of B must be zero.
int cd_rocsparse_csr_cols(int n);

// Uploads the m x k CSR matrix (host arrays: row_ptr[m+1], col_ind[nnz],
// val[nnz], zero-based, int32 indices) and, for C (m x cols) = A x B
// (k x cols), both row-major with leading dimension cols =
// cd_rocsparse_csr_cols(n), runs the buffer-size and preprocess stages with
// rs's handle on the null stream, on sample device buffers b and c of those
// shapes; waits for them. Returns 0, CD_EPARAMS for bad sizes, CD_ENOMEM, or
// CD_EDEVICE (logged).
int cd_rocsparse_csr_init(cd_rocsparse_csr **out, cd_rocsparse_ctx *rs, int m, int k, int nnz, const int *row_ptr,
                          const int *col_ind, const float *val, int n, float *b, float *c);

// Queues C = A x B for device buffers b and c (shapes as at init) on
// `stream`, with rs's handle (its stream is set to `stream`): the compute
// stage only, no wait. Dense descriptors are made per call, so threads may
// run one plan at once, each with its own rs. Returns 0 or a CD_E* code
// (logged).
int cd_rocsparse_csr_spmm(const cd_rocsparse_csr *plan, cd_rocsparse_ctx *rs, hipStream_t stream, const float *b,
                          float *c);

// Frees the device copies, descriptor and work buffer (NULL is fine).
void cd_rocsparse_csr_free(cd_rocsparse_csr *plan);

// Uploads (once, synchronously) an mb x kb block-row general-BSR matrix of
// row_block_dim x col_block_dim blocks for rocsparse_sgebsrmm (host arrays as
// packed by cd_gebsr_pack, backends/hip/sparse/gebsr-pack.h: row_ptr[mb+1],
// col_ind[nnzb], val[nnzb*rbd*cbd], each block row-major, zero-based; nnzb
// may be 0). Returns 0, CD_EPARAMS, CD_ENOMEM or CD_EDEVICE (logged).
int cd_rocsparse_gebsr_init(cd_rocsparse_gebsr **out, int mb, int kb, int nnzb, int row_block_dim, int col_block_dim,
                            const int *row_ptr, const int *col_ind, const float *val);

// Queues C (mb*rbd x n) = A x op(B) on `stream` with rs's handle (its
// stream is set to `stream`), column-major device buffers: op(B) = B
// (kb*cbd x n, ldb >= kb*cbd) when b_trans is 0, else B^T with B
// n x kb*cbd (ldb >= n) - a row-major kb*cbd x n matrix such as one NCHW
// image (C x H*W) is exactly that B with ldb = H*W. All mb*rbd rows of C are
// written (padding rows as zeros): ldc >= mb*rbd. Threads may run one plan at
// once, each with its own rs. Returns 0 or a CD_E* code (logged).
int cd_rocsparse_gebsr_mm(const cd_rocsparse_gebsr *plan, cd_rocsparse_ctx *rs, hipStream_t stream, int b_trans, int n,
                          const float *b, int ldb, float *c, int ldc);

// Frees the device copies and descriptor (NULL is fine).
void cd_rocsparse_gebsr_free(cd_rocsparse_gebsr *plan);

// The plugin probe's rocSPARSE check: creates a handle and runs one tiny
// rocsparse_saxpyi (its kernel) on the current device, checking the launch
// and the result. A rocSPARSE built without code for this GPU fails here, at
// start-up, instead of at the first sparse layer. Returns 0, or a CD_E* code
// with the failed call and status in why.
int cd_rocsparse_probe(char *why, size_t whylen);

#ifdef __cplusplus
}
#endif

#endif // CD_BACKENDS_HIP_SPARSE_ROCSPARSE_CALLS_H
