#ifndef CD_CORE_BIGBUF_H
#define CD_CORE_BIGBUF_H

// Big output buffers kept for the next request. glibc serves an allocation
// over 32 MiB with its own mmap and unmaps it on free, so every request of a
// model with big outputs faulted in and zeroed every page of a fresh buffer
// (docs/PERFORMANCE.md, "Big tensors": 35% of the daemon's CPU on a 42 MiB
// output). A few freed buffers are kept, with their pages, for the next
// request that fits. Thread-safe (workers take, the loop gives back). The
// daemon's output buffers and every reader's big-message buffers
// (proto/rpc-reader.c: the daemon's requests, libconvd's answers) share it,
// per process: at most 4 buffers, 256 MiB together.

#include <stddef.h>

// A buffer of at least `bytes` (malloc'd, or one kept), or NULL.
void *cd_bigbuf_get(size_t bytes);
// Gives p (from cd_bigbuf_get or malloc; NULL: no-op) back: kept when it is
// big and there is room, else freed.
void cd_bigbuf_put(void *p);

#endif // CD_CORE_BIGBUF_H
