#include "daemon/server-state.h"

#include <uv.h>

size_t cd_server_in_flight(cd_server *srv) {
    size_t n = srv->workers ? cd_workers_busy(srv->workers) : 0;
    n += srv->loader ? cd_workers_busy(srv->loader) : 0;
    return n + (srv->profiler ? cd_workers_busy(srv->profiler) : 0);
}

const char *cd_server_socket_path(const cd_server *srv) {
    return srv->activated ? srv->activated_path : srv->set->socket;
}

double cd_server_uptime(const cd_server *srv) { return (double)(uv_hrtime() - srv->start_ns) / 1e9; }
