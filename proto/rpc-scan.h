#ifndef CD_PROTO_RPC_SCAN_H
#define CD_PROTO_RPC_SCAN_H

// Private to proto/: the resumable pre-scanner that walks the raw msgpack
// bytes of one message and checks every declared length, the nesting depth
// and the total size against the limits before msgpack-c sees the bytes (and
// allocates anything for them). It never looks at a byte twice: the state
// below survives between calls, so a 64 MiB message that arrives in 64 KiB
// reads costs one pass over its headers (payload bytes are skipped, not read).

#include "core/limits.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// Most elements (array items plus map keys and values) one message may declare
// in total, whatever its nesting. msgpack-c allocates one msgpack_object (24
// bytes) per element, so this bounds the decoded tree at ~24 MiB however the
// bytes are arranged (without it a 64 MiB message of nested arrays of nils
// would expand to 1.5 GiB).
#define CD_MAX_ELEMENTS (1u << 20)

typedef struct {
    size_t pos;                  // offset from the message start of the next header to read
    size_t base;                 // message offset of p[0]: bytes of the message the
                                 // caller dropped after they were scanned (skipping a
                                 // message keeps only what is not scanned yet); 0 else
    int depth;                   // containers open at pos
    uint32_t left[CD_MAX_DEPTH]; // elements still to come in each open container
    uint64_t elements;           // elements declared so far (all containers)
    uint32_t top_len;            // length of the top-level array (3 or 4)
    int64_t kind;                // element 0 when it was a non-negative int, else -1
    uint32_t msgid;              // element 1 when it was a uint32 (msgid_known)
    bool msgid_known;            // msgid holds element 1
    size_t blob_at;              // offset of the payload of the last str/bin/ext read
                                 // (it ends at pos when it is not all in yet), or 0
    bool done;                   // the message ends at pos
} cd_rpc_scan;

// Resets the state for a message starting at offset 0 of the next call's p.
void cd_rpc_scan_reset(cd_rpc_scan *s);

// Continues the scan over p[0..avail), the bytes of the current message
// received so far from message offset s->base on (p[0] is its first byte
// when base is 0; avail may run past its end into later messages). Returns
//   1: the message is complete and its bytes up to s->pos are in p;
//   0: more bytes are needed (every byte in p up to avail belongs to it then);
//  CD_EPROTOCOL: a byte that is not msgpack (0xc1), or the top level is not an
//      array of 3 or 4 elements;
//  CD_ETOO_LARGE: a declared length, the element count, the depth or the total
//      size is over its limit (detected from the header alone, before any
//      payload byte arrives).
// err (may be NULL) gets a readable reason on error.
int cd_rpc_scan_run(cd_rpc_scan *s, const uint8_t *p, size_t avail, size_t max_message, char *err, size_t errlen);

#endif // CD_PROTO_RPC_SCAN_H
