#ifndef CD_PROTO_ERRORS_H
#define CD_PROTO_ERRORS_H

// The error table moved to core/errors.h. This header remains only for
// kernels/cpu/dwconv-3x3.c, which is being removed as dead code; delete it
// (and its entry in scripts/check-deps.py EXCEPTIONS) together with that file.

#include "core/errors.h"

#endif // CD_PROTO_ERRORS_H
