#ifndef CD_DAEMON_METRICS_H
#define CD_DAEMON_METRICS_H

// Prometheus text exposition (format 0.0.4) of the daemon's counters: the
// `metrics` method answers it, and --metrics-file writes it every
// --metrics-interval seconds (temporary file + rename, so node_exporter's
// textfile collector never reads half a file). Every metric is documented in
// docs/OPERATIONS.md ("Metrics"). Loop thread only.

#include <stddef.h>

typedef struct cd_server cd_server;

// Renders the metrics into a malloc'd NUL-terminated buffer (*len without
// the NUL). Returns 0 or CD_ENOMEM.
int cd_metrics_render(cd_server *srv, char **out, size_t *len);

// Writes the metrics to path atomically (path.tmp, then rename). Returns 0 or
// CD_EIO / CD_ENOMEM; logs failures (at most once a minute).
int cd_metrics_write_file(cd_server *srv, const char *path);

#endif // CD_DAEMON_METRICS_H
