// The rocSPARSE call sequences (backends/hip/sparse/rocsparse-calls.h). Compiled by gcc
// with -D__HIP_PLATFORM_AMD__ into the HIP plugin; every line is compiled by
// `make GPU=hip` in CI, none has run on a GPU yet (docs/GPU.md).

#include "backends/hip/sparse/rocsparse-calls.h"
#include "core/log.h"

#include "backends/hip/check.h"
#include "core/errors.h"

#include <rocsparse/rocsparse.h>
#include <stdio.h>
#include <stdlib.h>

// rocSPARSE 5.3 has no rocsparse_get_status_name: our own.
static const char *rocsparse_status_name(rocsparse_status s) {
    switch (s) {
    case rocsparse_status_success: return "rocsparse_status_success";
    case rocsparse_status_invalid_handle: return "rocsparse_status_invalid_handle";
    case rocsparse_status_not_implemented: return "rocsparse_status_not_implemented";
    case rocsparse_status_invalid_pointer: return "rocsparse_status_invalid_pointer";
    case rocsparse_status_invalid_size: return "rocsparse_status_invalid_size";
    case rocsparse_status_memory_error: return "rocsparse_status_memory_error";
    case rocsparse_status_internal_error: return "rocsparse_status_internal_error";
    case rocsparse_status_invalid_value: return "rocsparse_status_invalid_value";
    case rocsparse_status_arch_mismatch: return "rocsparse_status_arch_mismatch";
    case rocsparse_status_zero_pivot: return "rocsparse_status_zero_pivot";
    case rocsparse_status_not_initialized: return "rocsparse_status_not_initialized";
    case rocsparse_status_type_mismatch: return "rocsparse_status_type_mismatch";
    case rocsparse_status_requires_sorted_storage: return "rocsparse_status_requires_sorted_storage";
    }
    return "rocsparse_status_unknown";
}

// Logs a failed call and returns its CD_E* code: memory errors are
// CD_ENOMEM, an operation this rocSPARSE lacks is CD_EUNSUPPORTED, the rest
// CD_EDEVICE.
static int rocsparse_fail(const char *call, const char *file, int line, rocsparse_status s) {
    cd_rt_log(CD_RT_LOG_ERROR, "rocsparse: %s failed at %s:%d: %s", call, file, line, rocsparse_status_name(s));
    switch (s) {
    case rocsparse_status_memory_error: return CD_ENOMEM;
    case rocsparse_status_not_implemented: return CD_EUNSUPPORTED;
    default: return CD_EDEVICE;
    }
}

// The CD_E* code of a failed status, without logging (see rocsparse_fail).
static int rocsparse_fail_quiet(rocsparse_status s) {
    return s == rocsparse_status_memory_error      ? CD_ENOMEM
           : s == rocsparse_status_not_implemented ? CD_EUNSUPPORTED
                                                   : CD_EDEVICE;
}

// Every rocSPARSE call goes through this (HIP calls through CD_HIP_CHECK).
// rocSPARSE 5.3 does not check its own kernel launches: a launch that failed
// (e.g. no code object for this GPU) would surface at our next kernel and be
// blamed on it, so the thread's last HIP error is taken after every call.
#define CD_ROCSPARSE_CHECK(call)                                                                              \
    do {                                                                                                      \
        rocsparse_status cd_rs_s_ = (call);                                                                   \
        if (cd_rs_s_ != rocsparse_status_success) return rocsparse_fail(#call, __FILE__, __LINE__, cd_rs_s_); \
        int cd_rs_rc_ = cd_hip_check_launch(#call, __FILE__, __LINE__);                                       \
        if (cd_rs_rc_) return cd_rs_rc_;                                                                      \
    } while (0)

// Teardown has no caller to report to: check and log, no return.
#define CD_ROCSPARSE_CHECK_LOG(call)                                                                         \
    do {                                                                                                     \
        rocsparse_status cd_rs_s_ = (call);                                                                  \
        if (cd_rs_s_ != rocsparse_status_success) (void)rocsparse_fail(#call, __FILE__, __LINE__, cd_rs_s_); \
    } while (0)

struct cd_rocsparse_ctx {
    rocsparse_handle handle; // host pointer mode; its stream is set per call
};

int cd_rocsparse_ctx_create(cd_rocsparse_ctx **out) {
    *out = NULL;
    cd_rocsparse_ctx *p = calloc(1, sizeof *p);
    if (!p) return CD_ENOMEM;
    rocsparse_status s = rocsparse_create_handle(&p->handle);
    if (s == rocsparse_status_success) s = rocsparse_set_pointer_mode(p->handle, rocsparse_pointer_mode_host);
    if (s != rocsparse_status_success) {
        cd_rocsparse_ctx_free(p);
        return rocsparse_fail("rocsparse_create_handle", __FILE__, __LINE__, s);
    }
    int rc = cd_hip_check_launch("rocsparse_create_handle", __FILE__, __LINE__);
    if (rc) {
        cd_rocsparse_ctx_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

void cd_rocsparse_ctx_free(cd_rocsparse_ctx *p) {
    if (!p) return;
    if (p->handle) CD_ROCSPARSE_CHECK_LOG(rocsparse_destroy_handle(p->handle));
    free(p);
}

struct cd_rocsparse_csr {
    rocsparse_spmat_descr a; // m x k CSR over the device arrays below
    int m, k, cols;          // C (m x cols) = A x B (k x cols), row-major
    int *row_ptr, *col_ind;  // device copies
    float *val;
    void *work; // the buffer sized by stage_buffer_size, filled by preprocess
    size_t work_bytes;
};

int cd_rocsparse_csr_cols(int n) { return n < CD_ROCSPARSE_MIN_COLS ? CD_ROCSPARSE_MIN_COLS : n; }

// Copies n bytes of host data to a new device buffer *dst, on the null
// stream; setup_finish makes it visible to other streams.
static int upload(void **dst, const void *src, size_t n) {
    CD_HIP_CHECK(hipMalloc(dst, n ? n : 1));
    if (n) CD_HIP_CHECK(hipMemcpy(*dst, src, n, hipMemcpyHostToDevice));
    return 0;
}

// The end of every plan setup. A pageable hipMemcpy may return before its
// DMA lands, and the workers' non-blocking streams do not order after the
// null stream: wait for it (the uploads and the setup's stages), so the plan
// is complete for any stream.
static int setup_finish(void) {
    CD_HIP_CHECK(hipStreamSynchronize(NULL));
    return 0;
}

// The stage-parameterised call with B and C descriptors made for this call
// (host objects, so concurrent calls on one plan share nothing writable but
// the work buffer, which the compute stage only reads).
static int csr_spmm_stage(const cd_rocsparse_csr *p, rocsparse_handle h, rocsparse_spmm_stage stage, size_t *bytes,
                          void *work, const float *b, float *c) {
    const float alpha = 1.0f, beta = 0.0f;
    rocsparse_dnmat_descr db = NULL, dc = NULL;
    rocsparse_status s = rocsparse_create_dnmat_descr(&db, p->k, p->cols, p->cols, (void *)b, rocsparse_datatype_f32_r,
                                                      rocsparse_order_row);
    if (s == rocsparse_status_success)
        s = rocsparse_create_dnmat_descr(&dc, p->m, p->cols, p->cols, c, rocsparse_datatype_f32_r, rocsparse_order_row);
    if (s == rocsparse_status_success)
        s = rocsparse_spmm(h, rocsparse_operation_none, rocsparse_operation_none, &alpha, p->a, db, &beta, dc,
                           rocsparse_datatype_f32_r, rocsparse_spmm_alg_csr, stage, bytes, work);
    if (db) CD_ROCSPARSE_CHECK_LOG(rocsparse_destroy_dnmat_descr(db));
    if (dc) CD_ROCSPARSE_CHECK_LOG(rocsparse_destroy_dnmat_descr(dc));
    if (s != rocsparse_status_success) return rocsparse_fail("rocsparse_spmm", __FILE__, __LINE__, s);
    return cd_hip_check_launch("rocsparse_spmm", __FILE__, __LINE__);
}

static int csr_setup(cd_rocsparse_csr *p, rocsparse_handle h, int nnz, const int *row_ptr, const int *col_ind,
                     const float *val, float *b, float *c) {
    CD_ROCSPARSE_CHECK(rocsparse_set_stream(h, NULL)); // the stages follow the uploads
    int rc;
    if ((rc = upload((void **)&p->row_ptr, row_ptr, (size_t)(p->m + 1) * sizeof(int))) ||
        (rc = upload((void **)&p->col_ind, col_ind, (size_t)nnz * sizeof(int))) ||
        (rc = upload((void **)&p->val, val, (size_t)nnz * sizeof(float))))
        return rc;
    CD_ROCSPARSE_CHECK(rocsparse_create_csr_descr(&p->a, p->m, p->k, nnz, p->row_ptr, p->col_ind, p->val,
                                                  rocsparse_indextype_i32, rocsparse_indextype_i32,
                                                  rocsparse_index_base_zero, rocsparse_datatype_f32_r));
    if ((rc = csr_spmm_stage(p, h, rocsparse_spmm_stage_buffer_size, &p->work_bytes, NULL, b, c))) return rc;
    CD_HIP_CHECK(hipMalloc(&p->work, p->work_bytes ? p->work_bytes : 1));
    if ((rc = csr_spmm_stage(p, h, rocsparse_spmm_stage_preprocess, &p->work_bytes, p->work, b, c))) return rc;
    return setup_finish();
}

int cd_rocsparse_csr_init(cd_rocsparse_csr **out, cd_rocsparse_ctx *rs, int m, int k, int nnz, const int *row_ptr,
                          const int *col_ind, const float *val, int n, float *b, float *c) {
    *out = NULL;
    if (!rs || m < 1 || k < 1 || nnz < 0 || n < 1 || !row_ptr || (nnz && (!col_ind || !val)) || !b || !c)
        return CD_EPARAMS;
    cd_rocsparse_csr *p = calloc(1, sizeof *p);
    if (!p) return CD_ENOMEM;
    p->m = m;
    p->k = k;
    p->cols = cd_rocsparse_csr_cols(n);
    int rc = csr_setup(p, rs->handle, nnz, row_ptr, col_ind, val, b, c);
    if (rc) {
        cd_rocsparse_csr_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

int cd_rocsparse_csr_spmm(const cd_rocsparse_csr *p, cd_rocsparse_ctx *rs, hipStream_t stream, const float *b,
                          float *c) {
    CD_ROCSPARSE_CHECK(rocsparse_set_stream(rs->handle, stream));
    size_t bytes = p->work_bytes;
    return csr_spmm_stage(p, rs->handle, rocsparse_spmm_stage_compute, &bytes, p->work, b, c);
}

void cd_rocsparse_csr_free(cd_rocsparse_csr *p) {
    if (!p) return;
    if (p->a) CD_ROCSPARSE_CHECK_LOG(rocsparse_destroy_spmat_descr(p->a));
    CD_HIP_CHECK_LOG(hipFree(p->work));
    CD_HIP_CHECK_LOG(hipFree(p->row_ptr));
    CD_HIP_CHECK_LOG(hipFree(p->col_ind));
    CD_HIP_CHECK_LOG(hipFree(p->val));
    free(p);
}

struct cd_rocsparse_gebsr {
    rocsparse_mat_descr descr; // general, zero-based
    int mb, kb, nnzb, rbd, cbd;
    int *row_ptr, *col_ind; // device copies
    float *val;
};

static int gebsr_setup(cd_rocsparse_gebsr *p, const int *row_ptr, const int *col_ind, const float *val) {
    CD_ROCSPARSE_CHECK(rocsparse_create_mat_descr(&p->descr));
    CD_ROCSPARSE_CHECK(rocsparse_set_mat_type(p->descr, rocsparse_matrix_type_general));
    CD_ROCSPARSE_CHECK(rocsparse_set_mat_index_base(p->descr, rocsparse_index_base_zero));
    size_t bsz = (size_t)p->rbd * p->cbd;
    int rc;
    if ((rc = upload((void **)&p->row_ptr, row_ptr, (size_t)(p->mb + 1) * sizeof(int))) ||
        (rc = upload((void **)&p->col_ind, col_ind, (size_t)p->nnzb * sizeof(int))) ||
        (rc = upload((void **)&p->val, val, (size_t)p->nnzb * bsz * sizeof(float))))
        return rc;
    return setup_finish();
}

int cd_rocsparse_gebsr_init(cd_rocsparse_gebsr **out, int mb, int kb, int nnzb, int row_block_dim, int col_block_dim,
                            const int *row_ptr, const int *col_ind, const float *val) {
    *out = NULL;
    if (mb < 1 || kb < 1 || nnzb < 0 || row_block_dim < 1 || col_block_dim < 1 || !row_ptr ||
        (nnzb && (!col_ind || !val)))
        return CD_EPARAMS;
    cd_rocsparse_gebsr *p = calloc(1, sizeof *p);
    if (!p) return CD_ENOMEM;
    p->mb = mb;
    p->kb = kb;
    p->nnzb = nnzb;
    p->rbd = row_block_dim;
    p->cbd = col_block_dim;
    int rc = gebsr_setup(p, row_ptr, col_ind, val);
    if (rc) {
        cd_rocsparse_gebsr_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

int cd_rocsparse_gebsr_mm(const cd_rocsparse_gebsr *p, cd_rocsparse_ctx *rs, hipStream_t stream, int b_trans, int n,
                          const float *b, int ldb, float *c, int ldc) {
    int m = p->mb * p->rbd, k = p->kb * p->cbd;
    if (n < 1 || ldb < (b_trans ? n : k) || ldc < m || !b || !c) return CD_EPARAMS;
    const float alpha = 1.0f, beta = 0.0f;
    CD_ROCSPARSE_CHECK(rocsparse_set_stream(rs->handle, stream));
    // Blocks are stored row-major (rocsparse_direction_row); B and C column-major.
    CD_ROCSPARSE_CHECK(rocsparse_sgebsrmm(rs->handle, rocsparse_direction_row, rocsparse_operation_none,
                                          b_trans ? rocsparse_operation_transpose : rocsparse_operation_none, p->mb, n,
                                          p->kb, p->nnzb, &alpha, p->descr, p->val, p->row_ptr, p->col_ind, p->rbd,
                                          p->cbd, b, ldb, &beta, c, ldc));
    return 0;
}

void cd_rocsparse_gebsr_free(cd_rocsparse_gebsr *p) {
    if (!p) return;
    if (p->descr) CD_ROCSPARSE_CHECK_LOG(rocsparse_destroy_mat_descr(p->descr));
    CD_HIP_CHECK_LOG(hipFree(p->row_ptr));
    CD_HIP_CHECK_LOG(hipFree(p->col_ind));
    CD_HIP_CHECK_LOG(hipFree(p->val));
    free(p);
}

int cd_rocsparse_probe(char *why, size_t whylen) {
    rocsparse_handle h = NULL;
    int *ind = NULL;
    float *xv = NULL, *y = NULL;
    const int hind[1] = {1};
    const float hx[1] = {2.0f}, hy[3] = {1.0f, 1.0f, 1.0f}, alpha = 1.0f;
    float out[3] = {0};
    const char *what = "rocsparse_create_handle";
    rocsparse_status s = rocsparse_create_handle(&h);
    hipError_t e = hipSuccess;
    if (s == rocsparse_status_success) {
        what = "hipMalloc/hipMemcpy";
        if ((e = hipMalloc((void **)&ind, sizeof hind)) == hipSuccess &&
            (e = hipMalloc((void **)&xv, sizeof hx)) == hipSuccess &&
            (e = hipMalloc((void **)&y, sizeof hy)) == hipSuccess &&
            (e = hipMemcpy(ind, hind, sizeof hind, hipMemcpyHostToDevice)) == hipSuccess &&
            (e = hipMemcpy(xv, hx, sizeof hx, hipMemcpyHostToDevice)) == hipSuccess &&
            (e = hipMemcpy(y, hy, sizeof hy, hipMemcpyHostToDevice)) == hipSuccess) {
            what = "rocsparse_saxpyi";
            s = rocsparse_saxpyi(h, 1, &alpha, xv, ind, y, rocsparse_index_base_zero);
            if (s == rocsparse_status_success && (e = hipGetLastError()) == hipSuccess &&
                (e = hipDeviceSynchronize()) == hipSuccess)
                e = hipMemcpy(out, y, sizeof out, hipMemcpyDeviceToHost);
        }
    }
    if (s != rocsparse_status_success)
        snprintf(why, whylen, "%s: %s", what, rocsparse_status_name(s));
    else if (e != hipSuccess)
        snprintf(why, whylen, "%s: %s", what, hipGetErrorName(e));
    else if (out[0] != 1.0f || out[1] != 3.0f || out[2] != 1.0f)
        snprintf(why, whylen, "rocsparse_saxpyi returned wrong results");
    CD_HIP_CHECK_LOG(hipFree(ind));
    CD_HIP_CHECK_LOG(hipFree(xv));
    CD_HIP_CHECK_LOG(hipFree(y));
    if (h) CD_ROCSPARSE_CHECK_LOG(rocsparse_destroy_handle(h));
    if (s != rocsparse_status_success) return rocsparse_fail_quiet(s);
    if (e != hipSuccess) return cd_hip_status(e);
    return out[1] == 3.0f && out[0] == 1.0f && out[2] == 1.0f ? 0 : CD_EDEVICE;
}
