/*
 * monitor: what the depth reader (one worker per instance, named by the
 * supervisor) reads for /metrics besides the queue depths: dead jobs per
 * queue, and the schedules' last and next ticks.  Both go to the shared
 * stats area, which the supervisor renders (common/stats.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cron.h"
#include "common/stats.h"
#include "common/util.h"
#include "db/db.h"
#include "db/schedule.h"
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

static void
on_dead(void *arg, const struct db_status *st, const struct queue_dead *q,
	size_t n)
{
	struct worker *w = arg;
	struct stats *s = w->stats;
	if (!st->answered || !conn_ok(w, st, "counting dead jobs"))
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

/* The schedule rows of a scheduler round (the same statement): those that
 * have ticked, with the next tick after the last one by their cron. */
static void
on_ticks(void *arg, const struct db_status *st, const struct schedule_row *rows,
	 size_t n)
{
	struct worker *w = arg;
	struct stats *s = w->stats;
	uint32_t m = 0;
	if (!st->answered || !conn_ok(w, st, "reading schedule ticks"))
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

void
monitor_read(struct worker *w)
{
	if (!w->db)
		return;
	uint64_t dead = dead_here(w->stats);
	if (w->dead_rounds == 0 || w->dead_rounds >= DEAD_EVERY ||
	    (dead != w->dead_seen && w->dead_rounds >= DEAD_AFTER)) {
		queue_dead(w->db, STATS_MAX_QUEUES, on_dead, w);
		w->dead_seen = dead;
		w->dead_rounds = 0;
	}
	w->dead_rounds++;
	schedule_round(w->db, w->cfg->lease_ms, on_ticks, w);
}
