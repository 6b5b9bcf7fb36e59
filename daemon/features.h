#ifndef CD_DAEMON_FEATURES_H
#define CD_DAEMON_FEATURES_H

// What this build and this CPU offer, for `hello` ("cpu", "dnnl", "avx2",
// "avx512f", ...). Detected once.

#include <stddef.h>

// Fills names with up to max static strings; returns how many.
size_t cd_features_list(const char **names, size_t max);

#endif // CD_DAEMON_FEATURES_H
