// The window masks of sparse/band-rows.h (portable: computed at create).
#include "sparse/band-rows.h"

#include <assert.h>

void cd_phase_row_masks(uint16_t *masks, size_t n, int w, int sh, int stride, int vec) {
    assert(vec == 8 || vec == 16);
    const size_t windows = (size_t)stride * ((n + vec - 1) / vec);
    for (size_t i = 0; i < windows; i++) {
        const long s0 = (long)stride * vec * (long)(i / stride) + vec * (long)(i % stride) + sh;
        uint16_t m = 0;
        for (int k = 0; k < vec; k++)
            if (s0 + k >= 0 && s0 + k < w) m |= (uint16_t)(1u << k);
        masks[i] = m;
    }
}
