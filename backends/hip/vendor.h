#ifndef CD_BACKENDS_HIP_VENDOR_H
#define CD_BACKENDS_HIP_VENDOR_H

// The one header every backends/hip/*.hip includes first. Under hipcc it is the
// real HIP runtime; compiled as plain C++ (g++ -x c++, the emulated build that
// CI runs) it is the project's CPU emulator of the HIP execution model
// (backends/hip/emu/hip-emu.h). Kernel bodies are identical under both and
// carry no #ifdef: the differences live in the two macros below.
//
//   CD_HIP_LAUNCH(kernel, grid, block, shared_bytes, stream, args...)
//       launches kernel<<<grid, block, shared_bytes, stream>>>(args...).
//       Errors surface through hipGetLastError(), as with the real launch.
//   CD_HIP_DYNAMIC_SHARED(type, name);
//       declares `name`, the block's dynamic shared memory (the launch's
//       shared_bytes), as an array of type.

#if defined(__HIPCC__) || defined(__HIP__)

#include <hip/hip_runtime.h>

#define CD_HIP_EMULATED 0
#define CD_HIP_LAUNCH(kernel, grid, block, shared_bytes, stream, ...) \
    hipLaunchKernelGGL(kernel, grid, block, shared_bytes, stream, __VA_ARGS__)
#define CD_HIP_DYNAMIC_SHARED(type, name) extern __shared__ type name[]

#else

#include "backends/hip/emu/hip-emu.h"

#define CD_HIP_EMULATED 1
#define CD_HIP_LAUNCH(kernel, grid, block, shared_bytes, stream, ...) \
    ((void)cd_emu::launch_lambda(dim3(grid), dim3(block), (shared_bytes), (stream), [=]() { kernel(__VA_ARGS__); }))
#define CD_HIP_DYNAMIC_SHARED(type, name) type *name = static_cast<type *>(cd_emu::dynamic_shared())

#endif

#endif // CD_BACKENDS_HIP_VENDOR_H
