/*
 * schedule: the scheduler's statements.  A round reads every schedule that
 * a live worker defines (pgjob.workers.schedules) with its last tick and
 * the operator's controls (enabled, a run asked for); a tick advances the
 * schedule and enqueues its job in one transaction, fenced by the
 * scheduler lease's token, and so do a skipped tick and a run by hand.
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
	/* Steered from the console or `pgjob schedule`: disabled, its ticks
	 * are skipped; a run asked for by hand and not served yet (its time,
	 * microseconds since the Unix epoch). */
	bool enabled;
	bool has_run_request;
	int64_t run_requested_us;
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

/*
 * A disabled schedule: advances s to tick (Unix seconds) without enqueueing
 * anything, fenced as schedule_tick() (cb's enqueue: the update's outcome).
 */
int schedule_skip(struct dbev *d, const char *lease, int64_t token,
		  const struct schedule_row *s, int64_t tick,
		  schedule_ticked_fn *cb, void *arg);
/*
 * The run of s asked for by hand (s->run_requested_us): enqueues one job of
 * it, due now, and clears the request, in one transaction fenced as
 * schedule_tick(), and only while the request is the one read (a request
 * served by another holder, or made again meanwhile, enqueues nothing
 * here).  Its payload names the schedule and the request's time under
 * "pgjob" unless the configured payload has that key already; its unique
 * key is schedule:NAME:run:TIME (docs/schedules.md).
 */
int schedule_run(struct dbev *d, const char *lease, int64_t token,
		 const struct schedule_row *s, schedule_ticked_fn *cb,
		 void *arg);

#endif
