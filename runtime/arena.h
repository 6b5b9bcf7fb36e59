#ifndef CD_RUNTIME_ARENA_H
#define CD_RUNTIME_ARENA_H

// Activation arena planning: each buffer lives from the step that writes it
// first to the step that reads it last; buffers whose lifetimes overlap get
// disjoint byte ranges, the others may share memory.

#include <stddef.h>

typedef struct {
    size_t size;   // bytes (0 is allowed and takes no space)
    int first;     // first step (inclusive) the buffer must hold its data
    int last;      // last step (inclusive); last >= first
    size_t offset; // out: byte offset in the arena, a multiple of the alignment
} cd_arena_buf;

// Assigns offsets to n buffers (largest first, each at the lowest-addressed
// gap that fits among the already placed buffers that overlap it in time).
// align must be a power of two. Returns the arena size in bytes (the peak),
// or SIZE_MAX when the sizes overflow size_t (the caller refuses the plan).
// Linear in buffers plus pairs of buffers alive at the same step; with more
// than 2^24 such pairs the buffers are laid out without sharing instead.
size_t cd_arena_plan(cd_arena_buf *bufs, int n, size_t align);

#endif // CD_RUNTIME_ARENA_H
