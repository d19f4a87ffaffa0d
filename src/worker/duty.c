/*
 * duty: the scheduler, pruning and leased tasks, each behind a lease row.
 *
 * A timer ticks every second.  Every period (a third of a lease) the duty
 * renews what it holds and tries to take what it should: the scheduler and
 * pruning leases when free, and task partitions up to its share.
 *
 * What a worker can do is in its row of pgjob.workers, written at each
 * (re)connect: its tasks with their partition counts, and its schedules'
 * definitions.  The share of a task is ceil(partitions / live workers that
 * run the task with the same partition count), so every partition of every
 * live config has a taker whatever the other configs hold.  A worker
 * holding more than its share (another worker joined) stops the extra
 * commands and releases their leases; a worker that cannot renew kills the
 * command at once.  The scheduler lease's holder ticks every schedule that
 * a live worker defines, its own config's or not: it only enqueues.
 *
 * All state here is about leases this worker believes it holds; the
 * database decides, and a stale belief costs at most one refused write.
 */
#include "worker/duty.h"

#include <ev.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/backoff.h"
#include "common/config.h"
#include "common/cron.h"
#include "db/db.h"
#include "db/dbev.h"
#include "common/failpoint.h"
#include "handlers/handler.h"
#include "db/lease.h"
#include "common/log.h"
#include "db/queue.h"
#include "common/util.h"

#define SCHEDULER_LEASE "pgjob:scheduler"
#define PRUNE_LEASE	"pgjob:prune"
#define PRUNE_EVERY_MS	60000
#define PRUNE_BATCH	"10000"
#define TICKS_PER_ROUND 100

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

/* Lines logged once while their cause lasts (see note_new()). */
struct notes {
	char **v;
	size_t n;
};

struct duty {
	struct ev_loop *loop;
	const struct config *cfg;
	char *holder;
	int pid;
	int64_t period_ms;
	struct dbev *db;
	int slot;
	ev_timer tick;
	int64_t last_period;
	int published;	  /* this worker's row says what it can do */
	char *defined_at; /* when it first said so (UTC, database clock) */
	struct notes seen, noted;
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

static void
notes_free(struct notes *n)
{
	for (size_t i = 0; i < n->n; i++)
		free(n->v[i]);
	free(n->v);
	*n = (struct notes){0};
}

/*
 * Whether a line about key should be logged in this scheduler round: only
 * when the previous round did not see the same key, so a lasting condition
 * is logged once, not every second, and again if it comes back.
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

/* --- what this worker can do, in its row of pgjob.workers -------------- */

static void
on_published(void *arg, PGresult *res)
{
	struct duty *d = arg;
	if (!res)
		return; /* connection lost: written again on reconnect */
	if (got_row(res)) {
		if (!d->defined_at)
			d->defined_at = xstrdup(PQgetvalue(res, 0, 0));
		return;
	}
	d->published = 0; /* the next period tries again */
	char *e = PQresultStatus(res) == PGRES_TUPLES_OK
			  ? xstrdup("this worker has no row in pgjob.workers")
			  : db_error_text(NULL, res);
	log_warn("writing this worker's tasks and schedules: %s; trying again "
		 "in %.1fs",
		 e, (double)d->period_ms / 1000.);
	free(e);
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
	p->hc.run_as = t->run_as;
	p->job.kind = t->name;
	/* Its log lines name the task and partition, not a job. */
	p->job.task = t->name;
	p->job.partition = partition;
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

/* Per task (1-based index in the config), the live workers that run it. */
static void
on_live(void *arg, PGresult *res)
{
	struct duty *d = arg;
	if (!res || PQresultStatus(res) != PGRES_TUPLES_OK || d->stopping ||
	    !d->db)
		return;
	for (int r = 0; r < PQntuples(res); r++) {
		size_t i = (size_t)atol(PQgetvalue(res, r, 0)) - 1;
		long live = atol(PQgetvalue(res, r, 1));
		if (i >= d->cfg->ntasks)
			continue;
		/* Not yet counted itself (its row is being written). */
		if (live < 1)
			live = 1;
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
	char ms[24];
	snprintf(ms, sizeof(ms), "%lld", (long long)lease_ms(d));
	if (n > 0) {
		char *a = queue_text_array(names, n);
		char *b = queue_int_array(tokens, n);
		const char *p[] = {a, b, ms, d->holder};
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
		free(a);
		free(b);
	}
	free(names);
	free(tokens);
	/* The live workers that run each task (lease_task_workers()). */
	lease_task_workers(d->db, d->cfg, lease_ms(d), on_live, d);
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

/* A schedule as a live worker defined it: borrowed from a round's result. */
struct sched_def {
	const char *name, *kind, *payload, *queue;
};

/*
 * Advances schedule s to tick and enqueues its job, in one transaction.
 * The job is due at the tick itself, never before, and its payload names
 * the schedule and the tick under "pgjob" unless the configured payload
 * has that key already (docs/schedules.md).
 */
static void
enqueue_tick(struct duty *d, const struct sched_def *s, int64_t tick)
{
	char when[CRON_TIME_LEN], epoch[24], token[24];
	cron_format_utc(tick, when);
	snprintf(epoch, sizeof(epoch), "%lld", (long long)tick);
	snprintf(token, sizeof(token), "%lld", (long long)d->sched_token);
	char *key = xasprintf("schedule:%s:%s", s->name, when);
	const char *pf[] = {SCHEDULER_LEASE, token};
	const char *pe[] = {s->name,  epoch, s->kind, s->payload,
			    s->queue, key,   when};
	struct dbev_stmt st[] = {
		{"select pgjob.fence($1, $2)", 2, NULL, pf},
		{"with s as (update pgjob.schedules"
		 "   set last_tick = to_timestamp($2::bigint)"
		 "   where name = $1 and last_tick < to_timestamp($2::bigint)"
		 "   returning 1)"
		 " select pgjob.enqueue($3,"
		 "  case when $4::jsonb ? 'pgjob' then $4::jsonb"
		 "   else $4::jsonb || jsonb_build_object('pgjob',"
		 "    jsonb_build_object('schedule', $1::text,"
		 "     'tick', $7::text))"
		 "  end,"
		 "  queue => $5, run_at => to_timestamp($2::bigint),"
		 "  unique_key => $6) from s",
		 7, NULL, pe},
	};
	struct tick *t = xcalloc(1, sizeof(*t));
	t->d = d;
	d->sched_pending++;
	log_info("schedule %s: enqueueing the tick of %s", s->name, when);
	dbev_failpoints(d->db, FP_SCHEDULE_TICK, 0);
	dbev_send_group(d->db, st, 2, on_ticked, t);
	free(key);
}

/* Says once that two live workers define schedule name differently. */
static void
note_conflict(struct duty *d, const char *name, const char *winner,
	      const char *other)
{
	char *key = xasprintf("conflict\n%s\n%s\n%s", name, winner, other);
	if (note_new(d, key))
		log_warn("schedule %s: live workers define it differently; "
			 "ticking the definition of %s (started last), not "
			 "that of %s",
			 name, winner, other);
	free(key);
}

/* Enqueues the due ticks of row r of a round's result; returns how many. */
static int
schedule_row(struct duty *d, PGresult *res, int r)
{
	struct sched_def s = {PQgetvalue(res, r, 0), PQgetvalue(res, r, 3),
			      PQgetvalue(res, r, 4), PQgetvalue(res, r, 5)};
	const char *cron = PQgetvalue(res, r, 1);
	const char *tz = PQgetisnull(res, r, 2) ? NULL : PQgetvalue(res, r, 2);
	const char *by = PQgetvalue(res, r, 7);
	int all = strcmp(PQgetvalue(res, r, 6), "all") == 0;
	int64_t now_us = strtoll(PQgetvalue(res, r, 10), NULL, 10);
	int64_t ticks[TICKS_PER_ROUND];
	char *err = NULL, *key;
	int n = -1;

	if (!PQgetisnull(res, r, 8))
		note_conflict(d, s.name, by, PQgetvalue(res, r, 8));
	if (PQgetisnull(res, r, 9)) {
		/* New schedule: ticks count from now on. */
		const char *p[] = {s.name};
		dbev_send(d->db,
			  "insert into pgjob.schedules (name, last_tick)"
			  " values ($1, date_trunc('second', now()))"
			  " on conflict (name) do nothing",
			  1, p, on_ignore, NULL);
		return 0;
	}
	struct cron *c = cron_parse(cron, &err);
	if (c)
		n = cron_due(c, tz, strtoll(PQgetvalue(res, r, 9), NULL, 10),
			     now_us, all, ticks, TICKS_PER_ROUND);
	cron_free(c);
	if (n < 0) {
		/* The definer's pgjobd took it; this one cannot. */
		key = xasprintf("unusable\n%s\n%s\n%s\n%s", s.name, by, cron,
				tz ? tz : "");
		if (note_new(d, key))
			log_warn("schedule %s (defined by %s): %s; not "
				 "ticked here",
				 s.name, by,
				 err ? err : "unknown time zone on this host");
		free(key);
		n = 0;
	}
	free(err);
	for (int k = 0; k < n; k++)
		enqueue_tick(d, &s, ticks[k]);
	return n;
}

static void
on_schedules(void *arg, PGresult *res)
{
	struct duty *d = arg;
	int sent = 0;

	if (!res || PQresultStatus(res) != PGRES_TUPLES_OK || !d->db) {
		if (res && PQresultStatus(res) != PGRES_TUPLES_OK) {
			char *e = db_error_text(NULL, res);
			log_warn("scheduler: reading the schedules: %s", e);
			free(e);
		}
		d->sched_busy = 0;
		return;
	}
	for (int r = 0; r < PQntuples(res); r++)
		sent += schedule_row(d, res, r);
	notes_rotate(d);
	if (sent == 0)
		d->sched_busy = 0;
}

/*
 * One round of the scheduler: every schedule that a live worker defines,
 * by the definition of the worker that started last (then by its name:
 * deterministic while the same workers live), with any other live worker
 * whose definition differs, the last tick enqueued, and the database's
 * clock in microseconds.
 */
static void
schedule_run(struct duty *d)
{
	char window[24];
	snprintf(window, sizeof(window), "%lld", (long long)lease_ms(d));
	const char *p[] = {window};
	d->sched_busy = 1;
	dbev_send(
		d->db,
		"with d as (select s.key as name, s.value as def,"
		"   w.host || '/' || w.pid as publisher,"
		"   row_number() over (partition by s.key"
		"    order by w.defined_at desc, w.host || '/' || w.pid desc)"
		"    as rank"
		"  from pgjob.workers w, jsonb_each(w.schedules) s"
		"  where w.heartbeat_at > now() - $1::bigint * interval '1 ms')"
		" select d.name, d.def->>'cron', d.def->>'timezone',"
		"  d.def->>'kind', d.def->'payload', d.def->>'queue',"
		"  d.def->>'catch_up', d.publisher,"
		"  (select o.publisher from d o where o.name = d.name"
		"    and o.def <> d.def order by o.rank limit 1),"
		"  extract(epoch from s.last_tick)::bigint,"
		"  (extract(epoch from now()) * 1000000)::bigint"
		" from d left join pgjob.schedules s on s.name = d.name"
		" where d.rank = 1 order by d.name",
		1, p, on_schedules, d);
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
		if (!d->published)
			publish(d);
		/* Every worker may hold it: the holder ticks every live
		 * worker's schedules, not only its own. */
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
	d->pid = (int)getpid();
	d->period_ms = period_ms;
	d->last_period = util_now_ms() - period_ms;
	d->last_prune = util_now_ms() - PRUNE_EVERY_MS;
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
	if (d->db)
		publish(d); /* withdraws */
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
	notes_free(&d->seen);
	notes_free(&d->noted);
	free(d->defined_at);
	free(d->holder);
	free(d);
}
