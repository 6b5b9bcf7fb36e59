#include "daemon/stats.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

cd_stats cd_stats_g;

void cd_stats_error(int status) {
    int i = -status;
    if (i <= 0 || i >= CD_STATS_NERR) i = -CD_EINTERNAL;
    atomic_fetch_add_explicit(&cd_stats_g.errors[i], 1, memory_order_relaxed);
}

static const char *const method_names[CD_M_COUNT] = {
#define XX(m) #m,
    CD_METHOD_NAMES(XX)
#undef XX
        "unknown",
};

const char *cd_method_name(cd_method_id id) {
    if ((int)id < 0 || id >= CD_M_COUNT) return "unknown";
    return method_names[id];
}

cd_method_id cd_method_lookup(const char *name, size_t len) {
    for (int i = 0; i < CD_M_unknown; i++) {
        if (strlen(method_names[i]) == len && memcmp(method_names[i], name, len) == 0) return (cd_method_id)i;
    }
    return CD_M_unknown;
}

uint64_t cd_stats_rss_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return 0;
    unsigned long size = 0, resident = 0;
    int n = fscanf(f, "%lu %lu", &size, &resident);
    fclose(f);
    if (n != 2) return 0;
    return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}
