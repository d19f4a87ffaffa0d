/*
 * scheduler: the holder of the pgjob:scheduler lease ticks every schedule
 * that a live worker defines, once per tick across the cluster: each
 * tick's job is enqueued in the transaction that advances the schedule's
 * last tick, fenced by the lease's token (docs/schedules.md).  Every worker
 * may hold the lease: the holder only enqueues, and needs no handler for
 * the kinds.  The console and `pgjob schedule` steer a schedule through its
 * row (sql/upgrade/014_console_state.sql): a disabled one has its ticks skipped
 * (last_tick moves on, nothing is enqueued), and a run asked for by hand is
 * enqueued at the next round, fenced the same way.
 */
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/cron.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"
#include "db/lease.h"
#include "db/schedule.h"
#include "worker/duties.h"

#define SCHEDULER_LEASE "pgjob:scheduler"
#define TICKS_PER_ROUND 100

static void
notes_free(struct notes *n)
{
	for (size_t i = 0; i < n->n; i++)
		free(n->v[i]);
	free(n->v);
	*n = (struct notes){0};
}

/*
 * Whether a line about key should be logged in this round: only when the
 * previous round did not see the same key, so a lasting condition is logged
 * once, not every second, and again if it comes back.
 */
static int
note_new(struct duty *d, const char *key)
{
	d->noted.v = xrealloc(d->noted.v, (d->noted.n + 1) * sizeof(char *));
	d->noted.v[d->noted.n++] = xstrdup(key);
	for (size_t i = 0; i < d->seen.n; i++)
		if (strcmp(d->seen.v[i], key) == 0)
			return 0;
	return 1;
}

/* The round is over: what it noted is what the next one compares with. */
static void
notes_rotate(struct duty *d)
{
	notes_free(&d->seen);
	d->seen = d->noted;
	d->noted = (struct notes){0};
}

static void
on_lease(void *arg, const struct db_status *st, int64_t token)
{
	struct duty *d = arg;
	int64_t had = d->sched_token;
	d->sched_token = token;
	if (d->sched_token && d->stopping) {
		/* Taken while stopping: give it back at once. */
		if (d->db)
			lease_release(d->db, SCHEDULER_LEASE, d->holder,
				      d->sched_token, NULL, NULL);
		d->sched_token = 0;
		return;
	}
	if (d->sched_token && !had)
		log_info("holding the scheduler lease (token %lld)",
			 (long long)d->sched_token);
	else if (!d->sched_token && had)
		log_warnx("lost the scheduler lease");
}

void
scheduler_period(struct duty *d)
{
	if (d->sched_token)
		lease_renew(d->db, SCHEDULER_LEASE, d->holder, d->sched_token,
			    duty_lease_ms(d), on_lease, d);
	else
		lease_acquire(d->db, SCHEDULER_LEASE, d->holder,
			      duty_lease_ms(d), on_lease, d);
}

static void
on_ticked(void *arg, const struct db_status *fence,
	  const struct db_status *enqueue)
{
	struct duty *d = arg;
	if (fence->answered && fence->error != DB_OK) {
		log_warnx("scheduler: %s", fence->text);
		d->sched_token = 0; /* fenced out: another worker has it */
	} else if (enqueue->answered && enqueue->error != DB_OK) {
		/* A tick, a skipped tick or a run by hand. */
		log_warnx("scheduler: writing a schedule's tick failed: %s",
			  enqueue->text);
	}
	if (d->sched_pending > 0 && --d->sched_pending == 0)
		d->sched_busy = 0;
}

/* Advances schedule s to tick and enqueues its job (schedule_tick()). */
static void
enqueue_tick(struct duty *d, const struct schedule_row *s, int64_t tick)
{
	char when[CRON_TIME_LEN];
	cron_format_utc(tick, when);
	d->sched_pending++;
	log_info("schedule %s: enqueueing the tick of %s", s->name, when);
	schedule_tick(d->db, SCHEDULER_LEASE, d->sched_token, s, tick, when,
		      on_ticked, d);
}

/*
 * A disabled schedule's due ticks: last_tick moves past them and nothing is
 * enqueued, so that enabling it again fires no burst of them.
 */
static void
skip_ticks(struct duty *d, const struct schedule_row *s, const int64_t *ticks,
	   int n)
{
	char when[CRON_TIME_LEN];
	cron_format_utc(ticks[n - 1], when);
	d->sched_pending++;
	if (n == 1)
		log_info("schedule %s: disabled, skipping the tick of %s",
			 s->name, when);
	else
		log_info("schedule %s: disabled, skipping %d ticks up to %s",
			 s->name, n, when);
	schedule_skip(d->db, SCHEDULER_LEASE, d->sched_token, s, ticks[n - 1],
		      on_ticked, d);
}

/* The run of s that an operator asked for (schedule_run()). */
static void
run_by_hand(struct duty *d, const struct schedule_row *s)
{
	d->sched_pending++;
	log_info("schedule %s: enqueueing a run asked for by hand", s->name);
	schedule_run(d->db, SCHEDULER_LEASE, d->sched_token, s, on_ticked, d);
}

/* Says once that two live workers define schedule name differently. */
static void
note_conflict(struct duty *d, const char *name, const char *winner,
	      const char *other)
{
	char *key = xasprintf("conflict\n%s\n%s\n%s", name, winner, other);
	if (note_new(d, key))
		log_warnx("schedule %s: live workers define it differently; "
			  "ticking the definition of %s (started last), not "
			  "that of %s",
			  name, winner, other);
	free(key);
}

/*
 * Enqueues the due ticks of one schedule of a round (skips them when it is
 * disabled) and a run asked for by hand; returns how many statements it
 * sent.
 */
static int
schedule_one(struct duty *d, const struct schedule_row *s)
{
	int64_t ticks[TICKS_PER_ROUND];
	char *err = NULL, *key;
	int n = -1, sent = 0;

	if (s->other)
		note_conflict(d, s->name, s->publisher, s->other);
	if (!s->has_last_tick) {
		/* New schedule: ticks count from now on. */
		schedule_begin(d->db, s->name);
		return 0;
	}
	/* Also when disabled: an operator asked for it. */
	if (s->has_run_request) {
		run_by_hand(d, s);
		sent++;
	}
	struct cron *c = cron_parse(s->cron, &err);
	if (c)
		n = cron_due(c, s->timezone, s->last_tick, s->now_us,
			     s->catch_up_all, ticks, TICKS_PER_ROUND);
	cron_free(c);
	if (n < 0) {
		/* The definer's pgjobd took it; this one cannot. */
		key = xasprintf("unusable\n%s\n%s\n%s\n%s", s->name,
				s->publisher, s->cron,
				s->timezone ? s->timezone : "");
		if (note_new(d, key))
			log_warnx("schedule %s (defined by %s): %s; not "
				  "ticked here",
				  s->name, s->publisher,
				  err ? err : "unknown time zone on this host");
		free(key);
		n = 0;
	}
	free(err);
	if (!s->enabled && n > 0) {
		skip_ticks(d, s, ticks, n);
		return sent + 1;
	}
	for (int k = 0; k < n; k++)
		enqueue_tick(d, s, ticks[k]);
	return sent + n;
}

static void
on_round(void *arg, const struct db_status *st, const struct schedule_row *rows,
	 size_t n)
{
	struct duty *d = arg;
	int sent = 0;

	if (st->error != DB_OK || !d->db) {
		if (st->answered && st->error != DB_OK)
			log_warnx("scheduler: reading the schedules: %s",
				  st->text);
		d->sched_busy = 0;
		return;
	}
	for (size_t r = 0; r < n; r++)
		sent += schedule_one(d, &rows[r]);
	notes_rotate(d);
	if (sent == 0)
		d->sched_busy = 0;
}

void
scheduler_round(struct duty *d)
{
	if (!d->sched_token || d->sched_busy)
		return;
	d->sched_busy = 1;
	schedule_round(d->db, duty_lease_ms(d), on_round, d);
}

void
scheduler_stop(struct duty *d)
{
	if (d->sched_token && d->db)
		lease_release(d->db, SCHEDULER_LEASE, d->holder, d->sched_token,
			      NULL, NULL);
	d->sched_token = 0;
}

void
scheduler_forget(struct duty *d)
{
	d->sched_token = 0;
	d->sched_busy = d->sched_pending = 0;
}

void
scheduler_free(struct duty *d)
{
	notes_free(&d->seen);
	notes_free(&d->noted);
}
