// core/isa-cap.h: the ISA cap is one enum from the daemon's settings (an
// index of cd_max_isa_names) and CONVD_MAX_ISA (parsed once) to sparse/.

#include "tests/unit/check.h"

#include "core/isa-cap.h"
#include "daemon/settings.h"

#include <string.h>

CD_TEST(core_isa_cap_parse_names_and_aliases_any_case) {
    static const struct {
        const char *name;
        cd_isa_cap cap;
    } c[] = {
        {NULL, CD_ISA_CAP_NONE},
        {"", CD_ISA_CAP_NONE},
        {"native", CD_ISA_CAP_NONE},
        {"avx512vnni", CD_ISA_CAP_AVX512VNNI},
        {"AVX512_VNNI", CD_ISA_CAP_AVX512VNNI},
        {"avx512", CD_ISA_CAP_AVX512},
        {"AVX512F", CD_ISA_CAP_AVX512},
        {"avx512_core", CD_ISA_CAP_AVX512},
        {"Avx2", CD_ISA_CAP_AVX2},
        {"scalar", CD_ISA_CAP_SCALAR},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        cd_isa_cap got = CD_ISA_CAP_COUNT;
        CHECK_EQ(cd_isa_cap_parse(c[i].name, &got), 0);
        CHECK_EQ(got, c[i].cap);
    }
    cd_isa_cap kept = CD_ISA_CAP_AVX2;
    CHECK_EQ(cd_isa_cap_parse("sse9", &kept), -1);
    CHECK_EQ(kept, CD_ISA_CAP_AVX2);
}

// The daemon hands its settings index over as the enum: the settings'
// choice list must name the caps in the enum's order.
CD_TEST(core_isa_cap_settings_index_is_the_enum) {
    for (int i = 0; i < CD_ISA_CAP_COUNT; i++) {
        CHECK(cd_max_isa_names[i] != NULL);
        CHECK(strcmp(cd_max_isa_names[i], cd_isa_cap_name((cd_isa_cap)i)) == 0);
        cd_isa_cap got = CD_ISA_CAP_COUNT;
        CHECK_EQ(cd_isa_cap_parse(cd_max_isa_names[i], &got), 0);
        CHECK_EQ(got, (cd_isa_cap)i);
    }
    CHECK(cd_max_isa_names[CD_ISA_CAP_COUNT] == NULL); // no more choices than caps
}
