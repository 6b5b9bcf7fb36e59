#ifndef CD_CORE_STATS_UTIL_H
#define CD_CORE_STATS_UTIL_H

// Small helpers for summarising timing samples. Header-only.

// qsort comparator for doubles in ascending order.
static inline int cd_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#endif // CD_CORE_STATS_UTIL_H
