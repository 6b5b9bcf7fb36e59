#ifndef CD_DAEMON_REPLY_H
#define CD_DAEMON_REPLY_H

// A response message being packed, for writev: the packed bytes (envelope,
// maps, the headers of each tensor) are small and copied into `head`; a big
// bin payload is not copied but referenced where it lies (an output buffer),
// so the message goes out as iovecs that alternate between pieces of `head`
// and those payloads. Whoever holds a reply with references keeps their
// memory alive until its last byte is written (daemon/conn.c: the request
// that owns the output buffers rides with the write).

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/uio.h>

// Payloads referenced at most per reply; a tensor beyond them is copied.
#define CD_REPLY_MAX_REFS 16
// Payloads smaller than this are copied (a syscall piece costs more). The
// fuzz target sets it low.
#ifndef CD_REPLY_REF_MIN
#define CD_REPLY_REF_MIN ((size_t)64 << 10)
#endif
// iovecs a whole reply needs at most: head pieces around every reference.
#define CD_REPLY_MAX_IOV (2 * CD_REPLY_MAX_REFS + 1)

typedef struct {
    msgpack_sbuffer head; // the packed bytes
    struct {
        size_t at;       // head bytes before this payload
        const char *ptr; // the payload (not owned)
        size_t len;      // its bytes
    } ref[CD_REPLY_MAX_REFS];
    int nref;     // references in ref[], in message order
    size_t total; // bytes of the whole message (head + payloads)
} cd_reply;

void cd_reply_init(cd_reply *r);
// Frees head; references are dropped (their memory is not the reply's).
void cd_reply_destroy(cd_reply *r);
// Empties r for packing again.
void cd_reply_clear(cd_reply *r);

// The msgpack write callback that appends to r->head (data is the reply):
// msgpack_packer_init(&pk, r, cd_reply_write).
int cd_reply_write(void *data, const char *buf, size_t len);

// Packs the body of a bin whose header was just packed by pk: by reference
// when pk writes into a cd_reply, len >= CD_REPLY_REF_MIN and a reference is
// free; else copied. data must then outlive the reply's write. Returns 0 or
// CD_ENOMEM.
int cd_reply_bin_body(msgpack_packer *pk, const void *data, size_t len);

// The whole message as iovecs in iov[0..CD_REPLY_MAX_IOV), from byte `skip`
// on (the bytes already written). Returns their number (0 when nothing is
// left). Valid until r changes.
int cd_reply_iov(const cd_reply *r, size_t skip, struct iovec *iov);

// Appends the whole message, copied, to sb. Returns 0 or CD_ENOMEM.
int cd_reply_copy_to(const cd_reply *r, msgpack_sbuffer *sb);

#endif // CD_DAEMON_REPLY_H
