/*
 * monitor: the reads of the worker's monitor (src/worker/monitor.c) for
 * /metrics: queue depths and flow control, dead jobs, jobs no live worker
 * serves, workflows.
 */
#ifndef PGJOBD_DB_MONITOR_H
#define PGJOBD_DB_MONITOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct dbev;
struct db_status;

/* The name that queue_depths(), queue_dead() and queue_unserved() give the
 * sum of the queues
 * that are not configured (docs/operations.md, "Metrics"). */
#define QUEUE_OTHER "(other)"

/* One queue's depth across the cluster. */
struct queue_depth {
	char name[64];
	bool other; /* the sum of the queues not configured (QUEUE_OTHER) */
	int64_t due, running;
	int64_t oldest_due_ms; /* age of the oldest due job */
	/* Flow control: whether it has a row in pgjob.limits, is paused,
	 * its due jobs held back by each limit (paused, throttled,
	 * concurrency, rate, key_concurrency), its tokens (thousandths; -1:
	 * no rate). */
	bool limited, paused;
	int64_t waiting[5];
	int64_t tokens_milli;
	/* Available jobs not due yet; available jobs of a kind not in the
	 * kinds given to queue_depths(). */
	int64_t scheduled, unhandled;
	/* Past DEPTH_CAP (10,000) jobs in a window, due, scheduled and
	 * unhandled are estimated from a sample of the table (the count
	 * itself, a floor under it); running is the window's. */
	bool estimated;
};
typedef void queue_depths_fn(void *arg, const struct db_status *st,
			     const struct queue_depth *q, size_t n);
/*
 * The depth of every queue with unfinished jobs or limits, at most max
 * rows: one per queue of queues[0..nqueues) (the configured ones, at most
 * max - 1, by name), then one (other set, named QUEUE_OTHER) that sums
 * every other queue, if there is any; kinds[0..nkinds) are the kinds this
 * instance handles.  Exact up to 10,000 jobs a queue, estimated past it
 * (the estimated flag).  timeout_ms > 0 stops the read after that long
 * (SQLSTATE_QUERY_CANCELED).
 */
int queue_depths(struct dbev *d, int max, const char *const *queues,
		 size_t nqueues, const char *const *kinds, size_t nkinds,
		 int64_t timeout_ms, queue_depths_fn *cb, void *arg);

/* Sets up the monitor's own connection (no JIT) before its first read;
 * the answer comes before any read sent after. */
int monitor_session(struct dbev *d);

/* Dead jobs of one queue. */
struct queue_dead {
	char name[64];
	int64_t dead;
};
typedef void queue_dead_fn(void *arg, const struct db_status *st,
			   const struct queue_dead *q, size_t n);
/* Dead jobs per queue, at most max rows, as queue_depths(): the configured
 * queues each, the others summed under QUEUE_OTHER. */
int queue_dead(struct dbev *d, int max, const char *const *queues,
	       size_t nqueues, queue_dead_fn *cb, void *arg);

/* A count of one queue. */
struct queue_count {
	char name[64];
	int64_t n;
};
typedef void queue_count_fn(void *arg, const struct db_status *st,
			    const struct queue_count *q, size_t n);
/* Available jobs per queue whose kind and queue no live worker serves
 * (pgjob.unserved()'s rule; live: a heartbeat within live_ms), among the
 * first 1,001 of each queue in the claim's order (up to 1,001): the
 * configured queues (at most max - 1) by name, every other queue summed
 * as QUEUE_OTHER; queues without such jobs are left out. */
int queue_unserved(struct dbev *d, int max, const char *const *queues,
		   size_t nqueues, int64_t live_ms, queue_count_fn *cb,
		   void *arg);

/* Workflows (docs/workflows.md): running now, and done and failed since
 * the schema was made, pruned ones included. */
struct queue_workflows {
	int64_t running, done_total, failed_total;
};
typedef void queue_workflows_fn(void *arg, const struct db_status *st,
				const struct queue_workflows *w);
int queue_workflows(struct dbev *d, queue_workflows_fn *cb, void *arg);

#endif
