#ifndef CD_CORE_CHECKED_H
#define CD_CORE_CHECKED_H

// Overflow-checked size arithmetic for everything that computes a size from
// what a model file declares (loader, lowering, planner, arena, backend item
// sizes). A file we do not control may declare any dims: every product or sum
// of them goes through these helpers and an overflow becomes an error with a
// message, never undefined behaviour or a wrapped, too-small allocation.
//
// Each returns 0 with *out set, or 1 on overflow (then *out is unspecified).

#include <stddef.h>
#include <stdint.h>

static inline int cd_ck_mul_i64(int64_t a, int64_t b, int64_t *out) { return __builtin_mul_overflow(a, b, out); }
static inline int cd_ck_add_i64(int64_t a, int64_t b, int64_t *out) { return __builtin_add_overflow(a, b, out); }
static inline int cd_ck_sub_i64(int64_t a, int64_t b, int64_t *out) { return __builtin_sub_overflow(a, b, out); }
static inline int cd_ck_mul_size(size_t a, size_t b, size_t *out) { return __builtin_mul_overflow(a, b, out); }
static inline int cd_ck_add_size(size_t a, size_t b, size_t *out) { return __builtin_add_overflow(a, b, out); }

// x rounded up to a multiple of align (a power of two).
static inline int cd_ck_align_size(size_t x, size_t align, size_t *out) {
    if (__builtin_add_overflow(x, align - 1, out)) return 1;
    *out &= ~(align - 1);
    return 0;
}

// Elements of a shape whose dims must be >= 0: 0 with *numel set, 1 when a dim
// is negative or the product of the non-zero dims overflows. (The non-zero
// product is checked too, so that any partial product of the dims, as
// Flatten or Softmax compute them, is safe even when one dim is 0.)
static inline int cd_ck_shape_numel(int rank, const int64_t *shape, int64_t *numel) {
    int64_t n = 1;
    int zero = 0;
    for (int i = 0; i < rank; i++) {
        if (shape[i] < 0) return 1;
        if (shape[i] == 0)
            zero = 1;
        else if (__builtin_mul_overflow(n, shape[i], &n))
            return 1;
    }
    *numel = zero ? 0 : n;
    return 0;
}

// Size in bytes of n elements of item bytes each (n >= 0).
static inline int cd_ck_bytes(int64_t n, size_t item, size_t *out) {
    if (n < 0 || (uint64_t)n > SIZE_MAX) return 1;
    return __builtin_mul_overflow((size_t)n, item, out);
}

#endif // CD_CORE_CHECKED_H
