// Whether a kernel's next OpenMP region would have one thread, and why our
// kernels then enter none: they run their loops directly.
//
// A serialized region (one thread, or `if (0)`) still starts a libgomp team.
// Alone that costs ~0.4 us, but right after oneDNN's AMX kernels it cost
// 50-170 us per region on the Intel Xeon, every run (not a time effect:
// spinning 1 ms first did not remove it). At 1 thread, and in a split
// batch's lanes (one thread each), every layer paid it: a QDQ ResNet-50's FC
// 0.444 -> 0.334 ms without it, its pooled QuantizeLinear 0.05-0.13 -> 0.004 ms
// (docs/PERFORMANCE.md, "The residual in place, no OpenMP region on one
// thread").
#ifndef CD_CORE_ONE_THREAD_H
#define CD_CORE_ONE_THREAD_H

#include <omp.h>

// 1 when the calling thread's team would have a single thread.
static inline int cd_one_thread(void) { return omp_get_max_threads() == 1; }

#endif // CD_CORE_ONE_THREAD_H
