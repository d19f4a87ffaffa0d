/*
 * duty: the scheduler, pruning and leased tasks, each behind a lease row.
 *
 * A timer ticks every second.  Every period (a third of a lease) the duty
 * renews what it holds and tries to take what it should: the scheduler and
 * pruning leases when free, and task partitions up to its share,
 * ceil(partitions / live workers).  A worker holding more than its share
 * (another worker joined) stops the extra commands and releases their
 * leases; a worker that cannot renew kills the command at once.
 *
 * All state here is about leases this worker believes it holds; the
 * database decides, and a stale belief costs at most one refused write.
 */
#include "duty.h"

#include <ev.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backoff.h"
#include "config.h"
#include "cron.h"
#include "db.h"
#include "dbev.h"
#include "failpoint.h"
#include "handler.h"
#include "lease.h"
#include "log.h"
#include "util.h"

#define SCHEDULER_LEASE "pgjob:scheduler"
#define PRUNE_LEASE	"pgjob:prune"
#define PRUNE_EVERY_MS	60000
#define PRUNE_BATCH	"10000"

/* One task partition this worker holds. */
struct part {
	struct duty *d;
	const struct task_conf *task;
	int partition;
	int64_t token;
	char *lease;
	struct handler_conf hc; /* the task's command as an exec handler */
	struct job job;
	char *env[4];
	struct handler_run *run;
	int releasing; /* stopping to give the lease back */
	int lost;      /* renewal failed: stop, the lease is gone */
	int restarts;
	ev_timer restart;
	struct part *next;
};

struct duty {
	struct ev_loop *loop;
	const struct config *cfg;
	char *holder;
	int64_t period_ms;
	struct dbev *db;
	int slot;
	ev_timer tick;
	int64_t last_period;
	struct cron **crons;
	int64_t sched_token;
	int sched_busy;	   /* a round of the scheduler is in flight */
	int sched_pending; /* its tick enqueues not yet answered */
	int64_t prune_token;
	int64_t last_prune;
	struct part *parts;
	int acquiring; /* a task partition acquire is in flight */
	int stopping;
};

static int64_t
lease_ms(const struct duty *d)
{
	return 3 * d->period_ms;
}

static int
got_row(PGresult *res)
{
	return res && PQresultStatus(res) == PGRES_TUPLES_OK &&
	       PQntuples(res) > 0;
}

static int64_t
row_token(PGresult *res)
{
	return strtoll(PQgetvalue(res, 0, 0), NULL, 10);
}

static void
on_ignore(void *arg, PGresult *res)
{
}

/* --- leased tasks ------------------------------------------------------ */

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
	for (int i = 0; p->env[i]; i++)
		free(p->env[i]);
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
				      on_ignore, NULL);
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
	log_warn("task %s partition %d exited (%s); again in %.1fs",
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
	for (int i = 0; p->env[i]; i++)
		free(p->env[i]);
	p->env[0] = xasprintf("PGJOB_TASK=%s", p->task->name);
	p->env[1] = xasprintf("PGJOB_PARTITION=%d", p->partition);
	p->env[2] = xasprintf("PGJOB_FENCING_TOKEN=%lld", (long long)p->token);
	p->env[3] = NULL;
	p->job.extra_env = p->env;
	log_info("task %s partition %d: starting (fencing token %lld)",
		 p->task->name, p->partition, (long long)p->token);
	p->run =
		handler_start(p->d->loop, &p->job, p->d->slot, on_part_exit, p);
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
	p->hc.kind = t->name;
	p->hc.type = HANDLER_EXEC;
	p->hc.queue = "";
	p->hc.command = t->command;
	p->hc.timeout_ms = 0; /* runs until stopped */
	p->job.kind = t->name;
	p->job.queue = "";
	p->job.payload = "{}";
	p->job.lease_token = token;
	p->job.attempt = 1;
	p->job.handler = &p->hc;
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
		on_part_exit(p, &(struct handler_result){0, NULL, NULL, -1});
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
on_acquired(void *arg, PGresult *res)
{
	struct acquire *a = arg;
	struct duty *d = a->d;
	d->acquiring = 0;
	if (got_row(res) && !d->stopping && d->db) {
		struct part *p =
			part_new(d, a->task, a->partition, row_token(res));
		part_start(p);
	}
	if (res && d->db && !d->stopping)
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
		lease_acquire(d->db, name, d->holder, lease_ms(d), on_acquired,
			      a);
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
on_part_renewed(void *arg, PGresult *res)
{
	struct duty *d = arg;
	if (!res)
		return;
	for (struct part *p = d->parts; p; p = p->next) {
		if (p->releasing || p->lost)
			continue;
		int ok = 0;
		for (int i = 0; res && i < PQntuples(res) && !ok; i++)
			ok = strcmp(PQgetvalue(res, i, 0), p->lease) == 0;
		if (!ok && PQresultStatus(res) == PGRES_TUPLES_OK) {
			log_warn("task %s partition %d: lease lost; killing "
				 "the command",
				 p->task->name, p->partition);
			part_stop(p, 1);
		}
	}
}

static void
on_live(void *arg, PGresult *res)
{
	struct duty *d = arg;
	if (!got_row(res) || d->stopping || !d->db)
		return;
	long live = atol(PQgetvalue(res, 0, 0));
	if (live < 1)
		live = 1;
	for (size_t i = 0; i < d->cfg->ntasks; i++) {
		const struct task_conf *t = &d->cfg->tasks[i];
		int target = (int)((t->partitions + live - 1) / live);
		shed(d, t, target);
		if (!d->acquiring)
			acquire_next(d, t, 0, target);
	}
}

static void
tasks_period(struct duty *d)
{
	struct buf names = {0}, tokens = {0};
	int n = 0;
	buf_append(&names, "{", 1);
	buf_append(&tokens, "{", 1);
	for (struct part *p = d->parts; p; p = p->next) {
		if (p->releasing || p->lost)
			continue;
		buf_appendf(&names, "%s\"%s\"", n ? "," : "", p->lease);
		buf_appendf(&tokens, "%s%lld", n ? "," : "",
			    (long long)p->token);
		n++;
	}
	buf_append(&names, "}", 1);
	buf_append(&tokens, "}", 1);
	char ms[24], window[24];
	snprintf(ms, sizeof(ms), "%lld", (long long)lease_ms(d));
	snprintf(window, sizeof(window), "%lld", (long long)lease_ms(d));
	if (n > 0) {
		const char *p[] = {names.data, tokens.data, ms, d->holder};
		dbev_failpoints(d->db, 0, FP_TASK_RENEW);
		dbev_send(
			d->db,
			"update pgjob.leases l"
			" set expires_at = now() + $3::bigint * interval '1 ms'"
			" from unnest($1::text[], $2::bigint[]) r(name, token)"
			" where l.name = r.name and l.token = r.token"
			"  and l.holder = $4 and l.expires_at >= now()"
			" returning l.name",
			4, p, on_part_renewed, d);
	}
	/* Live workers: a heartbeat within one lease. */
	const char *p2[] = {window};
	dbev_send(d->db,
		  "select count(*) from pgjob.workers"
		  " where heartbeat_at > now() - $1::bigint * interval '1 ms'",
		  1, p2, on_live, d);
	buf_free(&names);
	buf_free(&tokens);
}

/* --- the scheduler and pruning ------------------------------------------ */

static void
on_sched_lease(void *arg, PGresult *res)
{
	struct duty *d = arg;
	int64_t had = d->sched_token;
	d->sched_token = got_row(res) ? row_token(res) : 0;
	if (d->sched_token && d->stopping) {
		/* Taken while stopping: give it back at once. */
		if (d->db)
			lease_release(d->db, SCHEDULER_LEASE, d->holder,
				      d->sched_token, on_ignore, NULL);
		d->sched_token = 0;
		return;
	}
	if (d->sched_token && !had)
		log_info("holding the scheduler lease (token %lld)",
			 (long long)d->sched_token);
	else if (!d->sched_token && had)
		log_warn("lost the scheduler lease");
}

static void
scheduler_period(struct duty *d)
{
	if (d->sched_token)
		lease_renew(d->db, SCHEDULER_LEASE, d->holder, d->sched_token,
			    lease_ms(d), on_sched_lease, d);
	else
		lease_acquire(d->db, SCHEDULER_LEASE, d->holder, lease_ms(d),
			      on_sched_lease, d);
}

/* One tick's enqueue, fenced by the scheduler token. */
struct tick {
	struct duty *d;
};

static void
on_ticked(void *arg, PGresult **res, int n)
{
	struct tick *t = arg;
	struct duty *d = t->d;
	if (res[0] && PQresultStatus(res[0]) == PGRES_FATAL_ERROR) {
		char *e = db_error_text(NULL, res[0]);
		log_warn("scheduler: %s", e);
		free(e);
		d->sched_token = 0; /* fenced out: another worker has it */
	} else if (res[1] && PQresultStatus(res[1]) == PGRES_FATAL_ERROR) {
		char *e = db_error_text(NULL, res[1]);
		log_warn("scheduler: enqueueing a tick failed: %s", e);
		free(e);
	}
	if (d->sched_pending > 0 && --d->sched_pending == 0)
		d->sched_busy = 0;
	free(t);
}

/* Advances schedule s to tick and enqueues its job, in one transaction. */
static void
enqueue_tick(struct duty *d, const struct schedule_conf *s, int64_t tick)
{
	char when[CRON_TIME_LEN], epoch[24], token[24];
	cron_format_utc(tick, when);
	snprintf(epoch, sizeof(epoch), "%lld", (long long)tick);
	snprintf(token, sizeof(token), "%lld", (long long)d->sched_token);
	char *key = xasprintf("schedule:%s:%s", s->name, when);
	const struct handler_conf *h = config_handler(d->cfg, s->kind);
	const char *queue = s->queue ? s->queue : h ? h->queue : "default";
	const char *pf[] = {SCHEDULER_LEASE, token};
	const char *pe[] = {s->name, epoch, s->kind, s->payload, queue, key};
	struct dbev_stmt st[] = {
		{"select pgjob.fence($1, $2)", 2, NULL, pf},
		{"with s as (update pgjob.schedules"
		 "   set last_tick = to_timestamp($2::bigint)"
		 "   where name = $1 and last_tick < to_timestamp($2::bigint)"
		 "   returning 1)"
		 " select pgjob.enqueue($3, $4::jsonb, queue => $5,"
		 "  unique_key => $6) from s",
		 6, NULL, pe},
	};
	struct tick *t = xcalloc(1, sizeof(*t));
	t->d = d;
	d->sched_pending++;
	log_info("schedule %s: enqueueing the tick of %s", s->name, when);
	dbev_failpoints(d->db, FP_SCHEDULE_TICK, 0);
	dbev_send_group(d->db, st, 2, on_ticked, t);
	free(key);
}

/* Due ticks of one schedule after last, up to now (Unix seconds). */
static int
due_ticks(struct duty *d, size_t i, int64_t last, int64_t now, int64_t *ticks,
	  int max)
{
	const struct schedule_conf *s = &d->cfg->schedules[i];
	int n = 0;
	int64_t t = last, next;
	while (d->crons[i] &&
	       cron_next(d->crons[i], s->timezone, t, &next) == 0 &&
	       next <= now) {
		if (s->catch_up_all && n < max)
			ticks[n++] = next;
		else if (!s->catch_up_all)
			ticks[(n = 1) - 1] = next; /* keep only the latest */
		t = next;
	}
	return n;
}

static void
on_schedules(void *arg, PGresult *res)
{
	struct duty *d = arg;
	int64_t ticks[100];
	int sent = 0;

	if (!res || PQresultStatus(res) != PGRES_TUPLES_OK || !d->db) {
		d->sched_busy = 0;
		return;
	}
	for (int r = 0; r < PQntuples(res); r++) {
		size_t i = (size_t)atoi(PQgetvalue(res, r, 0)) - 1;
		const struct schedule_conf *s = &d->cfg->schedules[i];
		int64_t now = strtoll(PQgetvalue(res, r, 2), NULL, 10);
		if (PQgetisnull(res, r, 1)) {
			/* New schedule: ticks count from now on. */
			char e[24];
			snprintf(e, sizeof(e), "%lld", (long long)now);
			const char *p[] = {s->name, e};
			dbev_send(
				d->db,
				"insert into pgjob.schedules (name, last_tick)"
				" values ($1, to_timestamp($2::bigint))"
				" on conflict (name) do nothing",
				2, p, on_ignore, NULL);
			continue;
		}
		int64_t last = strtoll(PQgetvalue(res, r, 1), NULL, 10);
		int n = due_ticks(d, i, last, now, ticks, 100);
		for (int k = 0; k < n; k++, sent++)
			enqueue_tick(d, s, ticks[k]);
	}
	if (sent == 0)
		d->sched_busy = 0;
}

static void
schedule_run(struct duty *d)
{
	d->sched_busy = 1;
	struct buf names = {0};
	buf_append(&names, "{", 1);
	for (size_t i = 0; i < d->cfg->nschedules; i++)
		buf_appendf(&names, "%s\"%s\"", i ? "," : "",
			    d->cfg->schedules[i].name);
	buf_append(&names, "}", 1);
	const char *p[] = {names.data};
	dbev_send(d->db,
		  "select n.i, extract(epoch from s.last_tick)::bigint,"
		  "  extract(epoch from now())::bigint"
		  " from unnest($1::text[]) with ordinality as n(name, i)"
		  " left join pgjob.schedules s on s.name = n.name",
		  1, p, on_schedules, d);
	buf_free(&names);
}

static void
on_pruned(void *arg, PGresult *res)
{
	if (got_row(res) && atol(PQgetvalue(res, 0, 0)) > 0) {
		log_info("pruned %s finished jobs", PQgetvalue(res, 0, 0));
	} else if (res && PQresultStatus(res) != PGRES_TUPLES_OK) {
		char *e = db_error_text(NULL, res);
		log_warn("pruning failed: %s", e);
		free(e);
	}
}

static void
on_pruned_keys(void *arg, PGresult *res)
{
	if (got_row(res) && atol(PQgetvalue(res, 0, 0)) > 0)
		log_info("pruned %s expired request keys",
			 PQgetvalue(res, 0, 0));
	else if (res && PQresultStatus(res) != PGRES_TUPLES_OK)
		log_warn("pruning request keys failed: %s",
			 PQresultErrorMessage(res));
}

static void
on_prune_lease(void *arg, PGresult *res)
{
	struct duty *d = arg;
	d->prune_token = got_row(res) ? row_token(res) : 0;
	if (d->prune_token && d->stopping) {
		/* Taken while stopping: give it back at once. */
		if (d->db)
			lease_release(d->db, PRUNE_LEASE, d->holder,
				      d->prune_token, on_ignore, NULL);
		d->prune_token = 0;
	}
	if (!d->prune_token || !d->db)
		return;
	char ms[24];
	snprintf(ms, sizeof(ms), "%lld", (long long)d->cfg->retention_ms);
	const char *p[] = {ms};
	dbev_send(d->db,
		  "with d as (delete from pgjob.jobs where id in ("
		  "  select id from pgjob.jobs"
		  "   where state in ('done', 'dead', 'cancelled')"
		  "    and finished_at < now() - $1::bigint * interval '1 ms'"
		  "   order by finished_at limit " PRUNE_BATCH ") returning 1)"
		  " select count(*) from d",
		  1, p, on_pruned, d);
	/* Expired idempotency keys (docs/idempotency.md), one batch. */
	dbev_send(d->db, "select pgjob.prune_request_keys(" PRUNE_BATCH ")", 0,
		  NULL, on_pruned_keys, d);
	/* Rows of workers gone for a day go too. */
	dbev_send(d->db,
		  "delete from pgjob.workers"
		  " where heartbeat_at < now() - interval '1 day'",
		  0, NULL, on_ignore, NULL);
}

static void
prune_period(struct duty *d)
{
	if (d->prune_token)
		lease_renew(d->db, PRUNE_LEASE, d->holder, d->prune_token,
			    2 * PRUNE_EVERY_MS, on_prune_lease, d);
	else
		lease_acquire(d->db, PRUNE_LEASE, d->holder, 2 * PRUNE_EVERY_MS,
			      on_prune_lease, d);
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
		if (d->cfg->nschedules > 0)
			scheduler_period(d);
		if (now - d->last_prune >= PRUNE_EVERY_MS) {
			d->last_prune = now;
			prune_period(d);
		}
		if (d->cfg->ntasks > 0)
			tasks_period(d);
	}
	if (d->sched_token && !d->sched_busy)
		schedule_run(d);
}

struct duty *
duty_new(struct ev_loop *loop, const struct config *cfg, const char *holder,
	 int64_t period_ms)
{
	struct duty *d = xcalloc(1, sizeof(*d));
	d->loop = loop;
	d->cfg = cfg;
	d->holder = xstrdup(holder);
	d->period_ms = period_ms;
	d->last_period = util_now_ms() - period_ms;
	d->last_prune = util_now_ms() - PRUNE_EVERY_MS;
	d->crons = xcalloc(cfg->nschedules + 1, sizeof(struct cron *));
	for (size_t i = 0; i < cfg->nschedules; i++) {
		char *err = NULL;
		/* The config loader validated it already. */
		d->crons[i] = cron_parse(cfg->schedules[i].cron, &err);
		free(err);
	}
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
		return;
	}
	/* Without a connection no lease can be renewed: stop everything. */
	d->sched_token = d->prune_token = 0;
	d->sched_busy = d->acquiring = d->sched_pending = 0;
	struct part *p = d->parts, *next;
	for (; p; p = next) {
		next = p->next;
		if (!p->lost)
			part_stop(p, 1); /* frees it now if nothing runs */
	}
}

void
duty_stop(struct duty *d)
{
	d->stopping = 1;
	struct part *p = d->parts, *next;
	for (; p; p = next) {
		next = p->next;
		if (!p->releasing && !p->lost)
			part_stop(p, 0);
	}
	if (d->sched_token && d->db)
		lease_release(d->db, SCHEDULER_LEASE, d->holder, d->sched_token,
			      on_ignore, NULL);
	if (d->prune_token && d->db)
		lease_release(d->db, PRUNE_LEASE, d->holder, d->prune_token,
			      on_ignore, NULL);
	d->sched_token = d->prune_token = 0;
}

int
duty_running(const struct duty *d)
{
	int n = 0;
	for (struct part *p = d->parts; p; p = p->next)
		n += p->run != NULL;
	return n;
}

void
duty_free(struct duty *d)
{
	if (!d)
		return;
	ev_timer_stop(d->loop, &d->tick);
	/* The loop is about to end: no command may outlive the worker. */
	while (d->parts)
		part_free(d->parts);
	for (size_t i = 0; i < d->cfg->nschedules; i++)
		cron_free(d->crons[i]);
	free(d->crons);
	free(d->holder);
	free(d);
}
