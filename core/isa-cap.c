#include "core/isa-cap.h"

#include <stddef.h>
#include <strings.h>

static const struct {
    const char *name;
    cd_isa_cap cap;
} g_names[] = {
    {"native", CD_ISA_CAP_NONE},   {"avx512vnni", CD_ISA_CAP_AVX512VNNI}, {"avx512_vnni", CD_ISA_CAP_AVX512VNNI},
    {"avx512", CD_ISA_CAP_AVX512}, {"avx512f", CD_ISA_CAP_AVX512},        {"avx512_core", CD_ISA_CAP_AVX512},
    {"avx2", CD_ISA_CAP_AVX2},     {"scalar", CD_ISA_CAP_SCALAR},
};

int cd_isa_cap_parse(const char *name, cd_isa_cap *out) {
    if (!name || !*name) {
        *out = CD_ISA_CAP_NONE;
        return 0;
    }
    for (size_t i = 0; i < sizeof g_names / sizeof g_names[0]; i++)
        if (strcasecmp(name, g_names[i].name) == 0) {
            *out = g_names[i].cap;
            return 0;
        }
    return -1;
}

const char *cd_isa_cap_name(cd_isa_cap cap) {
    switch (cap) {
    case CD_ISA_CAP_NONE: return "native";
    case CD_ISA_CAP_AVX512VNNI: return "avx512vnni";
    case CD_ISA_CAP_AVX512: return "avx512";
    case CD_ISA_CAP_AVX2: return "avx2";
    case CD_ISA_CAP_SCALAR: return "scalar";
    case CD_ISA_CAP_COUNT: break;
    }
    return "?";
}
