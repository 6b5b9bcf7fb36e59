#ifndef CD_CORE_ISA_CAP_H
#define CD_CORE_ISA_CAP_H

// The cap on our own kernels' instruction sets (--max-isa, CONVD_MAX_ISA),
// as one enum from where it is set to where it is used: the daemon's
// settings index maps to it (the order of cd_max_isa_names in
// daemon/settings.toml), the tools parse CONVD_MAX_ISA into it once
// (runtime/options.c), and sparse/ caps its ISA choice by it. oneDNN has
// its own cap (ONEDNN_MAX_CPU_ISA).

typedef enum {
    CD_ISA_CAP_NONE = 0,   // the CPU's best ("native", unset)
    CD_ISA_CAP_AVX512VNNI, // AVX-512 with VNNI
    CD_ISA_CAP_AVX512,     // AVX-512 without VNNI (oneDNN's avx512_core)
    CD_ISA_CAP_AVX2,       // AVX2 + FMA
    CD_ISA_CAP_SCALAR,     // portable code only
    CD_ISA_CAP_COUNT
} cd_isa_cap;

// Parses a cap name, any case: "native" (or NULL, ""), "avx512vnni" (or
// "avx512_vnni"), "avx512" (or "avx512f", "avx512_core"), "avx2",
// "scalar". Returns 0, or -1 for anything else (*out untouched).
int cd_isa_cap_parse(const char *name, cd_isa_cap *out);

// "native", "avx512vnni", "avx512", "avx2", "scalar" ("?" out of range).
const char *cd_isa_cap_name(cd_isa_cap cap);

#endif // CD_CORE_ISA_CAP_H
