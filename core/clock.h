#ifndef CD_CORE_CLOCK_H
#define CD_CORE_CLOCK_H

// The monotonic clock in the units its callers want: one definition for the
// daemon, the runtime, the client library and the tools. Header-only, so
// libconvd can use it without linking anything of core/.

#include <stdint.h>
#include <time.h>

// Milliseconds since an arbitrary fixed point (CLOCK_MONOTONIC), with the
// sub-millisecond part: for timing runs.
static inline double cd_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

// Whole milliseconds (CLOCK_MONOTONIC, truncated): for deadlines and poll
// timeouts.
static inline int64_t cd_now_ms_int(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

// Nanoseconds (CLOCK_MONOTONIC): for latencies recorded in histograms.
static inline uint64_t cd_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif // CD_CORE_CLOCK_H
