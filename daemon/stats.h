#ifndef CD_DAEMON_STATS_H
#define CD_DAEMON_STATS_H

// Daemon-wide counters. One X-macro list; every rejection path bumps exactly
// one counter: an error response bumps its code in cd_stats_error() (done in
// one place, conn_reply_error), a refused connection bumps one conn_rejected_*
// counter. Counters are relaxed atomics: workers may bump them too.

#include "core/errors.h"

#include <stdatomic.h>
#include <stdint.h>

//   XX(field, description)
#define CD_STATS_MAP(XX)                                                                  \
    XX(conn_total, "connections accepted")                                                \
    XX(conn_rejected_limit, "connections refused: max-connections reached")               \
    XX(conn_rejected_emfile, "connections shed: out of file descriptors")                 \
    XX(conn_eof_mid_message, "peers that closed with a partial message")                  \
    XX(conn_write_errors, "connections dropped on a write error")                         \
    XX(conn_slow_reader, "connections dropped: unsent responses over the cap")            \
    XX(req_total, "requests received")                                                    \
    XX(notifications, "notifications received (ignored: no method takes one)")            \
    XX(req_cancelled, "requests dropped before compute: their client had gone")           \
    XX(req_dropped, "responses discarded: their client had gone")                         \
    XX(resp_direct, "responses written whole by the worker that computed them")           \
    XX(resp_partial, "responses a worker wrote in part; the loop wrote the rest")         \
    XX(resp_queued, "responses a worker packed for the loop's write queue")               \
    XX(bytes_in, "bytes read from clients")                                               \
    XX(bytes_out, "bytes written to clients")                                             \
    /* access control (daemon/access.c): E_PERMISSION by refused method */                \
    XX(refused_load, "load requests refused: the peer is not an admin")                   \
    XX(refused_unload, "unload requests refused: the peer is not an admin")               \
    /* limits: timeouts, the request-memory budget */                                     \
    XX(conn_idle_timeouts, "connections closed: idle longer than idle-timeout")           \
    XX(conn_read_timeouts, "connections closed: a message not whole within read-timeout") \
    XX(budget_refused, "requests refused with E_OVERLOADED: max-buffered reached")

// Methods, in the order of by_method in `stats` ("unknown" counts requests
// for any other name).
// clang-format off
#define CD_METHOD_NAMES(XX) XX(hello) XX(health) XX(models) XX(stats) XX(load) XX(unload) XX(infer) XX(metrics) \
    XX(plan) XX(region_register) XX(region_unregister) XX(region_list)
// clang-format on

typedef enum {
#define XX(m) CD_M_##m,
    CD_METHOD_NAMES(XX)
#undef XX
        CD_M_unknown,
    CD_M_COUNT,
} cd_method_id;

#define CD_STATS_NERR 32 // > the largest error number in CD_ERROR_MAP
#define XX(name, num, msg) _Static_assert(num < CD_STATS_NERR, "grow CD_STATS_NERR");
CD_ERROR_MAP(XX)
#undef XX

typedef struct {
#define XX(f, d) atomic_uint_least64_t f;
    CD_STATS_MAP(XX)
#undef XX
    atomic_uint_least64_t by_method[CD_M_COUNT];
    atomic_uint_least64_t errors[CD_STATS_NERR]; // indexed by -status
} cd_stats;

extern cd_stats cd_stats_g;

#define CD_STAT_ADD(field, n) atomic_fetch_add_explicit(&cd_stats_g.field, (n), memory_order_relaxed)
#define CD_STAT_INC(field) CD_STAT_ADD(field, 1)
#define CD_STAT_GET(field) atomic_load_explicit(&cd_stats_g.field, memory_order_relaxed)

// Counts one error response with the given (negative) status.
void cd_stats_error(int status);

// Method name of an id ("unknown" for CD_M_unknown).
const char *cd_method_name(cd_method_id id);
// Id of a method name (CD_M_unknown when not known).
cd_method_id cd_method_lookup(const char *name, size_t len);

// Resident set size of this process in bytes (0 when unreadable).
uint64_t cd_stats_rss_bytes(void);

#endif // CD_DAEMON_STATS_H
