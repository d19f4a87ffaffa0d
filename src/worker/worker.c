/*
 * worker: claim, run, renew, finish, on one libev loop.
 *
 * A job the worker holds is a struct held: RUNNING while its handler runs,
 * DONE once the handler has reported and its end waits to be written,
 * WRITING while that write is in flight.  Writes and claims are gathered
 * in an ev_prepare watcher, which runs once per loop iteration just before
 * the loop sleeps, so everything that finished in one iteration is written
 * in one statement and the next claim goes out in the same pipeline.
 *
 * Signal work happens on the loop (ev_signal), never in a signal handler.
 */
#include "worker/worker.h"

#include <errno.h>
#include <ev.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "common/backoff.h"
#include "common/config.h"
#include "db/db.h"
#include "worker/duty.h"
#include "common/failpoint.h"
#include "db/dbev.h"
#include "handlers/handler.h"
#include "db/lease.h"
#include "common/log.h"
#include "db/migrate.h"
#include "db/queue.h"
#include "common/stats.h"
#include "common/util.h"

/*
 * RUNNING: its handler runs; SQL_WAITING: an sql handler's job waits for
 * its turn on the connection (one statement at a time, see sql_next());
 * DONE: its end waits to be written; WRITING: that write is in flight.
 */
enum held_state { HELD_RUNNING, HELD_SQL_WAITING, HELD_DONE, HELD_WRITING };

struct held {
	struct job job;
	enum held_state state;
	struct handler_run *run;
	size_t queue;	     /* index into cfg->queues */
	int64_t deadline_ms; /* monotonic: stop the handler past this */
	int lost;	     /* lease lost: discard the result */
	int release;	     /* stopped by shutdown: give the job back */
	int overdue;	     /* stopped at its deadline */
	int cancelled;	     /* lost because an operator cancelled it */
	int solo;	     /* write alone (its batch failed) */
	int write_failures;
	struct stats_kind *sk; /* this kind's counters, or NULL */
	int64_t started_ms;
	struct queue_finish fin; /* valid in DONE and WRITING */
	struct handler_result res;
	struct held *prev, *next;
};

struct worker {
	const struct config *cfg;
	struct ev_loop *loop;
	struct dbev *db;
	struct duty *duty;	 /* scheduler, pruning, leased tasks */
	struct stats *stats;	 /* shared with the supervisor */
	struct stats_worker *st; /* this worker's entry in it */
	int index;		 /* this worker's place in the supervisor */
	int slot;
	int pid, supervisor_pid;
	char host[256];
	char *locked_by;
	char **kinds;
	size_t nkinds;
	char *kinds_literal;
	int *running; /* per cfg->queues index */
	int *serves;  /* per queue: 1 when some handler uses it */
	struct held *head;
	int nheld;
	int want_claim, cycle_inflight;
	int sql_inflight; /* sql handler statements on the connection */
	int online;	  /* connected, slot held, statements can be sent */
	int trimmed;	  /* the heap was trimmed since the worker went idle */
	/* Per queue: where its next claim reads the index of available jobs
	 * from (queue_claim_req), and when a claim last read from the head. */
	struct queue_position *pos;
	int *pos_valid;
	/* Per queue: its last claim came back full, so more due jobs may be
	 * waiting than a claim asked for (see claim_after_end()). */
	int *more;
	int notified; /* a NOTIFY came since the last claim from the head */
	int64_t head_scan_ms;
	int draining, stopping;
	int retiring; /* a reload retired it: no deadline to finish */
	int exit_code;
	int reconnects; /* failed attempts since the last success */
	int connected_once;
	ev_prepare prepare;
	ev_timer poll, renew, heartbeat, deadline, reconnect, shutdown, final;
	ev_timer depth; /* worker 1 reads queue depths for /metrics */
	ev_signal sigterm, sigint, sigusr2;
	ev_io parent;
};

static void connect_db(struct worker *w);

static int64_t
lease_margin(const struct worker *w)
{
	return w->cfg->lease_ms / 5;
}

static void
held_unlink(struct worker *w, struct held *h)
{
	if (h->prev)
		h->prev->next = h->next;
	else
		w->head = h->next;
	if (h->next)
		h->next->prev = h->prev;
	w->nheld--;
	handler_result_clear(&h->res);
	free(h->job.kind);
	free(h->job.queue);
	free(h->job.payload);
	free(h->job.ordering_key);
	free(h);
}

/* The attempt (id, token) this worker holds, or NULL: an answer about an
 * earlier attempt of a job held again is about none of ours. */
static struct held *
held_find(struct worker *w, int64_t id, int64_t token)
{
	for (struct held *h = w->head; h; h = h->next)
		if (h->job.id == id && h->job.lease_token == token)
			return h;
	return NULL;
}

static struct log_job
lj(const struct held *h)
{
	return (struct log_job){h->job.id, h->job.kind, h->job.attempt};
}

/* Decides how the attempt ends: done, a retry after a delay, or dead. */
static void
decide(struct worker *w, struct held *h)
{
	struct handler_result *r = &h->res;
	const struct handler_conf *hc = h->job.handler;
	int max = h->job.max_attempts;
	char dur[32];

	h->fin = (struct queue_finish){.id = h->job.id,
				       .token = h->job.lease_token,
				       .result = r->result,
				       .error = r->error};
	if (h->release) {
		h->fin.state = "available";
		h->fin.refund = 1;
		h->fin.error = "interrupted: the worker shut down";
		return;
	}
	if (r->outcome == OUTCOME_DONE) {
		h->fin.state = "done";
		return;
	}
	/* Attempts lost with their worker do not count here. */
	int failed = h->job.attempt - h->job.lost_attempts;
	if (r->outcome == OUTCOME_DEAD || failed >= max) {
		h->fin.state = "dead";
		log_job(LOG_WARN,
			&(struct log_job){h->job.id, h->job.kind,
					  h->job.attempt},
			"dead after %d failed attempts of %d: %s", failed, max,
			r->error ? r->error : "(no error text)");
		return;
	}
	h->fin.state = "available";
	h->fin.delay_ms =
		r->retry_in_ms >= 0
			? r->retry_in_ms
			: backoff_job_delay(hc->backoff.base_ms,
					    hc->backoff.max_ms, h->job.attempt,
					    backoff_random());
	struct log_job l = lj(h);
	log_job(LOG_INFO, &l, "attempt failed, retry in %s: %s",
		handler_format_duration(h->fin.delay_ms, dur, sizeof(dur)),
		r->error ? r->error : "(no error text)");
}

/* Counts the handler's run time. */
static void
observe_run(struct held *h)
{
	if (h->sk)
		stats_observe(h->sk->dur, &h->sk->dur_count, &h->sk->dur_sum_us,
			      (util_now_ms() - h->started_ms) * 1000);
}

/* Counts how an attempt's end was written: written, or refused. */
static void
count_end(struct held *h, const char *state, int written)
{
	if (!h->sk)
		return;
	if (!written)
		stats_add(&h->sk->lost, 1);
	else if (strcmp(state, "done") == 0)
		stats_add(&h->sk->done, 1);
	else if (strcmp(state, "dead") == 0)
		stats_add(&h->sk->dead, 1);
	else if (strcmp(state, "available") == 0 && !h->release)
		stats_add(&h->sk->retried, 1);
}

/* Takes the handler's result over into the held job. */
static void
take_result(struct held *h, struct handler_result *res)
{
	h->run = NULL;
	h->res = *res;
	*res = (struct handler_result){OUTCOME_DONE, NULL, NULL, -1};
	h->state = HELD_DONE;
}

/*
 * Whether a job's end calls for a claim.  Its place in the queue is free,
 * but a claim finds work only where the queue's last claim came back full
 * (due jobs beyond what it asked for may wait), the job itself went back
 * to the queue (a retry, due now or soon), or the queue is serial or
 * per_key (the end makes the next job of its line eligible).  New jobs
 * send a NOTIFY, and the poll timer claims in any case: a claim after
 * every end of a quiet queue only found nothing.
 */
static void
claim_after_end(struct worker *w, size_t q, const char *state)
{
	if (w->draining)
		return;
	if (w->more[q] || w->cfg->queues[q].mode != QUEUE_PARALLEL ||
	    strcmp(state, "available") == 0)
		w->want_claim = 1;
}

/*
 * The worker is reached from a held job through this table: handler_start()
 * takes one arg, and the held job needs both.  One worker per process.
 */
static struct worker *self;

static void
job_ended(void *arg, struct handler_result *res)
{
	struct held *h = arg;
	struct worker *w = self;
	take_result(h, res);
	w->running[h->queue]--;
	observe_run(h);
	if (h->lost) {
		struct log_job l = lj(h);
		if (h->cancelled)
			log_job(LOG_INFO, &l, "stopped: cancelled");
		else
			log_job(LOG_WARN, &l,
				"result discarded: the lease was lost");
		held_unlink(w, h);
		return;
	}
	decide(w, h);
	claim_after_end(w, h->queue, h->fin.state);
}

static void sql_next(struct worker *w);

static void
on_sql_done(void *arg, PGresult **res, int n)
{
	struct held *h = arg;
	struct worker *w = self;
	char *error;
	struct log_job l = lj(h);
	struct handler_result r = {OUTCOME_RETRY, NULL, NULL, -1};

	if (w->sql_inflight > 0)
		w->sql_inflight--;
	switch (queue_sql_result(res, n, &error)) {
	case QUEUE_SQL_DONE:
		log_job(LOG_DEBUG, &l, "done");
		observe_run(h);
		count_end(h, "done", 1);
		break;
	case QUEUE_SQL_LEASE:
		observe_run(h);
		count_end(h, "done", 0);
		log_job(LOG_WARN, &l,
			"lease lost before the statement ran; "
			"nothing was done");
		break;
	case QUEUE_SQL_FAILED:
	case QUEUE_SQL_CONN_LOST:
		/* Rolled back (or, if the connection broke after the commit,
		 * done: then the compare-and-set refuses this end). */
		r.error = error;
		job_ended(h, &r);
		handler_result_clear(&r);
		sql_next(w);
		return;
	}
	w->running[h->queue]--;
	claim_after_end(w, h->queue, "done");
	held_unlink(w, h);
	sql_next(w);
}

/*
 * Sends the statement of an sql handler's job.  It holds the worker's only
 * connection: the renewals of its other jobs wait behind it, and a path
 * that stops answering must still be noticed within a lease.  So it gets at
 * most half a lease, and only one is on the connection at a time: what
 * waits ahead of a renewal is bounded by half a lease, however many sql
 * jobs the worker holds.
 */
static void
sql_start(struct worker *w, struct held *h)
{
	int64_t limit = w->cfg->lease_ms / 2;
	if (h->job.handler->timeout_ms < limit)
		limit = h->job.handler->timeout_ms;
	h->state = HELD_RUNNING;
	w->sql_inflight++;
	/* Runs on this worker's connection, in the transaction that also
	 * ends the job: see queue_run_sql(). */
	queue_run_sql(w->db, &h->job, h->job.handler->statement, limit,
		      on_sql_done, h);
}

/* Starts the sql job that has waited longest, when the connection is
 * free. */
static void
sql_next(struct worker *w)
{
	struct held *next = NULL;
	if (w->sql_inflight > 0 || !w->online || w->stopping)
		return;
	/* The list is newest first: the last waiting one came first. */
	for (struct held *h = w->head; h; h = h->next)
		if (h->state == HELD_SQL_WAITING)
			next = h;
	if (next)
		sql_start(w, next);
}

static int
payload_is_object(const char *p)
{
	while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')
		p++;
	return *p == '{';
}

/*
 * Takes over a claimed job and starts its handler.  sent_ms is when the
 * claim was sent: the lease runs from a moment between that and the
 * answer, so the deadline counts from the earlier one.
 */
static void
start_job(struct worker *w, struct job *job, int64_t sent_ms)
{
	struct held *h = xcalloc(1, sizeof(*h));
	h->job = *job;
	free(job);
	h->job.handler = config_handler(w->cfg, h->job.kind);
	h->started_ms = util_now_ms();
	if ((h->sk = stats_kind(w->st, h->job.kind, h->job.queue)) != NULL)
		stats_add(&h->sk->claimed, 1);
	h->deadline_ms = sent_ms + w->cfg->lease_ms - lease_margin(w);
	h->next = w->head;
	if (w->head)
		w->head->prev = h;
	w->head = h;
	w->nheld++;
	for (size_t i = 0; i < w->cfg->nqueues; i++)
		if (strcmp(w->cfg->queues[i].name, h->job.queue) == 0)
			h->queue = i;
	w->running[h->queue]++;
	if (h->job.max_attempts <= 0)
		h->job.max_attempts = h->job.handler->max_attempts;
	const char *refuse = NULL;
	char why[160];
	if (h->job.lost_attempts > h->job.max_attempts) {
		/* Lost attempts are not failures, but a job that takes its
		 * worker down every time (a crashing plugin, an OOM kill)
		 * must stop somewhere: they have an allowance of their own,
		 * max_attempts (docs/daemon.md, "Attempts"). */
		snprintf(why, sizeof(why),
			 "lost %d attempts: the worker running it died or "
			 "lost its lease each time (allowance: %d)",
			 h->job.lost_attempts, h->job.max_attempts);
		refuse = why;
	} else if (!h->job.payload) {
		/* The claim did not send it: see queue_claim_req. */
		snprintf(why, sizeof(why),
			 "payload of %lld bytes is over max_payload_bytes "
			 "(%lld)",
			 (long long)h->job.payload_bytes,
			 (long long)w->cfg->max_payload_bytes);
		refuse = why;
	} else if (!payload_is_object(h->job.payload)) {
		refuse = "payload is not a JSON object";
	}
	if (refuse) {
		struct handler_result r = {OUTCOME_DEAD, NULL, xstrdup(refuse),
					   -1};
		struct log_job l = lj(h);
		log_job(LOG_WARN, &l, "%s", refuse);
		job_ended(h, &r);
		handler_result_clear(&r);
		return;
	}
	if (h->job.handler->type == HANDLER_SQL) {
		h->state = HELD_SQL_WAITING;
		sql_next(w);
		return;
	}
	h->state = HELD_RUNNING;
	h->run = handler_start(w->loop, &h->job, w->slot, job_ended, h);
}

static void on_lost(void *arg, const char *why);

/*
 * Whether res succeeded; logs it when not.  An error that says this server
 * cannot take our writes any more (a standby after a failover: 25006; an
 * admin shutdown: 57P0x) while libpq still thinks the connection is fine
 * drops the connection, so that the reconnect finds the new primary.
 */
static int
result_ok(struct worker *w, PGresult *res, const char *what)
{
	enum db_error e = db_classify(NULL, res);
	if (e == DB_OK) {
		stats_set(&w->st->last_ok_ms, util_now_ms());
		return 1;
	}
	char *text = db_error_text(NULL, res);
	log_warn("%s failed: %s", what, text);
	if (e == DB_LOST && w->db && !ev_is_active(&w->reconnect))
		on_lost(w, text);
	free(text);
	return 0;
}

/*
 * The first time a claim finds nothing and the worker holds nothing, the
 * heap's free memory goes back to the system: a batch of a thousand jobs
 * leaves a high-water mark that would otherwise stay in the worker's RSS
 * for as long as it rests.
 */
static void
trim_when_idle(struct worker *w, int claimed)
{
	if (claimed > 0 || w->nheld > 0) {
		w->trimmed = 0;
		return;
	}
	if (w->trimmed)
		return;
	w->trimmed = 1;
#ifdef __GLIBC__
	malloc_trim(0);
#endif
}

static int
queue_index(const struct worker *w, const char *name)
{
	for (size_t i = 0; i < w->cfg->nqueues; i++)
		if (strcmp(w->cfg->queues[i].name, name) == 0)
			return (int)i;
	return -1;
}

/* One statement of a turn in flight: a batch of ends, or a claim. */
struct cycle {
	struct worker *w;
	int claims;
	int64_t sent_ms;
	int limits[STATS_MAX_QUEUES]; /* per cfg->queues index; 0: not asked */
	size_t n;
	struct held *held[];
};

/*
 * A job's end that PostgreSQL refused for its data (SQLSTATE class 22):
 * the result, which the handler printed and which passed our check, but
 * not jsonb's (a number past numeric's range, say).  The run succeeded: it
 * is written done without its result, and last_error says why, rather than
 * running again.  Returns 1 when it had a result to drop.
 */
static int
drop_result(struct held *h, const char *sqlstate, const char *etext)
{
	if (!h->fin.result || !sqlstate || strncmp(sqlstate, "22", 2) != 0)
		return 0;
	char *note = xasprintf("result not stored: PostgreSQL refused it (%s)",
			       etext ? etext : sqlstate);
	struct log_job l = lj(h);
	log_job(LOG_WARN, &l, "%s; writing the end without it", note);
	free(h->res.result);
	h->res.result = NULL;
	free(h->res.error);
	h->res.error = note;
	h->fin.result = NULL;
	h->fin.error = note;
	return 1;
}

/* What became of the ends a cycle carried. */
static void
cycle_ends(struct worker *w, struct cycle *c, PGresult *res, enum db_error e,
	   const char *etext)
{
	const char *sqlstate =
		res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	size_t nwritten = 0;
	int64_t *written =
		e == DB_OK ? queue_finished_ids(res, &nwritten) : NULL;
	for (size_t i = 0; i < c->n; i++) {
		struct held *h = c->held[i];
		if (e == DB_LOST) {
			h->state = HELD_DONE; /* again after reconnecting */
			continue;
		}
		if (e != DB_OK) {
			h->state = HELD_DONE;
			/* Alone, the error is this job's own. */
			if (h->solo && e == DB_PERMANENT &&
			    drop_result(h, sqlstate, etext))
				continue;
			h->solo = 1;
			if (c->n == 1 && ++h->write_failures >= 3) {
				struct log_job l = lj(h);
				log_job(LOG_ERROR, &l,
					"giving up writing its end (%s); the "
					"lease will expire and it runs again",
					etext);
				held_unlink(w, h);
			}
			continue;
		}
		int ok = queue_id_in(written, nwritten, h->job.id);
		struct log_job l = lj(h);
		count_end(h, h->fin.state, ok);
		if (!ok)
			log_job(LOG_WARN, &l,
				"lease lost: the database refused the end of "
				"this attempt (%s), result discarded",
				h->fin.state);
		else
			log_job(LOG_DEBUG, &l, "%s", h->fin.state);
		held_unlink(w, h);
	}
	free(written);
}

/*
 * After a claim: a queue that gave a full batch is read from past its last
 * job next time; one that gave less, from its head (see from_positions).
 */
static void
remember_positions(struct worker *w, const struct cycle *c, PGresult *res,
		   const int *got)
{
	for (size_t i = 0; i < w->cfg->nqueues && i < STATS_MAX_QUEUES; i++) {
		if (!c->limits[i])
			continue;
		w->pos_valid[i] =
			got[i] >= c->limits[i] &&
			queue_claim_position(res, w->cfg->queues[i].name,
					     &w->pos[i]);
	}
}

/* Notes, per queue asked, whether its batch came back full. */
static int
claimed_full(struct worker *w, const struct cycle *c, const int *got, int n)
{
	int any = 0;
	for (size_t i = 0; i < w->cfg->nqueues; i++) {
		if (i >= STATS_MAX_QUEUES) {
			/* Not counted per queue: more while jobs come. */
			w->more[i] = n > 0;
			any |= n > 0;
			continue;
		}
		if (!c->limits[i])
			continue;
		w->more[i] = got[i] >= c->limits[i];
		any |= w->more[i];
	}
	return any;
}

static void
on_cycle(void *arg, PGresult *res)
{
	struct cycle *c = arg;
	struct worker *w = c->w;
	enum db_error e = res ? db_classify(NULL, res) : DB_LOST;
	char *etext = e != DB_OK && res ? db_error_text(NULL, res) : NULL;

	/* on_lost() zeroes the count, and the cycles of the lost link
	 * still report (with NULL) after it. */
	if (w->cycle_inflight > 0)
		w->cycle_inflight--;
	if (res && e != DB_OK) {
		char what[64];
		if (c->claims)
			snprintf(what, sizeof(what), "claim");
		else
			snprintf(what, sizeof(what), "writing %zu job ends",
				 c->n);
		result_ok(w, res, what);
	}
	cycle_ends(w, c, res, e, etext);
	if (e == DB_OK) {
		stats_set(&w->st->last_ok_ms, util_now_ms());
		if (c->claims) {
			stats_observe(w->st->claim, &w->st->claim_count,
				      &w->st->claim_sum_us,
				      (util_now_ms() - c->sent_ms) * 1000);
			int n;
			struct job **jobs = queue_claim_rows(res, &n);
			int got[STATS_MAX_QUEUES] = {0};
			for (int i = 0; i < n; i++) {
				int q = queue_index(w, jobs[i]->queue);
				if (q >= 0 && q < STATS_MAX_QUEUES)
					got[q]++;
				start_job(w, jobs[i], c->sent_ms);
			}
			free(jobs);
			remember_positions(w, c, res, got);
			/* A full batch came: more may be waiting. */
			if (claimed_full(w, c, got, n))
				w->want_claim = 1;
			trim_when_idle(w, n);
		}
	}
	free(etext);
	free(c);
}

/*
 * Where each queue of a claim is read from: past the worker's last
 * position in it, or from its head.  Every claim reads from the head when a
 * NOTIFY came since the last one that did (new jobs may sort before the
 * positions) or a second has passed (a job another claimer gave back may
 * sit behind them): that bounds how long such a job can be passed over.
 */
static void
from_positions(struct worker *w, size_t nq, const size_t *qidx, const char **p,
	       const char **r, const char **id)
{
	int64_t now = util_now_ms();
	int use = !w->notified && now - w->head_scan_ms < 1000;
	if (nq && !use) {
		w->head_scan_ms = now;
		w->notified = 0;
	}
	for (size_t k = 0; k < nq; k++) {
		size_t i = qidx[k];
		int ok = use && i < STATS_MAX_QUEUES && w->pos_valid[i];
		p[k] = ok ? w->pos[i].priority : NULL;
		r[k] = ok ? w->pos[i].run_at : NULL;
		id[k] = ok ? w->pos[i].id : NULL;
	}
}

/* Records what a claim asked of each queue, for remember_positions(). */
static void
asked(struct cycle *c, size_t nq, const size_t *qidx, const int *limits)
{
	for (size_t k = 0; k < nq; k++)
		if (qidx[k] < STATS_MAX_QUEUES)
			c->limits[qidx[k]] = limits[k];
}

/*
 * Sends the next cycle: every end waiting to be written (or one written
 * alone, after its batch failed) and, when the worker wants work and has
 * room, a claim for up to each queue's free capacity.
 */
static void
send_cycle(struct worker *w)
{
	const struct config *cf = w->cfg;
	const char *queues[cf->nqueues];
	const char *modes[cf->nqueues];
	const char *from_p[cf->nqueues], *from_r[cf->nqueues],
		*from_i[cf->nqueues];
	int limits[cf->nqueues];
	size_t qidx[cf->nqueues];
	size_t nq = 0, n = 0;

	if (!w->db || w->cycle_inflight)
		return;
	for (struct held *h = w->head; h; h = h->next)
		if (h->state == HELD_DONE)
			n++;
	if (w->want_claim && !w->draining) {
		w->want_claim = 0;
		for (size_t i = 0; i < cf->nqueues; i++) {
			int free_ = cf->queues[i].concurrency - w->running[i];
			if (!w->serves[i] || free_ <= 0)
				continue;
			queues[nq] = cf->queues[i].name;
			modes[nq] = config_queue_mode_name(cf->queues[i].mode);
			qidx[nq] = i;
			limits[nq++] = free_;
		}
	}
	from_positions(w, nq, qidx, from_p, from_r, from_i);
	if (n == 0 && nq == 0)
		return;
	struct queue_finish *f = xcalloc(n + 1, sizeof(*f));
	struct cycle *c = xcalloc(1, sizeof(*c) + n * sizeof(struct held *));
	c->w = w;
	for (struct held *h = w->head; h; h = h->next) {
		if (h->state != HELD_DONE)
			continue;
		/* A job whose batch failed is written alone, so one bad
		 * result cannot block the others. */
		if (h->solo && c->n > 0)
			continue;
		h->state = HELD_WRITING;
		f[c->n] = h->fin;
		c->held[c->n++] = h;
		if (h->solo)
			break;
	}
	struct queue_claim_req req = {.kinds = (const char *const *)w->kinds,
				      .nkinds = w->nkinds,
				      .queues = queues,
				      .limits = limits,
				      .modes = modes,
				      .nqueues = nq,
				      .locked_by = w->locked_by,
				      .lease_ms = cf->lease_ms,
				      .from_priority = from_p,
				      .from_run_at = from_r,
				      .from_id = from_i,
				      .max_payload_bytes =
					      cf->max_payload_bytes};
	/* Ends and claim go out as two transactions in one round trip (the
	 * pipeline keeps their order).  In one statement they deadlocked
	 * with 16 claimers: a claim that meets an older version of a row
	 * waits for whoever is updating its newest version, even under
	 * SKIP LOCKED, and a statement that also held its finished rows
	 * could be waited for in turn.  A transaction that only writes
	 * ends waits for no claim. */
	if (c->n) {
		w->cycle_inflight++;
		queue_finish(w->db, f, c->n, cf->retention_ms == 0, on_cycle,
			     c);
	} else {
		free(c);
	}
	if (nq) {
		struct cycle *cl = xcalloc(1, sizeof(*cl));
		cl->w = w;
		cl->claims = 1;
		cl->sent_ms = util_now_ms();
		asked(cl, nq, qidx, limits);
		w->cycle_inflight++;
		queue_claim(w->db, &req, on_cycle, cl);
	}
	free(f);
}

static void
on_prepare(struct ev_loop *loop, ev_prepare *p, int revents)
{
	struct worker *w = p->data;
	send_cycle(w);
	if (w->draining && w->nheld == 0 && duty_running(w->duty) == 0)
		ev_break(loop, EVBREAK_ALL);
}

/* Renewal: a copy of what was asked, and when. */
struct renewal {
	struct worker *w;
	int64_t sent_ms;
	size_t n;
	int64_t ids[];
};

static void
on_renew(void *arg, PGresult *res)
{
	struct renewal *r = arg;
	struct worker *w = r->w;
	if (!res || !result_ok(w, res, "renewing leases")) {
		free(r);
		return;
	}
	for (int k = 0; k < PQntuples(res); k++) {
		struct held *h =
			held_find(w, strtoll(PQgetvalue(res, k, 0), NULL, 10),
				  strtoll(PQgetvalue(res, k, 3), NULL, 10));
		if (!h || h->lost)
			continue;
		if (*PQgetvalue(res, k, 1) == 't') {
			h->deadline_ms =
				r->sent_ms + w->cfg->lease_ms - lease_margin(w);
			continue;
		}
		if (h->state == HELD_WRITING)
			continue; /* its finish will tell */
		int cancelled = *PQgetvalue(res, k, 2) == 't';
		struct log_job l = lj(h);
		log_job(cancelled ? LOG_INFO : LOG_WARN, &l, "%s; stopping it",
			cancelled ? "cancelled by an operator"
				  : "lease lost (another worker holds the "
				    "job now)");
		h->lost = 1;
		h->cancelled = cancelled;
		/* The alert on leases lost counts this, the common case, as
		 * well as ends the database refused (count_end()). */
		if (!cancelled && h->sk)
			stats_add(&h->sk->lost, 1);
		if (h->state == HELD_RUNNING) {
			if (h->run)
				handler_stop(h->run, cancelled ? "cancelled"
							       : "lease lost");
		} else {
			if (h->state == HELD_SQL_WAITING)
				w->running[h->queue]--;
			held_unlink(w, h);
		}
	}
	free(r);
}

static void
renew_all(struct worker *w)
{
	if (!w->db || w->nheld == 0)
		return;
	struct renewal *r = xcalloc(1, sizeof(*r) + w->nheld * sizeof(int64_t));
	int64_t *tokens = xcalloc(w->nheld, sizeof(int64_t));
	r->w = w;
	r->sent_ms = util_now_ms();
	for (struct held *h = w->head; h; h = h->next) {
		if (h->lost)
			continue;
		tokens[r->n] = h->job.lease_token;
		r->ids[r->n++] = h->job.id;
	}
	queue_renew(w->db, r->ids, tokens, r->n, w->cfg->lease_ms, on_renew, r);
	free(tokens);
}

static void
on_renew_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
	renew_all(t->data);
}

static void
on_deadline_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct worker *w = t->data;
	int64_t now = util_now_ms();
	__atomic_store_n(&w->st->tasks_held, duty_running(w->duty),
			 __ATOMIC_RELAXED);
	for (struct held *h = w->head; h; h = h->next) {
		if (h->state != HELD_RUNNING || !h->run || h->lost ||
		    h->overdue || now < h->deadline_ms)
			continue;
		/* The end is still written, compare-and-set on the token:
		 * if the lease is in fact still ours it counts as a failed
		 * attempt, and if not the database refuses it. */
		struct log_job l = lj(h);
		log_job(LOG_WARN, &l,
			"lease not renewed by its deadline; "
			"stopping the handler");
		h->overdue = 1;
		handler_stop(h->run, "lease not renewed in time");
	}
}

static void
on_poll(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct worker *w = t->data;
	w->want_claim = 1;
}

/* Worker 1 of an instance reads the queue depths for /metrics. */
static void
on_depth_done(void *arg, PGresult *res)
{
	struct worker *w = arg;
	struct stats *s = w->stats;
	if (!res || !result_ok(w, res, "reading queue depths"))
		return;
	int n = PQntuples(res);
	if (n > STATS_MAX_QUEUES)
		n = STATS_MAX_QUEUES;
	__atomic_store_n(&s->nqueues, 0, __ATOMIC_RELEASE);
	for (int i = 0; i < n; i++) {
		struct stats_queue *q = &s->queues[i];
		snprintf(q->name, sizeof(q->name), "%s", PQgetvalue(res, i, 0));
		stats_set(&q->due, strtoll(PQgetvalue(res, i, 1), NULL, 10));
		stats_set(&q->running,
			  strtoll(PQgetvalue(res, i, 2), NULL, 10));
		stats_set(&q->oldest_due_ms,
			  strtoll(PQgetvalue(res, i, 3), NULL, 10));
	}
	__atomic_store_n(&s->nqueues, (uint32_t)n, __ATOMIC_RELEASE);
	stats_set(&s->queues_at_ms, util_now_ms());
}

static void
on_depth(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct worker *w = t->data;
	/* One worker per instance reads them: the supervisor names it. */
	if (w->retiring || __atomic_load_n(&w->stats->depth_reader,
					   __ATOMIC_RELAXED) != w->index)
		return;
	if (w->db)
		dbev_send(w->db,
			  "select queue,"
			  "  count(*) filter (where state = 'available'"
			  "   and run_at <= now()),"
			  "  count(*) filter (where state = 'running'),"
			  "  coalesce(extract(epoch from now() - min(run_at)"
			  "   filter (where state = 'available'"
			  "    and run_at <= now())) * 1000, 0)::bigint"
			  " from pgjob.jobs"
			  " where state in ('available', 'running')"
			  " group by queue order by queue limit 32",
			  0, NULL, on_depth_done, w);
}

static void
on_heartbeat_done(void *arg, PGresult *res)
{
	if (res)
		result_ok(arg, res, "heartbeat");
}

static void
on_heartbeat(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct worker *w = t->data;
	if (w->db)
		lease_worker_heartbeat(w->db, w->slot, w->pid,
				       on_heartbeat_done, w);
}

/*
 * Whether this worker claims on a NOTIFY.  The trigger's payload is
 * "<transaction id> <due jobs>" (migration 007).  The workers of an
 * instance share a small table of recent notifications, and a worker takes
 * one only while the workers that took it have too little room for its
 * jobs: one claim per instance for a job that comes alone, where every
 * worker used to claim, and as many workers as a burst needs.  A worker
 * whose claim would wait (an sql handler's statement holds its
 * connection), or that has no room, or cannot read the payload, claims as
 * before, so no job waits on it; one that takes a notification and then
 * dies leaves its jobs to the poll timer.
 *
 * Any role can NOTIFY pgjob.  A forged notification costs at most one
 * claim per worker (claims never pile up: one is in flight at a time), and
 * cannot stand in for a real one, whose key includes the backend that sent
 * it (stats_notify_take()).
 */
static int
answer_notify(struct worker *w, const char *payload, int be_pid)
{
	uint64_t xid;
	long long due;
	if (w->draining)
		return 0; /* claims no more: takes no turn */
	if (!w->stats || stats_notify_parse(payload, &xid, &due) < 0 ||
	    w->sql_inflight > 0)
		return 1;
	long long room = 0;
	for (size_t i = 0; i < w->cfg->nqueues; i++)
		if (w->serves[i] &&
		    w->cfg->queues[i].concurrency > w->running[i])
			room += w->cfg->queues[i].concurrency - w->running[i];
	return stats_notify_take(w->stats, xid, be_pid, due, room);
}

static void
on_notify(void *arg, const char *channel, const char *payload, int be_pid)
{
	struct worker *w = arg;
	if (answer_notify(w, payload, be_pid))
		w->want_claim = 1;
	/* New jobs may sort before this worker's positions. */
	w->notified = 1;
}

static void
on_lost(void *arg, const char *why)
{
	struct worker *w = arg;
	char *msg = xstrdup(why);
	msg[strcspn(msg, "\n")] = '\0';
	log_warn("database connection lost (%s); the slot is gone too, "
		 "reconnecting",
		 msg);
	free(msg);
	/* Free later: we are inside one of its callbacks. */
	w->online = 0;
	w->cycle_inflight = 0;
	duty_set_db(w->duty, NULL, 0);
	__atomic_store_n(&w->st->connected, 0, __ATOMIC_RELAXED);
	stats_add(&w->st->reconnects, 1);
	ev_timer_set(&w->reconnect, 0.05, 0.);
	ev_timer_start(w->loop, &w->reconnect);
}

static void
on_reconnect(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct worker *w = t->data;
	if (w->db) {
		dbev_free(w->db);
		w->db = NULL;
	}
	connect_db(w);
}

static void
schedule_reconnect(struct worker *w)
{
	double d = (double)backoff_full_jitter(200, 30000, w->reconnects++,
					       backoff_random()) /
		   1000.0;
	ev_timer_set(&w->reconnect, d + 0.05, 0.);
	ev_timer_start(w->loop, &w->reconnect);
}

/* Synchronous setup on a fresh connection; returns 0, -1 (retry later) or
 * an exit code > 0. */
static int
setup_session(struct worker *w, PGconn *conn)
{
	char *err = NULL;
	int slot;

	PQclear(PQexec(conn, "set idle_in_transaction_session_timeout = "
			     "'60s'"));
	/* The claim's plan does not depend on its parameters: planning it
	 * anew for every batch (PostgreSQL's custom plans) cost about a
	 * tenth of the server's time per job.  And its estimated cost, which
	 * counts every branch of every mode, can pass jit_above_cost: JIT
	 * compiling it took longer than running it.  An sql handler's own
	 * statement gets both settings back (queue_run_sql). */
	PQclear(PQexec(conn, "set plan_cache_mode = force_generic_plan;"
			     " set jit = off"));
	if (migrate_check(conn, NULL, &err) < 0) {
		log_error("%s", err);
		free(err);
		return PQstatus(conn) == CONNECTION_OK ? EXIT_CONFIG : -1;
	}
	slot = FAILPOINT(FP_SLOT_LOCK)
		       ? (err = xstrdup("taking a slot: failpoint"), -1)
		       : lease_slot_acquire(conn, w->cfg->lock_class,
					    w->cfg->max_slots, &err);
	if (slot < 0)
		goto fail;
	if (slot == 0) {
		log_error("no free slot among 1..%d (lock class %lld): "
			  "raise max_slots or run fewer workers",
			  w->cfg->max_slots, (long long)w->cfg->lock_class);
		return EXIT_TEMPFAIL;
	}
	if (w->slot && slot != w->slot)
		log_info("slot changed from %d to %d after reconnecting",
			 w->slot, slot);
	w->slot = slot;
	log_set_slot(slot);
	free(w->locked_by);
	w->locked_by = xasprintf("%s:%d", w->host, slot);
	struct lease_worker lw = {slot,		  w->host,
				  w->pid,	  w->supervisor_pid,
				  PGJOBD_VERSION, w->kinds_literal};
	if (lease_worker_register(conn, &lw, &err) < 0)
		goto fail;
	if (FAILPOINT(FP_LISTEN)) {
		err = xstrdup("LISTEN: failpoint");
		goto fail;
	}
	PGresult *res = PQexec(conn, "listen pgjob");
	int ok = PQresultStatus(res) == PGRES_COMMAND_OK;
	PQclear(res);
	if (!ok) {
		err = db_error_text(conn, NULL);
		goto fail;
	}
	return 0;
fail:
	log_warn("%s", err);
	free(err);
	return -1;
}

static void
connect_db(struct worker *w)
{
	char *err;
	PGconn *conn =
		FAILPOINT(FP_CONNECT)
			? (err = xstrdup("cannot connect: failpoint"), NULL)
			: db_connect(w->cfg->conninfo, "pgjobd", &err);
	if (!conn) {
		log_warn("%s", err);
		free(err);
		schedule_reconnect(w);
		return;
	}
	int rc = setup_session(w, conn);
	if (rc > 0) {
		PQfinish(conn);
		w->exit_code = rc;
		w->draining = 1;
		ev_break(w->loop, EVBREAK_ALL);
		return;
	}
	struct dbev_hooks hooks = {on_notify, on_lost, w};
	if (rc < 0 || !(w->db = dbev_new(w->loop, conn, &hooks))) {
		PQfinish(conn);
		schedule_reconnect(w);
		return;
	}
	int serial = 0, per_key = 0;
	for (size_t i = 0; i < w->cfg->nqueues; i++) {
		if (!w->serves[i])
			continue;
		serial |= w->cfg->queues[i].mode == QUEUE_SERIAL;
		per_key |= w->cfg->queues[i].mode == QUEUE_PER_KEY;
	}
	queue_prepare(w->db, serial, per_key);
	/* No answer within a lease: the path is dead, whatever TCP says. */
	dbev_set_timeout(w->db, w->cfg->lease_ms);
	if (w->connected_once)
		log_info("connected again; re-checking %d held leases",
			 w->nheld);
	else
		log_info("connected, slot %d, handling %zu kinds", w->slot,
			 w->nkinds);
	w->reconnects = 0;
	w->connected_once = 1;
	duty_set_db(w->duty, w->db, w->slot);
	__atomic_store_n(&w->st->pid, w->pid, __ATOMIC_RELAXED);
	__atomic_store_n(&w->st->slot, w->slot, __ATOMIC_RELAXED);
	stats_set(&w->st->last_ok_ms, util_now_ms());
	__atomic_store_n(&w->st->connected, 1, __ATOMIC_RELAXED);
	w->want_claim = 1;
	w->online = 1;
	renew_all(w);
	sql_next(w);
}

/* Stops every running handler and gives its job back. */
static void
stop_now(struct worker *w, const char *why)
{
	if (w->stopping)
		return;
	w->stopping = w->draining = 1;
	duty_stop(w->duty);
	log_info("stopping now (%s): %d jobs held", why, w->nheld);
	for (struct held *h = w->head; h; h = h->next) {
		if (h->state == HELD_SQL_WAITING) {
			/* Never started: given back as it is. */
			struct handler_result r = {OUTCOME_RETRY, NULL, NULL,
						   -1};
			h->release = 1;
			job_ended(h, &r);
			continue;
		}
		if (h->state != HELD_RUNNING || !h->run)
			continue; /* an sql handler ends by its timeout */
		h->release = 1;
		handler_stop(h->run, why);
	}
	/* Whatever cannot be written by then expires on its own. */
	ev_timer_set(&w->final, 10., 0.);
	ev_timer_start(w->loop, &w->final);
}

static void
on_final(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct worker *w = t->data;
	log_warn("exiting with %d jobs unwritten; their leases expire",
		 w->nheld);
	ev_break(loop, EVBREAK_ALL);
}

static void
on_shutdown_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
	stop_now(t->data, "shutdown_timeout reached");
}

static void
on_term(struct ev_loop *loop, ev_signal *s, int revents)
{
	struct worker *w = s->data;
	if (getppid() != w->supervisor_pid) {
		/* PR_SET_PDEATHSIG: the backstop of the pipe's EOF. */
		stop_now(w, "the supervisor is gone");
		return;
	}
	if (w->draining && !w->retiring) {
		stop_now(w, "second stop signal");
		return;
	}
	w->draining = 1;
	w->retiring = 0;    /* a stop: the deadline holds again */
	duty_stop(w->duty); /* tasks do not end on their own */
	log_info("draining: %d jobs held, up to %.0fs", w->nheld,
		 (double)w->cfg->shutdown_timeout_ms / 1000.0);
	ev_timer_set(&w->shutdown, (double)w->cfg->shutdown_timeout_ms / 1000.,
		     0.);
	ev_timer_start(loop, &w->shutdown);
}

/*
 * SIGUSR2: a reload retired this worker.  Workers on the new config take
 * new work from now on; this one claims nothing more, gives its cluster
 * duties up at once (their new holders run on the new config), and
 * finishes the jobs it holds however long they take: a reload restarts no
 * job.  A stop signal after this drains it as usual, up to
 * shutdown_timeout.
 */
static void
on_retire(struct ev_loop *loop, ev_signal *s, int revents)
{
	struct worker *w = s->data;
	if (w->draining)
		return;
	w->draining = w->retiring = 1;
	duty_stop(w->duty);
	log_info("retiring (reload): finishing the %d jobs held; new work "
		 "goes to the workers on the new config",
		 w->nheld);
}

static void
on_parent(struct ev_loop *loop, ev_io *io, int revents)
{
	char c;
	ssize_t n = read(io->fd, &c, 1);
	if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
		ev_io_stop(loop, io);
		stop_now(io->data, "the supervisor is gone");
	}
}

static void
setup_kinds(struct worker *w)
{
	const struct config *c = w->cfg;
	w->kinds = xcalloc(c->nhandlers + 1, sizeof(char *));
	w->running = xcalloc(c->nqueues, sizeof(int));
	w->pos = xcalloc(c->nqueues, sizeof(*w->pos));
	w->pos_valid = xcalloc(c->nqueues, sizeof(int));
	w->more = xcalloc(c->nqueues, sizeof(int));
	for (size_t i = 0; i < c->nqueues; i++)
		w->more[i] = 1;
	w->serves = xcalloc(c->nqueues, sizeof(int));
	for (size_t i = 0; i < c->nhandlers; i++) {
		w->kinds[w->nkinds++] = c->handlers[i].kind;
		for (size_t q = 0; q < c->nqueues; q++)
			if (strcmp(c->queues[q].name, c->handlers[i].queue) ==
			    0)
				w->serves[q] = 1;
	}
	w->kinds_literal =
		queue_text_array((const char *const *)w->kinds, w->nkinds);
}

/*
 * Seconds between heartbeats, and between the renewals of cluster-wide
 * leases: 10 s, or a third of the lease when that is shorter.  A worker is
 * live while its heartbeat is younger than three periods.
 */
static double
period(const struct worker *w)
{
	double third = (double)w->cfg->lease_ms / 3000.;
	return third < 10. ? third : 10.;
}

static void
init_watchers(struct worker *w, int parent_fd)
{
	struct ev_loop *l = w->loop;
	double lease = (double)w->cfg->lease_ms / 1000.;
	double poll = (double)w->cfg->poll_interval_ms / 1000.;

	ev_prepare_init(&w->prepare, on_prepare);
	ev_timer_init(&w->poll, on_poll, poll, poll);
	ev_timer_init(&w->renew, on_renew_timer, lease / 3, lease / 3);
	ev_timer_init(&w->heartbeat, on_heartbeat, period(w), period(w));
	ev_timer_init(&w->deadline, on_deadline_timer, 0.25, 0.25);
	ev_timer_init(&w->reconnect, on_reconnect, 0., 0.);
	ev_timer_init(&w->shutdown, on_shutdown_timer, 0., 0.);
	ev_timer_init(&w->final, on_final, 0., 0.);
	ev_timer_init(&w->depth, on_depth, 1., 5.);
	w->depth.data = w;
	if (w->stats && w->cfg->metrics_listen)
		ev_timer_start(l, &w->depth);
	ev_signal_init(&w->sigterm, on_term, SIGTERM);
	ev_signal_init(&w->sigint, on_term, SIGINT);
	ev_signal_init(&w->sigusr2, on_retire, SIGUSR2);
	ev_io_init(&w->parent, on_parent, parent_fd, EV_READ);
	w->prepare.data = w->poll.data = w->renew.data = w->heartbeat.data =
		w->deadline.data = w->reconnect.data = w->shutdown.data =
			w->final.data = w->sigterm.data = w->sigint.data =
				w->sigusr2.data = w->parent.data = w;
	ev_prepare_start(l, &w->prepare);
	ev_timer_start(l, &w->poll);
	ev_timer_start(l, &w->renew);
	ev_timer_start(l, &w->heartbeat);
	ev_timer_start(l, &w->deadline);
	ev_signal_start(l, &w->sigterm);
	ev_signal_start(l, &w->sigint);
	ev_signal_start(l, &w->sigusr2);
	if (parent_fd >= 0)
		ev_io_start(l, &w->parent);
}

/* Removes the worker's row, best effort, before the connection closes. */
static void
unregister(struct worker *w)
{
	if (!w->db || w->slot <= 0)
		return;
	/* The prepare watcher would break out of every run before it polls. */
	ev_prepare_stop(w->loop, &w->prepare);
	ev_timer_stop(w->loop, &w->final);
	ev_timer_set(&w->final, 5., 0.);
	ev_timer_start(w->loop, &w->final);
	while (dbev_pending(w->db) > 0 && ev_is_active(&w->final))
		ev_run(w->loop, EVRUN_ONCE);
	if (dbev_pending(w->db) > 0)
		return;
	PGconn *conn = dbev_conn(w->db);
	if (PQexitPipelineMode(conn) && PQsetnonblocking(conn, 0) == 0)
		lease_worker_unregister(conn, w->slot, w->pid);
}

int
worker_main(const struct config *cfg, int parent_fd, int supervisor_pid,
	    struct stats *stats, int index)
{
	struct worker w = {.cfg = cfg,
			   .supervisor_pid = supervisor_pid,
			   .stats = stats,
			   .index = index};
	/* Without the shared area (mmap failed), count into a private one. */
	struct stats_worker own = {0};
	w.st = stats && index < STATS_MAX_WORKERS ? &stats->w[index] : &own;
	handler_set_pgid_table(w.st->handler_pgids, STATS_MAX_HANDLERS);

	self = &w;
	log_init("worker", cfg->log_level, cfg->log_format == LOG_FORMAT_JSON);
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	/* The supervisor's loop watched SIGCHLD: exec handlers need the
	 * default, or their exit status would be lost. */
	signal(SIGCHLD, SIG_DFL);
	if (supervisor_pid > 0 && getppid() != supervisor_pid)
		return 1;
	w.pid = getpid();
	if (gethostname(w.host, sizeof(w.host) - 1) < 0)
		strcpy(w.host, "localhost");
	w.loop = ev_loop_new(EVFLAG_AUTO);
	setup_kinds(&w);
	handler_init(cfg);
	char *holder = xasprintf("%s/%d", w.host, w.pid);
	w.duty = duty_new(w.loop, cfg, holder, (int64_t)(period(&w) * 1000.));
	free(holder);
	init_watchers(&w, parent_fd);
	/* Blocked by the supervisor until now (see spawn()): a retire sent
	 * meanwhile is delivered here. */
	sigset_t usr2;
	sigemptyset(&usr2);
	sigaddset(&usr2, SIGUSR2);
	sigprocmask(SIG_UNBLOCK, &usr2, NULL);
	connect_db(&w);
	if (!w.exit_code)
		ev_run(w.loop, 0);
	unregister(&w);
	duty_free(w.duty);
	handler_fini();
	dbev_free(w.db);
	while (w.head)
		held_unlink(&w, w.head);
	ev_loop_destroy(w.loop);
	free(w.kinds);
	free(w.kinds_literal);
	free(w.running);
	free(w.pos);
	free(w.pos_valid);
	free(w.more);
	free(w.serves);
	free(w.locked_by);
	log_info("exiting with status %d", w.exit_code);
	return w.exit_code;
}
