#ifndef CD_DAEMON_REGIONS_H
#define CD_DAEMON_REGIONS_H

// Shared-memory regions (docs/PROTOCOL.md, "Shared-memory regions"): a
// client sends a memfd sealed against shrinking once (SCM_RIGHTS, with its
// region_register message) and names it in requests; the daemon maps it and
// reads inputs from it and writes outputs into it.
//
// Threads: everything here runs on the loop thread, except that a worker
// reads and writes the bytes of a mapping it was handed, and lets go of a
// request's uses (cd_region_release) when it writes the answer: the use
// lists have a lock of their own, the refcount is atomic.
// A region is refcounted: its connection's set holds one reference while it
// is registered, and each request that uses it one more, so a region
// unregistered (or a connection closed) while a request uses it stays mapped
// until that request is released.
//
// Hostile clients: a descriptor that is not a memfd, or one that could still
// shrink (no F_SEAL_SHRINK: a truncate would SIGBUS the daemon), is refused
// (E_REGION); a range past the region's end is refused; a request whose
// output range overlaps another range of it, or a range of another request
// in flight on the same region (inputs may share bytes with inputs), is
// refused. A client that writes into its region during its request gets
// what it wrote: the bytes are its own, only their values are undefined.

#include "daemon/settings.h"
#include "proto/region.h"

#include <msgpack.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

typedef struct cd_region cd_region;
typedef struct cd_region_use cd_region_use;

// One request's use of a range of a region (linked into the region's list
// while the request holds it).
struct cd_region_use {
    cd_region *region; // held reference (NULL: unused slot)
    const void *owner; // the request (messages tell "this request" from "another")
    uint64_t off, len; // the range
    bool write;        // an output range
    cd_region_use *prev, *next;
};

// Descriptors received on a connection and not yet claimed by a
// region_register, in arrival order.
#define CD_REGION_PENDING_FDS 8

// A connection's regions.
typedef struct {
    cd_region *head;                    // registered regions
    unsigned count;                     // how many
    uint64_t bytes;                     // their bytes
    int pending[CD_REGION_PENDING_FDS]; // received descriptors, oldest first
    unsigned npending;
    uint64_t fds_dropped; // descriptors closed unclaimed (over the pending cap)
} cd_region_set;

void cd_region_set_init(cd_region_set *s);
// Unregisters every region of s (mappings stay while requests use them) and
// closes the pending descriptors.
void cd_region_set_free(cd_region_set *s);

// Closes the oldest pending descriptor (its region_register was refused
// before its handler ran).
void cd_region_set_drop_one(cd_region_set *s);

// Moves the descriptors libuv received on pipe (an ipc pipe) into s's pending
// list; past CD_REGION_PENDING_FDS they are closed. Call from the read
// callback (reading is active there).
void cd_region_set_take_fds(cd_region_set *s, uv_pipe_t *pipe);

// The methods (params: the params map; pk: the result). Each returns 0 or a
// negative code with err.
// region_register {name}: claims the oldest pending descriptor.
int cd_region_method_register(cd_region_set *s, const cd_settings *set, const msgpack_object *params,
                              msgpack_packer *pk, char *err, size_t errlen);
// region_unregister {name}
int cd_region_method_unregister(cd_region_set *s, const msgpack_object *params, msgpack_packer *pk, char *err,
                                size_t errlen);
// region_list: [{name, size, in_use}]
int cd_region_method_list(cd_region_set *s, msgpack_packer *pk, char *err, size_t errlen);

// Resolves ref for `bytes` bytes (an input: read, an output: write) in s:
// checks the name, the range and overlaps (with the uses already linked:
// other requests in flight, and this request's earlier ones), then links
// *use and takes a reference. *ptr gets the first byte. Returns 0,
// CD_ENOT_FOUND (no such region) or CD_EREGION with err.
int cd_region_acquire(cd_region_set *s, const cd_region_ref *ref, uint64_t bytes, bool write, cd_region_use *use,
                      void **ptr, char *err, size_t errlen);
// Unlinks *use and drops its reference (unmaps a region unregistered
// meanwhile once its last use goes). No-op for an unused slot.
void cd_region_release(cd_region_use *use);

// Regions and bytes held by every connection (for stats and tests).
void cd_regions_totals(uint64_t *count, uint64_t *bytes);

#endif // CD_DAEMON_REGIONS_H
