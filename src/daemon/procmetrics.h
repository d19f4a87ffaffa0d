/*
 * procmetrics: the process series of /metrics, in the Prometheus client
 * convention, and pgjobd_build_info.
 *
 * process_* describe the supervisor (the process that serves /metrics),
 * as every Prometheus client library does for its own process.  Its
 * workers are summed apart, as pgjobd_workers_*: their CPU time counts
 * the workers alive now and every one that exited (the supervisor reaped
 * it: RUSAGE_CHILDREN), handler processes included, so the counter never
 * goes back across restarts and reloads.  Read from /proc at each scrape.
 */
#ifndef PGJOBD_PROCMETRICS_H
#define PGJOBD_PROCMETRICS_H

#include <sys/types.h>

#include "common/util.h"

/* Appends the series for this process and its live workers pids[0..n). */
void procmetrics_render(struct buf *out, const pid_t *pids, int n);

#endif
