#include "core/errors.h"
#include "tests/unit/check.h"

CD_TEST(errors_names_round_trip) {
#define XX(name, num, msg)                                                                            \
    CHECK_EQ(cd_err_from_name(cd_err_name(CD_E##name), strlen(cd_err_name(CD_E##name))), CD_E##name); \
    CHECK_STREQ(cd_strerror(CD_E##name), msg);
    CD_ERROR_MAP(XX)
#undef XX
}

CD_TEST(errors_unknown_values) {
    CHECK_STREQ(cd_err_name(-9999), "E_UNKNOWN");
    CHECK_STREQ(cd_strerror(-9999), "unknown error");
    CHECK_STREQ(cd_err_name(0), "OK");
    CHECK_EQ(cd_err_from_name("E_NOPE", 6), CD_EINTERNAL);
}
