/*
 * schedule: the scheduler's statements.  A round reads every schedule that
 * a live worker defines (pgjob.workers.schedules) with its last tick; a
 * tick advances the schedule and enqueues its job in one transaction,
 * fenced by the scheduler lease's token.
 */
#ifndef PGJOBD_SCHEDULE_H
#define PGJOBD_SCHEDULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct dbev;
struct db_status;

/* One schedule of a round; strings borrowed for the callback. */
struct schedule_row {
	const char *name, *cron;
	const char *timezone; /* NULL: UTC */
	const char *kind, *payload, *queue;
	bool catch_up_all;
	const char *publisher; /* host/pid whose definition this is */
	const char *other;     /* a live worker defining it otherwise, or
				  NULL */
	bool has_last_tick;    /* false: a new schedule */
	int64_t last_tick;     /* Unix seconds */
	int64_t now_us;	       /* the database's clock */
};
typedef void schedule_round_fn(void *arg, const struct db_status *st,
			       const struct schedule_row *rows, size_t n);

/*
 * One round: every schedule that a worker live within window_ms defines,
 * by the definition of the worker that started last (then by its name:
 * deterministic while the same workers live), by name.
 */
int schedule_round(struct dbev *d, int64_t window_ms, schedule_round_fn *cb,
		   void *arg);
/* A new schedule: its ticks count from now on (no answer is read). */
int schedule_begin(struct dbev *d, const char *name);

/* fence: the fencing check's outcome; enqueue: the tick's. */
typedef void schedule_ticked_fn(void *arg, const struct db_status *fence,
				const struct db_status *enqueue);
/*
 * Advances schedule s to tick (Unix seconds; when: the same as RFC 3339
 * UTC) and enqueues its job, in one transaction fenced by (lease, token).
 * The job is due at the tick itself, never before, and its payload names
 * the schedule and the tick under "pgjob" unless the configured payload
 * has that key already (docs/schedules.md).
 */
int schedule_tick(struct dbev *d, const char *lease, int64_t token,
		  const struct schedule_row *s, int64_t tick, const char *when,
		  schedule_ticked_fn *cb, void *arg);

#endif
