// The int8 kernels of each ISA level (sparse/i8-spmm.h), under the cap of
// sparse/spmm-select.c.

#include "sparse/i8-spmm.h"

#define ISA_ROW(isa_, tile_, short_)                                                                                \
    .name1 = "cd_i8_spmm_csr__" #isa_, .name4 = "cd_i8_spmm_bsr4__" #isa_, .csr = cd_i8_spmm_csr__##isa_,           \
    .bsr4 = cd_i8_spmm_bsr4__##isa_, .tile = tile_, .short_quads = short_, .epilogue = cd_i8_epilogue_rows__##isa_, \
    .quant_row = cd_i8_quant_row__##isa_, .s2_rows = cd_i8_s2_rows__##isa_, .s1_rows = cd_i8_s1_rows__##isa_

// The AVX-512 levels also fuse the plain epilogue (masked byte stores).
#define ISA_ROW_OUT(isa_, tile_, short_) \
    ISA_ROW(isa_, tile_, short_), .csr_out = cd_i8_spmm_csr_out__##isa_, .bsr4_out = cd_i8_spmm_bsr4_out__##isa_

static const cd_i8_isa_info k_isas[] = {
    [CD_SPARSE_ISA_SCALAR] = {ISA_ROW(scalar, CD_I8_SCALAR_TILE, 0)},
    [CD_SPARSE_ISA_AVX2] = {ISA_ROW(avx2, 32, 1)},
    [CD_SPARSE_ISA_AVX512F] = {ISA_ROW_OUT(avx512f, 64, 1)},
    [CD_SPARSE_ISA_AVX512VNNI] = {ISA_ROW_OUT(avx512vnni, 64, 0)},
};

const cd_i8_isa_info *cd_i8_isa(cd_sparse_isa isa) {
    if (isa < CD_SPARSE_ISA_SCALAR || isa > CD_SPARSE_ISA_AVX512VNNI || !cd_sparse_isa_supported(isa)) return NULL;
    return &k_isas[isa];
}
