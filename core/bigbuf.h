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
// per process: at most 4 buffers, 256 MiB together (less after
// cd_bigbuf_set_limit).

#include <stddef.h>

// A buffer of at least `bytes` (malloc'd, or one kept), or NULL.
void *cd_bigbuf_get(size_t bytes);
// Gives p (from cd_bigbuf_get or malloc; NULL: no-op) back: kept when it is
// big and there is room, else freed.
void cd_bigbuf_put(void *p);
// Keeps at most `bytes` together from now on (at most 256 MiB; the daemon
// sets a quarter of its request budget, --max-buffered, so that what it keeps
// stays a small part of the memory it promises). Buffers kept beyond it are
// not freed at once: each leaves on its next take.
void cd_bigbuf_set_limit(size_t bytes);

#endif // CD_CORE_BIGBUF_H
