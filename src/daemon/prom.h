/*
 * prom: the counters of the shared area (common/stats.h) as Prometheus
 * text, for /metrics.
 */
#ifndef PGJOBD_PROM_H
#define PGJOBD_PROM_H

#include "common/stats.h"
#include "common/util.h"

/*
 * Appends the Prometheus text of the first n workers' entries (summed by
 * kind and queue: the entries of workers that exited keep counting, so no
 * counter goes back) to out; configured is the worker count of the config.
 */
void prom_render(const struct stats *s, int n, int configured, struct buf *out);

#endif
