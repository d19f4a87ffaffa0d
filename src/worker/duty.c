/*
 * duty: the scheduler, pruning, leased tasks and the health guard, each
 * behind a lease row.
 *
 * A timer ticks every second.  Every period (a third of a lease) the duty
 * renews what it holds and tries to take what it should: the scheduler and
 * pruning leases when free, and task partitions up to its share.
 *
 * What a worker can do is in its row of pgjob.workers, written at each
 * (re)connect: its tasks with their partition counts, and its schedules'
 * definitions.  The share of a task is ceil(partitions / live workers that
 * run the task with the same partition count), so every partition of every
 * live config has a taker whatever the other configs hold.  The scheduler
 * lease's holder ticks every schedule that a live worker defines, its own
 * config's or not: it only enqueues.  See duties.h for the files.
 */
#include "worker/duty.h"

#include <stdlib.h>
#include <unistd.h>

#include "common/config.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"
#include "db/lease.h"
#include "worker/duties.h"

/* --- what this worker can do, in its row of pgjob.workers -------------- */

static void
on_published(void *arg, const struct db_status *st, const char *defined_at)
{
	struct duty *d = arg;
	if (!st->answered)
		return; /* connection lost: written again on reconnect */
	if (defined_at) {
		if (!d->defined_at)
			d->defined_at = xstrdup(defined_at);
		return;
	}
	d->published = 0; /* the next period tries again */
	log_warnx("writing this worker's tasks and schedules: %s; trying again "
		  "in %.1fs",
		  st->error == DB_OK ? "this worker has no row in pgjob.workers"
				     : st->text,
		  (double)d->period_ms / 1000.);
}

/*
 * Writes what this worker can do into its row (lease_worker_publish()):
 * nothing once it is stopping, so that the others count it out of the task
 * shares and the schedules at once, not when its last job has ended.
 */
static void
publish(struct duty *d)
{
	d->published = 1; /* or in flight */
	lease_worker_publish(d->db, d->slot, d->pid,
			     d->stopping ? NULL : d->cfg, d->defined_at,
			     on_published, d);
}

/* --- the tick ---------------------------------------------------------- */

static void
on_tick(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct duty *d = t->data;
	int64_t now = util_now_ms();
	if (!d->db || d->stopping)
		return;
	if (now - d->last_period >= d->period_ms) {
		d->last_period = now;
		if (!d->published)
			publish(d);
		/* Every worker may hold it: the holder ticks every live
		 * worker's schedules, not only its own. */
		scheduler_period(d);
		pruning_period(d);
		health_period(d);
		if (d->cfg->ntasks > 0)
			tasks_period(d);
	}
	scheduler_round(d);
	health_round(d);
}

struct duty *
duty_new(struct ev_loop *loop, const struct config *cfg, const char *holder,
	 int64_t period_ms)
{
	struct duty *d = xcalloc(1, sizeof(*d));
	d->loop = loop;
	d->cfg = cfg;
	d->holder = xstrdup(holder);
	d->pid = (int)getpid();
	d->period_ms = period_ms;
	d->last_period = util_now_ms() - period_ms;
	d->last_prune = 0; /* the first period prunes */
	ev_timer_init(&d->tick, on_tick, 0.2, 1.);
	d->tick.data = d;
	ev_timer_start(loop, &d->tick);
	return d;
}

void
duty_set_db(struct duty *d, struct dbev *db, int slot)
{
	d->db = db;
	d->slot = slot;
	if (db) {
		d->last_period = util_now_ms() - d->period_ms;
		/* Registering the row cleared what it said. */
		publish(d);
		return;
	}
	/* Without a connection no lease can be renewed: stop everything. */
	d->published = 0;
	d->prune_token = 0;
	scheduler_forget(d);
	health_forget(d);
	tasks_lost(d);
}

void
duty_stop(struct duty *d)
{
	d->stopping = 1;
	tasks_stop(d);
	scheduler_stop(d);
	pruning_stop(d);
	health_stop(d);
	if (d->db)
		publish(d); /* withdraws */
}

void
duty_set_stats(struct duty *d, struct stats *stats)
{
	d->stats = stats;
}

int
duty_running(const struct duty *d)
{
	return tasks_running(d);
}

void
duty_free(struct duty *d)
{
	if (!d)
		return;
	ev_timer_stop(d->loop, &d->tick);
	/* The loop is about to end: no command may outlive the worker. */
	tasks_free(d);
	scheduler_free(d);
	health_free(d);
	free(d->defined_at);
	free(d->holder);
	free(d);
}
