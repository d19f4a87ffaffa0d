/*
 * prune: deleting what is finished, in batches: jobs past their retention
 * (the pruning duty and `pgjob prune` send the one same statement),
 * expired request keys, the rows of workers gone for a day and their
 * throughput minutes past 2 hours.
 */
#ifndef PGJOBD_PRUNE_H
#define PGJOBD_PRUNE_H

#include <stdint.h>

struct dbev;
struct db_conn;
struct db_status;

typedef void prune_fn(void *arg, const struct db_status *st, long long n);

/* prune_jobs()'s statement ($1 cutoff or NULL, $2 retention in ms, $3 the
 * batch), for the plan tests. */
const char *prune_jobs_statement(void);
/* One batch of up to batch finished jobs older than retention_ms (by the
 * database's clock), oldest first, skipping rows locked by others. */
int prune_jobs(struct dbev *d, int64_t retention_ms, int batch, prune_fn *cb,
	       void *arg);
/* The same batch with a fixed cutoff (a timestamptz as text), at once:
 * returns how many were deleted, or -1 with *err set (caller frees). */
long long prune_jobs_now(struct db_conn *c, const char *cutoff, int batch,
			 char **err);
/* The plain jobs done kept in pgjob.jobs_done (sql/upgrade/019_jobs_done.sql):
 * every ring of it whose jobs all finished more than retention_ms ago
 * is emptied whole (truncated; no row is deleted one by one). */
int prune_done(struct dbev *d, int64_t retention_ms, prune_fn *cb, void *arg);
/* With a fixed cutoff, at once, as prune_jobs_now(): the rings all before
 * it emptied, and up to batch rows before it deleted from each of the
 * others.  Returns how many went, or -1 with *err set (caller frees). */
long long prune_done_now(struct db_conn *c, const char *cutoff, int batch,
			 char **err);
/* One batch of expired request keys (docs/idempotency.md). */
int prune_request_keys(struct dbev *d, int batch, prune_fn *cb, void *arg);
/* The rows of workers without a heartbeat for a day, and the minutes of
 * pgjob.worker_minutes older than 2 hours (no answer read). */
int prune_workers(struct dbev *d);

/* Deletes what flow control no longer needs (pgjob.prune_limits()):
 * expired slot holds, per-key buckets that are full again, limit rows that
 * limit nothing. */
int prune_limits(struct dbev *d, prune_fn *cb, void *arg);

#endif
