/*
 * monitor: what the depth reader (one worker per instance, named by the
 * supervisor) reads for /metrics: the queue depths, the workflows, dead
 * jobs and jobs no live worker serves per queue, and the schedules' last
 * and next ticks.  They go to the shared stats area, which the supervisor
 * renders (daemon/prom.c).
 *
 * The reads go on a connection of their own ("pgjobd monitor" in
 * pg_stat_activity), made without blocking the worker's loop
 * (dbev_connect()) once the worker is named and closed when it no longer
 * is.  Under a snapshot held open elsewhere the depth read counts every
 * dead entry of the indexes of available and running jobs: seconds, in a
 * churn run (docs/performance.md); on the worker's own connection every
 * claim and end sent behind it waited that long too.  While that
 * connection cannot be made (max_connections reached, a pooler's pool
 * full), the reads go on the worker's own, as they used to, and a new
 * attempt is made later.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/backoff.h"
#include "common/cron.h"
#include "common/stats.h"
#include "common/util.h"
#include "db/db.h"
#include "db/dbev.h"
#include "db/schedule.h"
#include "db/sqlstate.h"
#include "worker/internal.h"

/*
 * Dead jobs are counted at the first depth round (5 s each), then every
 * DEAD_EVERY rounds (a minute): their statement reads the finished rows
 * that retention keeps (queue_dead()), so its cost grows with them.  After
 * a worker of this instance made a job dead, they are counted sooner, but
 * no sooner than DEAD_AFTER rounds (10 s) after the last count, however
 * often jobs die.
 */
#define DEAD_EVERY 12
#define DEAD_AFTER 2

/* How long making the monitor connection may take, and the waits between
 * attempts that failed (full jitter, doubling from the first). */
#define MON_CONNECT_MS	 30000
#define MON_RETRY_MIN_MS 5000
#define MON_RETRY_MAX_MS 300000

/* Jobs that this instance's workers made dead, ever. */
static uint64_t
dead_here(const struct stats *s)
{
	uint64_t n = 0;
	for (int i = 0; i < STATS_MAX_WORKERS; i++) {
		const struct stats_worker *w = &s->w[i];
		uint32_t nk = __atomic_load_n(&w->nkinds, __ATOMIC_ACQUIRE);
		for (uint32_t k = 0; k < nk; k++)
			n += __atomic_load_n(&w->kinds[k].dead,
					     __ATOMIC_RELAXED);
	}
	return n;
}

/* A read's outcome: on the worker's own connection, as its other
 * statements' (conn_ok()); on the monitor's, its loss is the monitor's
 * (on_mon_lost()). */
static int
read_ok(struct worker *w, const struct db_status *st, const char *what)
{
	if (w->reads_on == w->db)
		return conn_ok(w, st, what);
	if (st->error == DB_OK)
		return 1;
	if (st->error != DB_LOST)
		log_warnx("%s failed: %s", what, st->text);
	return 0;
}

static void
on_depths(void *arg, const struct db_status *st, const struct queue_depth *q,
	  size_t n)
{
	struct worker *w = arg;
	struct stats *s = w->stats;
	/* The read counts up to 10,000 rows a queue of the index of
	 * available and running jobs, dead entries too: a few ms, but under
	 * a snapshot held open elsewhere it grows with every job claimed
	 * since.  The next waits 50 times as long as this one took, if that
	 * is more than the timer's 5 s: the figures get older instead.
	 * And it stops after DEPTH_TIMEOUT_MS, which then counts as its
	 * cost (backoff_limited_cost()): the figures stay as they were. */
	int64_t now = util_now_ms();
	int stopped = sqlstate_is(st->sqlstate, SQLSTATE_QUERY_CANCELED);
	/* Its own time, not the round trip: behind another statement in the
	 * pipeline it would count that one's time too (dbev_answer_ms()). */
	int64_t took = st->answered ? dbev_answer_ms(w->reads_on)
				    : now - w->depth_sent_ms;
	int64_t cost = backoff_limited_cost(took, DEPTH_TIMEOUT_MS, stopped);
	w->depth_next_ms = now + 49 * (cost > 0 ? cost : 0);
	if (stopped) {
		/* Info, not debug: the server logs the stop as an ERROR, and
		 * the line beside it says what it was and that nothing is
		 * wrong with the jobs (the fault suite's workers200 counts
		 * both). */
		log_info("reading queue depths took over %d ms and was "
			 "stopped; the queue figures in /metrics stay as they "
			 "were, and the next read is in %lld s",
			 DEPTH_TIMEOUT_MS, (long long)(49 * cost / 1000));
		return;
	}
	if (!st->answered || !read_ok(w, st, "reading queue depths"))
		return;
	__atomic_store_n(&s->nqueues, 0, __ATOMIC_RELEASE);
	for (size_t i = 0; i < n; i++) {
		struct stats_queue *sq = &s->queues[i];
		snprintf(sq->name, sizeof(sq->name), "%s", q[i].name);
		stats_set(&sq->due, q[i].due);
		stats_set(&sq->running, q[i].running);
		stats_set(&sq->oldest_due_ms, q[i].oldest_due_ms);
		stats_set(&sq->limited, q[i].limited);
		stats_set(&sq->paused, q[i].paused);
		for (int k = 0; k < STATS_LIMITS; k++)
			stats_set(&sq->waiting[k], q[i].waiting[k]);
		stats_set(&sq->tokens_milli, q[i].tokens_milli);
		stats_set(&sq->scheduled, q[i].scheduled);
		stats_set(&sq->unhandled, q[i].unhandled);
		stats_set(&sq->estimated, q[i].estimated);
		stats_set(&sq->other, q[i].other);
	}
	__atomic_store_n(&s->nqueues, (uint32_t)n, __ATOMIC_RELEASE);
	stats_set(&s->queues_at_ms, util_now_ms());
}

static void
on_workflows(void *arg, const struct db_status *st,
	     const struct queue_workflows *q)
{
	struct worker *w = arg;
	struct stats *s = w->stats;
	if (!st->answered || !read_ok(w, st, "reading workflow counts"))
		return;
	stats_set(&s->workflows_running, q->running);
	stats_set(&s->workflows_done, q->done_total);
	stats_set(&s->workflows_failed, q->failed_total);
	__atomic_store_n(&s->workflows_at_ms, util_now_ms(), __ATOMIC_RELEASE);
}

static void
on_dead(void *arg, const struct db_status *st, const struct queue_dead *q,
	size_t n)
{
	struct worker *w = arg;
	struct stats *s = w->stats;
	if (!st->answered || !read_ok(w, st, "counting dead jobs"))
		return;
	__atomic_store_n(&s->ndead, 0, __ATOMIC_RELEASE);
	for (size_t i = 0; i < n; i++) {
		snprintf(s->dead[i].name, sizeof(s->dead[i].name), "%s",
			 q[i].name);
		stats_set(&s->dead[i].n, q[i].dead);
	}
	__atomic_store_n(&s->ndead, (uint32_t)n, __ATOMIC_RELEASE);
	__atomic_store_n(&s->dead_at_ms, util_now_ms(), __ATOMIC_RELEASE);
}

static void
on_unserved(void *arg, const struct db_status *st, const struct queue_count *q,
	    size_t n)
{
	struct worker *w = arg;
	struct stats *s = w->stats;
	if (!st->answered || !read_ok(w, st, "counting jobs no worker serves"))
		return;
	__atomic_store_n(&s->nunserved, 0, __ATOMIC_RELEASE);
	for (size_t i = 0; i < n; i++) {
		snprintf(s->unserved[i].name, sizeof(s->unserved[i].name), "%s",
			 q[i].name);
		stats_set(&s->unserved[i].n, q[i].n);
	}
	__atomic_store_n(&s->nunserved, (uint32_t)n, __ATOMIC_RELEASE);
	__atomic_store_n(&s->unserved_at_ms, util_now_ms(), __ATOMIC_RELEASE);
}

/* The schedule rows of a scheduler round (the same statement): those that
 * have ticked, with the next tick after the last one by their cron.  The
 * round's last read: its answer ends the round. */
static void
on_ticks(void *arg, const struct db_status *st, const struct schedule_row *rows,
	 size_t n)
{
	struct worker *w = arg;
	struct stats *s = w->stats;
	uint32_t m = 0;
	int ok = st->answered && read_ok(w, st, "reading schedule ticks");
	w->reads_on = NULL;
	if (!ok)
		return;
	__atomic_store_n(&s->nschedules, 0, __ATOMIC_RELEASE);
	for (size_t i = 0; i < n && m < STATS_MAX_SCHEDULES; i++) {
		if (!rows[i].has_last_tick)
			continue;
		char *err = NULL;
		int64_t next = 0;
		struct cron *c = cron_parse(rows[i].cron, &err);
		if (!c || cron_next(c, rows[i].timezone, rows[i].last_tick,
				    &next) < 0)
			next = 0; /* an unknown time zone here, say */
		cron_free(c);
		free(err);
		snprintf(s->schedules[m].name, sizeof(s->schedules[m].name),
			 "%s", rows[i].name);
		stats_set(&s->schedules[m].last_tick_s, rows[i].last_tick);
		stats_set(&s->schedules[m].next_tick_s, next);
		m++;
	}
	__atomic_store_n(&s->nschedules, m, __ATOMIC_RELEASE);
}

/* Sends a round of reads on d; the answer to the last (on_ticks()) ends
 * it, and no round starts before. */
static void
send_round(struct worker *w, struct dbev *d)
{
	w->reads_on = d;
	w->depth_sent_ms = util_now_ms();
	/* The config's queues each have their series; the others, which any
	 * client that may enqueue can name, are summed into one. */
	size_t nq = w->cfg->nqueues;
	const char **names = xcalloc(nq + 1, sizeof(*names));
	for (size_t i = 0; i < nq; i++)
		names[i] = w->cfg->queues[i].name;
	queue_depths(d, STATS_MAX_QUEUES, names, nq, w->kinds, w->nkinds,
		     DEPTH_TIMEOUT_MS, on_depths, w);
	queue_workflows(d, on_workflows, w);
	uint64_t dead = dead_here(w->stats);
	if (w->dead_rounds == 0 || w->dead_rounds >= DEAD_EVERY ||
	    (dead != w->dead_seen && w->dead_rounds >= DEAD_AFTER)) {
		queue_dead(d, STATS_MAX_QUEUES, names, nq, on_dead, w);
		queue_unserved(d, STATS_MAX_QUEUES, names, nq, w->cfg->lease_ms,
			       on_unserved, w);
		w->dead_seen = dead;
		w->dead_rounds = 0;
	}
	w->dead_rounds++;
	free(names);
	schedule_round(d, w->cfg->lease_ms, on_ticks, w);
}

/* The monitor connection failed or was lost: the reads go on the
 * worker's own until the next attempt. */
static void
mon_failed(struct worker *w, const char *why)
{
	int64_t wait = backoff_full_jitter(MON_RETRY_MIN_MS, MON_RETRY_MAX_MS,
					   w->mon_failures, backoff_random());
	if (wait < MON_RETRY_MIN_MS)
		wait = MON_RETRY_MIN_MS;
	w->mon_retry_ms = util_now_ms() + wait;
	/* Once while it lasts: every attempt would say the same. */
	if (w->mon_failures++ == 0)
		log_warnx("the queue figures' own connection: %s; they are "
			  "read on the worker's connection until it can be "
			  "made (next attempt in %lld s)",
			  why, (long long)(wait / 1000));
	else
		log_debug("the queue figures' own connection: %s (next "
			  "attempt in %lld s)",
			  why, (long long)(wait / 1000));
}

static void
on_mon_lost(void *arg, const char *why)
{
	struct worker *w = arg;
	/* Freed by the next round: this is one of its callbacks. */
	w->mon_lost = 1;
	char *msg = xstrdup(why);
	msg[strcspn(msg, "\n")] = '\0';
	mon_failed(w, msg);
	free(msg);
}

static void round_due(struct worker *w);

static void
on_mon_connected(void *arg, struct dbev *d, const char *err)
{
	struct worker *w = arg;
	w->mon_connecting = NULL;
	if (!d) {
		mon_failed(w, err);
		return;
	}
	if (w->mon_failures)
		log_info("the queue figures have their own connection again");
	w->mon_failures = 0;
	w->mon = d;
	/* No answer within a lease: the path is dead, as the worker's. */
	dbev_set_timeout(d, w->cfg->lease_ms);
	monitor_session(d);
	round_due(w);
}

/* Starts making the monitor connection; 0, or -1 (failed, logged). */
static int
mon_connect(struct worker *w)
{
	struct dbev_hooks hooks = {NULL, on_mon_lost, w};
	char *err = NULL;
	w->mon_connecting =
		dbev_connect(w->loop, w->cfg->conninfo, "pgjobd monitor",
			     MON_CONNECT_MS, &hooks, on_mon_connected, w, &err);
	if (w->mon_connecting)
		return 0;
	mon_failed(w, err);
	free(err);
	return -1;
}

/* The connection this round's reads go on, or NULL: none this round. */
static struct dbev *
round_conn(struct worker *w)
{
	if (w->mon_lost) {
		dbev_free(w->mon);
		w->mon = NULL;
		w->mon_lost = 0;
	}
	if (w->mon)
		return w->mon;
	if (w->mon_connecting)
		return NULL; /* on_mon_connected() starts the round */
	if (util_now_ms() >= w->mon_retry_ms && mon_connect(w) == 0)
		return NULL;
	return w->db;
}

/* One worker per instance reads them: the supervisor names it. */
static int
is_reader(const struct worker *w)
{
	return !w->retiring && __atomic_load_n(&w->stats->depth_reader,
					       __ATOMIC_RELAXED) == w->index;
}

/* A round of reads if one is due and none is in flight. */
static void
round_due(struct worker *w)
{
	if (!is_reader(w) || w->reads_on || util_now_ms() < w->depth_next_ms)
		return;
	struct dbev *d = round_conn(w);
	if (d)
		send_round(w, d);
}

void
monitor_on_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct worker *w = t->data;
	if (is_reader(w))
		round_due(w);
	else
		monitor_close(w);
}

void
monitor_close(struct worker *w)
{
	dbev_connect_cancel(w->mon_connecting);
	w->mon_connecting = NULL;
	/* A round in flight on it is answered (with NULL) as it closes. */
	dbev_free(w->mon);
	w->mon = NULL;
	w->mon_lost = 0;
}
