/*
 * tasks: leased tasks.  A task's partitions are leases named
 * "task:NAME:N"; each holder runs the task's command for its partition
 * with the lease's fencing token, restarts it (with backoff) when it ends
 * on its own, and kills it at once when the lease cannot be renewed.
 *
 * A worker takes partitions up to its share, ceil(partitions / live
 * workers that run the task with the same partition count), lowest free
 * first, one acquire at a time; a worker holding more than its share
 * (another worker joined) stops the extra commands, highest first, and
 * gives their leases back as they exit.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/backoff.h"
#include "common/config.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"
#include "db/lease.h"
#include "handlers/handler.h"
#include "worker/duties.h"

/* One task partition this worker holds. */
struct part {
	struct duty *d;
	const struct task_conf *task;
	int partition;
	int64_t token;
	char *lease;
	struct handler_run *run;
	int releasing; /* stopping to give the lease back */
	int lost;      /* renewal failed: stop, the lease is gone */
	int restarts;
	ev_timer restart;
	struct part *next;
};

static void part_start(struct part *p);

static void
part_free(struct part *p)
{
	struct duty *d = p->d;
	for (struct part **pp = &d->parts; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	ev_timer_stop(d->loop, &p->restart);
	free(p->lease);
	free(p);
}

static void
on_part_exit(void *arg, struct handler_result *res)
{
	struct part *p = arg;
	struct duty *d = p->d;
	p->run = NULL;
	if (p->lost || p->releasing) {
		if (p->releasing && !p->lost && d->db)
			lease_release(d->db, p->lease, d->holder, p->token,
				      NULL, NULL);
		log_info("task %s partition %d: %s", p->task->name,
			 p->partition,
			 p->lost ? "stopped (lease lost)" : "released");
		part_free(p);
		return;
	}
	/* It ended on its own: run it again, after a backoff. */
	double delay = (double)backoff_job_delay(1000, 60000, ++p->restarts,
						 backoff_random()) /
		       1000.;
	log_warnx("task %s partition %d exited (%s); again in %.1fs",
		  p->task->name, p->partition,
		  res->error ? res->error : "status 0", delay);
	ev_timer_set(&p->restart, delay, 0.);
	ev_timer_start(d->loop, &p->restart);
}

static void
on_part_restart(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct part *p = t->data;
	if (!p->lost && !p->releasing)
		part_start(p);
}

static void
part_start(struct part *p)
{
	log_info("task %s partition %d: starting (fencing token %lld)",
		 p->task->name, p->partition, (long long)p->token);
	p->run = handler_start_task(p->d->loop, p->task, p->partition, p->token,
				    p->d->slot, on_part_exit, p);
}

static struct part *
part_new(struct duty *d, const struct task_conf *t, int partition,
	 int64_t token)
{
	struct part *p = xcalloc(1, sizeof(*p));
	p->d = d;
	p->task = t;
	p->partition = partition;
	p->token = token;
	p->lease = xasprintf("task:%s:%d", t->name, partition);
	ev_timer_init(&p->restart, on_part_restart, 0., 0.);
	p->restart.data = p;
	p->next = d->parts;
	d->parts = p;
	return p;
}

static struct part *
part_find(struct duty *d, const struct task_conf *t, int partition)
{
	for (struct part *p = d->parts; p; p = p->next)
		if (p->task == t && p->partition == partition)
			return p;
	return NULL;
}

static int
held(struct duty *d, const struct task_conf *t)
{
	int n = 0;
	for (struct part *p = d->parts; p; p = p->next)
		n += p->task == t && !p->releasing && !p->lost;
	return n;
}

static void
part_stop(struct part *p, int lost)
{
	if (lost)
		p->lost = 1;
	else
		p->releasing = 1;
	ev_timer_stop(p->d->loop, &p->restart);
	if (p->run)
		handler_stop(p->run, lost ? "task lease lost" : "rebalancing");
	else if (!lost && p->d->db)
		on_part_exit(p,
			     &(struct handler_result){.outcome = OUTCOME_DONE,
						      .retry_in_ms = -1});
	else
		part_free(p);
}

/* An acquire in flight: which partition, and the share it works to. */
struct acquire {
	struct duty *d;
	const struct task_conf *task;
	int partition;
	int target;
};

static void acquire_next(struct duty *d, const struct task_conf *t, int from,
			 int target);

static void
on_acquired(void *arg, const struct db_status *st, int64_t token)
{
	struct acquire *a = arg;
	struct duty *d = a->d;
	d->acquiring = 0;
	if (token && d->stopping && d->db) {
		/* Answered after the stop began (it waited for a row lock, or
		 * for the statements ahead of it): nothing will run under it,
		 * so give it back at once, as the other duties do. */
		char *name =
			xasprintf("task:%s:%d", a->task->name, a->partition);
		lease_release(d->db, name, d->holder, token, NULL, NULL);
		free(name);
	} else if (token && d->db)
		part_start(part_new(d, a->task, a->partition, token));
	if (st->answered && d->db && !d->stopping)
		acquire_next(d, a->task, a->partition + 1, a->target);
	free(a);
}

/* Tries partitions from `from` on, one at a time, up to target held. */
static void
acquire_next(struct duty *d, const struct task_conf *t, int from, int target)
{
	for (int p = from; p < t->partitions; p++) {
		if (held(d, t) >= target)
			return;
		if (part_find(d, t, p))
			continue;
		struct acquire *a = xcalloc(1, sizeof(*a));
		*a = (struct acquire){d, t, p, target};
		char *name = xasprintf("task:%s:%d", t->name, p);
		d->acquiring = 1;
		lease_acquire(d->db, name, d->holder, duty_lease_ms(d),
			      on_acquired, a);
		free(name);
		return;
	}
}

/* Stops the partitions beyond target, highest first. */
static void
shed(struct duty *d, const struct task_conf *t, int target)
{
	for (int p = t->partitions - 1; p >= 0 && held(d, t) > target; p--) {
		struct part *x = part_find(d, t, p);
		if (x && !x->releasing && !x->lost) {
			log_info("task %s partition %d: more than my share "
				 "(%d), releasing it",
				 t->name, p, target);
			part_stop(x, 0);
		}
	}
}

static void
on_renewed(void *arg, const struct db_status *st, const char *const *renewed,
	   size_t n)
{
	struct duty *d = arg;
	if (st->error != DB_OK)
		return;
	struct part *next;
	for (struct part *p = d->parts; p; p = next) {
		next = p->next;
		if (p->releasing || p->lost)
			continue;
		int ok = 0;
		for (size_t i = 0; i < n && !ok; i++)
			ok = strcmp(renewed[i], p->lease) == 0;
		if (!ok) {
			log_warnx("task %s partition %d: lease lost; killing "
				  "the command",
				  p->task->name, p->partition);
			part_stop(p, 1);
		}
	}
}

/* Per task of the config, the live workers that run it. */
static void
on_live(void *arg, const struct db_status *st, const long *live, size_t n)
{
	struct duty *d = arg;
	if (st->error != DB_OK || d->stopping || !d->db)
		return;
	for (size_t i = 0; i < n && i < d->cfg->ntasks; i++) {
		/* Not yet counted itself (its row is being written). */
		long k = live[i] < 1 ? 1 : live[i];
		const struct task_conf *t = &d->cfg->tasks[i];
		int target = (int)((t->partitions + k - 1) / k);
		shed(d, t, target);
		if (!d->acquiring)
			acquire_next(d, t, 0, target);
	}
}

void
tasks_period(struct duty *d)
{
	size_t n = 0;
	for (struct part *p = d->parts; p; p = p->next)
		n++;
	const char **names = xcalloc(n + 1, sizeof(char *));
	int64_t *tokens = xcalloc(n + 1, sizeof(int64_t));
	n = 0;
	for (struct part *p = d->parts; p; p = p->next) {
		if (p->releasing || p->lost)
			continue;
		names[n] = p->lease;
		tokens[n++] = p->token;
	}
	if (n > 0)
		lease_renew_many(d->db, names, tokens, n, d->holder,
				 duty_lease_ms(d), on_renewed, d);
	free(names);
	free(tokens);
	/* The live workers that run each task (lease_task_workers()). */
	lease_task_workers(d->db, d->cfg, duty_lease_ms(d), on_live, d);
}

void
tasks_stop(struct duty *d)
{
	struct part *p = d->parts, *next;
	for (; p; p = next) {
		next = p->next;
		if (!p->releasing && !p->lost)
			part_stop(p, 0);
	}
}

void
tasks_lost(struct duty *d)
{
	d->acquiring = 0;
	struct part *p = d->parts, *next;
	for (; p; p = next) {
		next = p->next;
		if (!p->lost)
			part_stop(p, 1); /* frees it now if nothing runs */
	}
}

int
tasks_running(const struct duty *d)
{
	int n = 0;
	for (struct part *p = d->parts; p; p = p->next)
		n += p->run != NULL;
	return n;
}

void
tasks_free(struct duty *d)
{
	while (d->parts)
		part_free(d->parts);
}
