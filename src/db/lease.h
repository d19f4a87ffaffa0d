/*
 * lease: the worker's row in pgjob.workers (heartbeat, and what it offers
 * the cluster's duties), and named leases with fencing tokens in
 * pgjob.leases (the scheduler, pruning, task partitions).
 */
#ifndef PGJOBD_LEASE_H
#define PGJOBD_LEASE_H

#include <stddef.h>
#include <stdint.h>

struct config;
struct dbev;
struct db_status;

/* A statement's outcome, for statements whose rows nobody reads. */
typedef void lease_done_fn(void *arg, const struct db_status *st);

/*
 * Attempts a worker ended (sql/upgrade/014_console_state.sql): done, failed
 * (retried or dead) and retried (a part of failed).
 */
struct lease_totals {
	int64_t done, failed, retried;
};

/* What the heartbeat says of the worker's process handlers: their copies
 * that ended unasked since it started, and the kinds in a crash loop now
 * (borrowed). */
struct lease_crashes {
	int64_t total;
	const char *const *loops;
	size_t nloops;
};

/*
 * Sends the heartbeat for slot (pid guards against a slot's new owner),
 * with the worker's totals since it registered t, its process handlers'
 * crashes cr (both copied) and the jobs it holds now, running, for its
 * row.
 */
int lease_worker_heartbeat(struct dbev *d, int slot, int pid, int running,
			   const struct lease_totals *t,
			   const struct lease_crashes *cr, lease_done_fn *cb,
			   void *arg);
/*
 * Adds t (copied), what the worker ended since its last such write, to the
 * row of the current minute of pgjob.worker_minutes.  A statement of its
 * own, so that its failure (a role without the grant) never fails the
 * heartbeat.
 */
int lease_worker_minute(struct dbev *d, int slot, int pid,
			const struct lease_totals *t, lease_done_fn *cb,
			void *arg);

/*
 * defined_at: when the worker's row first said what it can do, as
 * "YYYY-MM-DDTHH:MM:SS.ffffffZ" (borrowed for the call); NULL when the row
 * is not this worker's (another took the slot) or on an error.
 */
typedef void lease_published_fn(void *arg, const struct db_status *st,
				const char *defined_at);
/*
 * Writes into the worker's row (slot, pid) what its config offers the
 * cluster's duties: its tasks with their partition counts, and its
 * schedules' definitions, each schedule's queue resolved (the scheduler
 * lease's holder may have no handler for the kind).  defined_at is the
 * value a previous call returned, or NULL the first time: the row's
 * defined_at is then now().  cfg is borrowed for the call; NULL writes
 * nothing offered (a stopping worker withdraws, so that others take over
 * its share).
 */
int lease_worker_publish(struct dbev *d, int slot, int pid,
			 const struct config *cfg, const char *defined_at,
			 lease_published_fn *cb, void *arg);

/* live[i]: for task i of the config, the live workers that run it with the
 * same number of partitions (borrowed for the call); n tasks. */
typedef void lease_tasks_fn(void *arg, const struct db_status *st,
			    const long *live, size_t n);
/*
 * For each task of cfg, the live workers (a heartbeat within window_ms)
 * that run it with the same number of partitions, this one included once
 * it has published.
 */
int lease_task_workers(struct dbev *d, const struct config *cfg,
		       int64_t window_ms, lease_tasks_fn *cb, void *arg);

/*
 * Deletes the worker's row on a clean exit, after adding t to its minute
 * of pgjob.worker_minutes as lease_worker_minute() (NULL: nothing to add):
 * synchronously, on the connection under d, which must have nothing
 * pending (best effort: on any failure the row stays, and pruning removes
 * it after a day).
 */
void lease_worker_unregister(struct dbev *d, int slot, int pid,
			     const struct lease_totals *t);

/* token: the lease's fencing token when the statement holds (took,
 * renewed) it, 0 when it does not. */
typedef void lease_fn(void *arg, const struct db_status *st, int64_t token);

/*
 * Named leases in pgjob.leases, with fencing tokens.  Each sends one
 * statement; cb may be NULL.
 *
 * lease_acquire takes the lease when it is free, expired, or already this
 * holder's (after a reconnect), and always gives it a new token.
 * lease_renew extends it only while (holder, token) still hold it.
 * lease_release gives it up at once, so another worker can take it.
 */
int lease_acquire(struct dbev *d, const char *name, const char *holder,
		  int64_t ms, lease_fn *cb, void *arg);
int lease_renew(struct dbev *d, const char *name, const char *holder,
		int64_t token, int64_t ms, lease_fn *cb, void *arg);
int lease_release(struct dbev *d, const char *name, const char *holder,
		  int64_t token, lease_fn *cb, void *arg);

/* renewed[0..n): the names of the leases that were renewed (borrowed for
 * the call). */
typedef void lease_renewed_fn(void *arg, const struct db_status *st,
			      const char *const *renewed, size_t n);
/* Renews the leases names[i] held with tokens[i] by holder, in one
 * statement. */
int lease_renew_many(struct dbev *d, const char *const *names,
		     const int64_t *tokens, size_t n, const char *holder,
		     int64_t ms, lease_renewed_fn *cb, void *arg);

#endif
