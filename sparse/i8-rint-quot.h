#ifndef CD_SPARSE_I8_RINT_QUOT_H
#define CD_SPARSE_I8_RINT_QUOT_H

// rintf(y / s) without the division, for the int8 kernels' quantization
// steps (kernels/op-desc.h: the output, the mid grid, the input), which
// the reference computes as rintf(y / scale) + zp, then clamps to 8 bits.
//
// The fast form: z = y * r with r = 1.0f / s (both rounded to float),
// n = rintf(z). Why n is right unless z is near a half-integer:
//   r = (1/s)(1 + e1), z = y r (1 + e2), |e1|, |e2| <= 2^-24, so with
//   x = y / s: |z - x| <= |x| (2^-23 + 2^-48); the quotient the reference
//   rounds is fl(x) = x (1 + e3), |e3| <= 2^-24. Hence
//   |z - fl(x)| <= |x| (1.5 2^-23 + 2^-48) < 0.76 |z| 2^-22.
//   The window: z is "near" when |z - n| >= 0.5 - |z| 2^-21 (the bound,
//   2.6 times; computed in float with one rounding of at most 2^-26, which
//   the margin covers for |z| > 1/16; below that z is 0.4 from every
//   half-integer). Outside the window fl(x) lies strictly on the same side
//   of each half-integer as z, so rintf(fl(x)) = rintf(z) = n, the sign of
//   a zero included (z, x and fl(x) share y's sign). Inside it, about
//   |z| 2^-20 of the lanes, the correction below.
//   If |z| >= 1024, |rintf(fl(x))| >= 1023 with z's sign: after adding any
//   zero point of an 8-bit type (|zp| <= 255) both clamp to the same end
//   of any 8-bit range. n is returned: not rintf(y / s), but every caller
//   clamps.
// The correction, for z near the half-integer t (|t| < 1024): fl(x) is
//   within 2^-9 of t, so rintf(fl(x)) is t - 1/2 or t + 1/2 and only fl(x)
//   against t decides. t is a float with an even last mantissa bit (its
//   lowest set bit is 2^-1, its ulp u = 2^(e-23) <= 2^-13 for 2^e <= |t|),
//   so round-to-nearest-even gives fl(x) = t exactly for x in the closed
//   interval [|t| - d, |t| + u/2] (in magnitude), where d = u/2, or u/4
//   for |t| = 1/2 (below a power of two the floats are twice as dense).
//   Its ends have at most 27 significant bits and s has 24, so in double
//   the products end*s are exact and fma(-end, s, |y|) = the once-rounded
//   |y| - end*s, whose sign is that of the exact difference, i.e. of |x|
//   against the end. Outside: t +- 1/2 by the side; inside: the tie
//   fl(x) = t, which rintf sends to the even one of t +- 1/2.
// Tested against rintf(y / s) in tests/unit/test-i8-epilogue.c.

#include <math.h>
#include <stdint.h>
#include <string.h>

// |z| from which every 8-bit quantization saturates (see above).
#define CD_I8_QUOT_BIG 1024.0f
// The window's slope: near when |z - n| >= 0.5 - |z| * CD_I8_QUOT_SLOPE.
#define CD_I8_QUOT_SLOPE 0x1p-21f

// The correction alone: z = y * r in the window (any z: beyond 1024, n).
static inline float cd_i8_rint_quot_fix(float y, float s, float z) {
    const float n = rintf(z);
    if (!(fabsf(z) < CD_I8_QUOT_BIG)) return n;
    const float t = n + (z >= n ? 0.5f : -0.5f), a = fabsf(t);
    const double ya = t < 0.0f ? -(double)y : (double)y;
    uint32_t bits;
    memcpy(&bits, &a, sizeof bits);
    bits &= 0x7F800000u; // 2^e <= a < 2^(e+1): ulp(a) = 2^(e-23)
    float pow2;
    memcpy(&pow2, &bits, sizeof pow2);
    const double up = (double)pow2 * 0x1p-24, down = a == 0.5f ? up * 0.5 : up;
    if (fma(-((double)a + up), (double)s, ya) > 0.0) return copysignf(a + 0.5f, t);
    if (fma(-((double)a - down), (double)s, ya) < 0.0) return copysignf(a - 0.5f, t);
    const float hi = a + 0.5f; // fl(x) = t: the even neighbour (an integer below 1025)
    return copysignf(((int32_t)hi & 1) == 0 ? hi : a - 0.5f, t);
}

// 1 when z = y * r is in the correction's window.
static inline int cd_i8_rint_quot_near(float z) {
    return fabsf(z - rintf(z)) >= fmaf(-fabsf(z), CD_I8_QUOT_SLOPE, 0.5f);
}

// rintf(y / s) for finite y and s > 0 with r = 1.0f / s (beyond |y/s| of
// about 1024 only the sign and the saturation agree, as above).
static inline float cd_i8_rint_quot(float y, float s, float r) {
    const float z = y * r;
    return cd_i8_rint_quot_near(z) ? cd_i8_rint_quot_fix(y, s, z) : rintf(z);
}

#endif // CD_SPARSE_I8_RINT_QUOT_H
