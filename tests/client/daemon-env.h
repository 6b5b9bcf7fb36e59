#ifndef CD_TESTS_CLIENT_DAEMON_ENV_H
#define CD_TESTS_CLIENT_DAEMON_ENV_H

// The real daemon the client tests run against: tests/integration/
// test_client_c.py starts it and passes its socket ($CONVD_SOCKET) and the
// registry name of its test model ($CONVD_TEST_MODEL).

#include "client/convd.h"
#include "tests/unit/check.h"

#include <stdlib.h>

static inline convd_conn *connect_daemon(void) {
    const char *path = getenv("CONVD_SOCKET");
    if (!path) CD_CHECK_FAIL_("CONVD_SOCKET is not set (run through pytest)");
    convd_conn *c = NULL;
    if (convd_connect(path, NULL, &c) != 0) CD_CHECK_FAIL_("connect %s: %s", path, convd_errmsg(NULL));
    return c;
}

static inline const char *test_model(void) {
    const char *m = getenv("CONVD_TEST_MODEL");
    if (!m) CD_CHECK_FAIL_("CONVD_TEST_MODEL is not set (run through pytest)");
    return m;
}

#endif // CD_TESTS_CLIENT_DAEMON_ENV_H
