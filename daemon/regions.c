// Shared-memory regions: registry, mapping, uses (see regions.h).
#include "daemon/regions.h"

#include "core/errors.h"
#include "daemon/log.h"
#include "proto/params.h"
#include "proto/rpc.h"

#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct cd_region {
    atomic_int refs;                   // the set's (while registered) + one per use
    char name[CD_MAX_REGION_NAME + 1]; // NUL-terminated
    size_t name_len;
    char *base;          // the mapping (MAP_SHARED)
    uint64_t size;       // its bytes: the file's size at registration
    bool writable;       // mapped PROT_WRITE (outputs may go here)
    cd_region_use *uses; // requests in flight on it (loop thread)
    cd_region *next;     // in its set (while registered)
};

// Guards every region's `uses` list: requests take ranges on the loop and
// let them go on the thread that writes their answer (a worker, mostly).
static pthread_mutex_t uses_lock = PTHREAD_MUTEX_INITIALIZER;

// Every connection's registered regions together (the overall limits).
static atomic_uint_least64_t total_count, total_bytes;

void cd_regions_totals(uint64_t *count, uint64_t *bytes) {
    *count = atomic_load(&total_count);
    *bytes = atomic_load(&total_bytes);
}

static void region_unref(cd_region *r) {
    if (atomic_fetch_sub(&r->refs, 1) != 1) return;
    munmap(r->base, (size_t)r->size);
    free(r);
}

void cd_region_set_init(cd_region_set *s) { memset(s, 0, sizeof *s); }

// Unlinks r from s and drops the set's reference.
static void set_remove(cd_region_set *s, cd_region *r) {
    for (cd_region **p = &s->head; *p; p = &(*p)->next) {
        if (*p != r) continue;
        *p = r->next;
        break;
    }
    s->count--;
    s->bytes -= r->size;
    atomic_fetch_sub(&total_count, 1);
    atomic_fetch_sub(&total_bytes, r->size);
    region_unref(r);
}

void cd_region_set_free(cd_region_set *s) {
    while (s->head) set_remove(s, s->head);
    for (unsigned i = 0; i < s->npending; i++) close(s->pending[i]);
    s->npending = 0;
}

void cd_region_set_take_fds(cd_region_set *s, uv_pipe_t *pipe) {
    while (uv_pipe_pending_count(pipe) > 0) {
        // uv_accept hands a received descriptor to a handle; a pipe handle
        // takes any descriptor. We keep a duplicate and close the handle.
        uv_pipe_t *h = malloc(sizeof *h);
        int fd = -1;
        if (h && uv_pipe_init(pipe->loop, h, 0) == 0) {
            uv_os_fd_t got;
            if (uv_accept((uv_stream_t *)pipe, (uv_stream_t *)h) == 0 && uv_fileno((uv_handle_t *)h, &got) == 0)
                fd = fcntl(got, F_DUPFD_CLOEXEC, 0);
            uv_close((uv_handle_t *)h, (uv_close_cb)free);
        } else {
            free(h);
            break; // out of memory: libuv closes what it still holds with the pipe
        }
        if (fd < 0) continue;
        if (s->npending == CD_REGION_PENDING_FDS) {
            close(fd); // a client sending descriptors with no region_register
            s->fds_dropped++;
            continue;
        }
        s->pending[s->npending++] = fd;
    }
}

// The oldest pending descriptor, or -1.
static int take_pending(cd_region_set *s) {
    if (s->npending == 0) return -1;
    int fd = s->pending[0];
    memmove(s->pending, s->pending + 1, (s->npending - 1) * sizeof s->pending[0]);
    s->npending--;
    return fd;
}

void cd_region_set_drop_one(cd_region_set *s) {
    int fd = take_pending(s);
    if (fd >= 0) close(fd);
}

static cd_region *set_find(cd_region_set *s, const char *name, size_t len) {
    for (cd_region *r = s->head; r; r = r->next)
        if (r->name_len == len && memcmp(r->name, name, len) == 0) return r;
    return NULL;
}

// Checks fd is a memfd sealed against shrinking and maps it into r.
// Returns 0 or CD_EREGION with err.
static int region_map(int fd, cd_region *r, char *err, size_t errlen) {
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        return cd_errf(CD_EREGION, err, errlen, "region '%s': the descriptor is not a memfd (not a regular file)",
                       r->name);
    int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0)
        return cd_errf(CD_EREGION, err, errlen, "region '%s': the descriptor is not a memfd (it carries no seals)",
                       r->name);
    if (!(seals & F_SEAL_SHRINK))
        return cd_errf(CD_EREGION, err, errlen,
                       "region '%s': the memfd is not sealed against shrinking (F_SEAL_SHRINK): a truncate would "
                       "fault the daemon",
                       r->name);
    if (st.st_size <= 0) return cd_errf(CD_EREGION, err, errlen, "region '%s': the memfd is empty", r->name);
    if ((uint64_t)st.st_size > SIZE_MAX / 2)
        return cd_errf(CD_EREGION, err, errlen, "region '%s': the memfd is too large to map", r->name);
    r->size = (uint64_t)st.st_size;
    r->writable = !(seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE));
    void *p = MAP_FAILED;
    if (r->writable) p = mmap(NULL, (size_t)r->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) { // sealed against writing, or opened read-only: inputs only
        r->writable = false;
        p = mmap(NULL, (size_t)r->size, PROT_READ, MAP_SHARED, fd, 0);
    }
    if (p == MAP_FAILED)
        return cd_errf(CD_EREGION, err, errlen, "region '%s': cannot map it: %s", r->name, strerror(errno));
    r->base = p;
    return 0;
}

// The name param of a region method into buf. Returns 0 or CD_EPARAMS.
static int param_name(const msgpack_object *params, char *buf, size_t *len, char *err, size_t errlen) {
    if (!params) return cd_errf(CD_EPARAMS, err, errlen, "needs params [{name}]");
    int rc = cd_param_str(params, "name", buf, CD_MAX_REGION_NAME + 1, err, errlen);
    if (rc == 1) return cd_errf(CD_EPARAMS, err, errlen, "'name' is required");
    if (rc < 0) return rc;
    *len = strlen(buf);
    return cd_region_name_check(buf, *len, err, errlen);
}

int cd_region_method_register(cd_region_set *s, const cd_settings *set, const msgpack_object *params,
                              msgpack_packer *pk, char *err, size_t errlen) {
    // The descriptor that came with this message is taken whatever happens,
    // so a refused one never stays behind for the next register.
    int fd = take_pending(s);
    char name[CD_MAX_REGION_NAME + 1];
    size_t len;
    int rc = param_name(params, name, &len, err, errlen);
    if (rc == 0 && fd < 0)
        rc = cd_errf(CD_EREGION, err, errlen,
                     "region_register of '%s' came with no descriptor: send the memfd with it (SCM_RIGHTS)", name);
    if (rc == 0 && set_find(s, name, len))
        rc = cd_errf(CD_EEXISTS, err, errlen, "region '%s' is already registered on this connection", name);
    if (rc == 0 && s->count >= (uint64_t)set->max_regions_per_conn)
        rc = cd_errf(CD_ETOO_LARGE, err, errlen, "this connection holds %u regions (max-regions-per-conn)", s->count);
    if (rc == 0 && atomic_load(&total_count) >= (uint64_t)set->max_regions)
        rc = cd_errf(CD_ETOO_LARGE, err, errlen, "the daemon holds %lld regions (max-regions)",
                     (long long)set->max_regions);
    cd_region *r = NULL;
    if (rc == 0 && !(r = calloc(1, sizeof *r))) rc = cd_errf(CD_ENOMEM, err, errlen, "out of memory");
    if (rc == 0) {
        memcpy(r->name, name, len + 1);
        r->name_len = len;
        rc = region_map(fd, r, err, errlen);
    }
    if (fd >= 0) close(fd); // the mapping keeps the memory
    if (rc == 0 && (s->bytes + r->size > (uint64_t)set->max_region_bytes_per_conn ||
                    atomic_load(&total_bytes) + r->size > (uint64_t)set->max_region_bytes)) {
        rc = cd_errf(CD_ETOO_LARGE, err, errlen,
                     "region '%s' of %llu bytes would exceed max-region-bytes-per-conn or max-region-bytes", name,
                     (unsigned long long)r->size);
        munmap(r->base, (size_t)r->size);
    }
    if (rc != 0) {
        free(r);
        return rc;
    }
    atomic_init(&r->refs, 1);
    r->next = s->head;
    s->head = r;
    s->count++;
    s->bytes += r->size;
    atomic_fetch_add(&total_count, 1);
    atomic_fetch_add(&total_bytes, r->size);
    rc = msgpack_pack_map(pk, 3);
    rc |= cd_pack_kv_str(pk, "name", r->name);
    rc |= cd_pack_str(pk, "size");
    rc |= msgpack_pack_uint64(pk, r->size);
    rc |= cd_pack_str(pk, "writable");
    rc |= r->writable ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
    return rc ? CD_ENOMEM : 0;
}

int cd_region_method_unregister(cd_region_set *s, const msgpack_object *params, msgpack_packer *pk, char *err,
                                size_t errlen) {
    char name[CD_MAX_REGION_NAME + 1];
    size_t len;
    int rc = param_name(params, name, &len, err, errlen);
    if (rc) return rc;
    cd_region *r = set_find(s, name, len);
    if (!r) return cd_errf(CD_ENOT_FOUND, err, errlen, "no region '%s' on this connection", name);
    set_remove(s, r); // requests in flight keep their references
    return msgpack_pack_nil(pk) ? CD_ENOMEM : 0;
}

int cd_region_method_list(cd_region_set *s, msgpack_packer *pk, char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    int rc = msgpack_pack_array(pk, s->count);
    for (cd_region *r = s->head; r; r = r->next) {
        unsigned uses = 0;
        pthread_mutex_lock(&uses_lock);
        for (cd_region_use *u = r->uses; u; u = u->next) uses++;
        pthread_mutex_unlock(&uses_lock);
        rc |= msgpack_pack_map(pk, 4);
        rc |= cd_pack_kv_str(pk, "name", r->name);
        rc |= cd_pack_str(pk, "size");
        rc |= msgpack_pack_uint64(pk, r->size);
        rc |= cd_pack_str(pk, "writable");
        rc |= r->writable ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
        rc |= cd_pack_str(pk, "in_use");
        rc |= msgpack_pack_uint32(pk, uses);
    }
    return rc ? CD_ENOMEM : 0;
}

int cd_region_acquire(cd_region_set *s, const cd_region_ref *ref, uint64_t bytes, bool write, cd_region_use *use,
                      void **ptr, char *err, size_t errlen) {
    char shown[CD_MAX_REGION_NAME * 4 + 8];
    cd_sanitize(shown, sizeof shown, ref->name, ref->name_len);
    cd_region *r = set_find(s, ref->name, ref->name_len);
    if (!r) return cd_errf(CD_ENOT_FOUND, err, errlen, "no region '%s' on this connection", shown);
    if (write && !r->writable)
        return cd_errf(CD_EREGION, err, errlen, "region '%s' is mapped read-only (sealed against writing)", shown);
    if (ref->size < bytes)
        return cd_errf(CD_EREGION, err, errlen,
                       "the room given in region '%s' (%llu bytes) is smaller than the "
                       "tensor (%llu bytes)",
                       shown, (unsigned long long)ref->size, (unsigned long long)bytes);
    if (ref->offset > r->size || ref->size > r->size - ref->offset)
        return cd_errf(CD_EREGION, err, errlen, "bytes [%llu, +%llu) are past the end of region '%s' (%llu bytes)",
                       (unsigned long long)ref->offset, (unsigned long long)ref->size, shown,
                       (unsigned long long)r->size);
    pthread_mutex_lock(&uses_lock);
    for (cd_region_use *u = r->uses; u; u = u->next) {
        if (!write && !u->write) continue; // readers may share bytes
        if (bytes == 0 || u->len == 0 || ref->offset >= u->off + u->len || u->off >= ref->offset + bytes) continue;
        pthread_mutex_unlock(&uses_lock);
        return cd_errf(CD_EREGION, err, errlen,
                       "bytes [%llu, +%llu) of region '%s' overlap %s %s range [%llu, +%llu)%s",
                       (unsigned long long)ref->offset, (unsigned long long)bytes, shown,
                       u->owner == use->owner ? "this request's" : "the", u->write ? "output" : "input",
                       (unsigned long long)u->off, (unsigned long long)u->len,
                       u->owner == use->owner ? "" : " of a request in flight");
    }
    atomic_fetch_add(&r->refs, 1);
    use->region = r;
    use->off = ref->offset;
    use->len = bytes;
    use->write = write;
    use->prev = NULL;
    use->next = r->uses;
    if (r->uses) r->uses->prev = use;
    r->uses = use;
    pthread_mutex_unlock(&uses_lock);
    *ptr = r->base + ref->offset;
    return 0;
}

void cd_region_release(cd_region_use *use) {
    cd_region *r = use->region;
    if (!r) return;
    pthread_mutex_lock(&uses_lock);
    if (use->prev)
        use->prev->next = use->next;
    else
        r->uses = use->next;
    if (use->next) use->next->prev = use->prev;
    use->region = NULL;
    pthread_mutex_unlock(&uses_lock);
    region_unref(r);
}
