/*
 * held: the jobs a worker holds, from the claim to the end written.
 *
 * A claimed job starts its handler at once (an sql handler's job waits for
 * its turn on the connection, sqlhandler.c: one statement on it at a
 * time).  When the handler reports, the attempt's end is decided here
 * (done, a retry after a delay, dead) and waits in state DONE until the
 * loop's turn (worker.c) has held_send_ends() send every end decided in
 * one statement; what the database wrote or refused comes back here too
 * (held_written()).  One path for every end: decided, sent and answered in
 * this file.  An sql handler's end is the exception that proves it: it is
 * written in the handler's own transaction, and only counted here
 * (held_ended_written()).
 */
#include "worker/internal.h"
#include "worker/otlp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/backoff.h"
#include "common/duration.h"
#include "common/config.h"
#include "common/stats.h"
#include "common/trace.h"
#include "common/util.h"
#include "db/db.h"
#include "db/sqlstate.h"

struct log_job
held_log(const struct held *h)
{
	return (struct log_job){h->job.id, h->job.kind, h->job.attempt};
}

struct held *
held_find(struct worker *w, int64_t id, int64_t token)
{
	/* An answer about an earlier attempt of a job held again is about
	 * none of ours: match the token too. */
	for (struct held *h = w->head; h; h = h->next)
		if (h->job.id == id && h->job.lease_token == token)
			return h;
	return NULL;
}

void
held_unlink(struct worker *w, struct held *h)
{
	if (h->prev)
		h->prev->next = h->next;
	else
		w->head = h->next;
	if (h->next)
		h->next->prev = h->prev;
	w->nheld--;
	if (h->again)
		w->wq[h->queue].running--;
	handler_result_clear(&h->res);
	job_clear(&h->job);
	free(h->carried_error);
	free(h);
}

/*
 * Whether a job's end calls for a claim.  Its place in the queue is free,
 * but a claim finds work only where the queue's last claim came back full
 * (due jobs beyond what it asked for may wait), the job itself went back
 * to the queue (a retry, due now or soon), or the queue is serial or
 * per_key (the end makes the next job of its line eligible), or the job
 * had children (its end may have made them due: the claim goes out in the
 * round trip of the end, right behind it, and takes a chain's next step
 * without waiting for the end's NOTIFY and a round trip of its own).  New
 * jobs send a NOTIFY, and the poll timer claims in any case: a claim after
 * every end of a quiet queue only found nothing.
 */
static void
claim_after_end(struct worker *w, size_t q, enum job_state state, int parent)
{
	if (w->draining)
		return;
	if (!(w->wq[q].more || w->cfg->queues[q].mode != QUEUE_PARALLEL ||
	      state == JOB_AVAILABLE || parent))
		return;
	/* A limited queue alone: its claim is a statement of its own, and
	 * the others have nothing new. */
	if (w->wq[q].limited)
		w->wq[q].want = 1;
	else
		w->want_claim = 1;
}

/*
 * Whether a failure due again at once runs again here, in place
 * (queue_finish's again; docs/daemon.md, "Retries"): not a job that should
 * go back to its queue for anyone's claim.  Not while the worker drains;
 * not a job whose lease deadline passed (the lease may be gone); not a
 * limited queue's, whose every attempt is the claim's to allow (a rate,
 * a concurrency across the cluster, a pause); not one whose server asked
 * its queue to wait.
 */
static int
again_here(const struct held *h)
{
	const struct worker *w = h->w;
	return !w->draining && !h->overdue && !w->wq[h->queue].limited &&
	       h->res.throttle_ms <= 0;
}

/* Decides how the attempt ends: done, a retry after a delay, or dead. */
static void
decide(struct held *h)
{
	struct handler_result *r = &h->res;
	const struct handler_conf *hc = h->job.handler;
	int max = h->job.max_attempts;

	h->fin = (struct queue_finish){.id = h->job.id,
				       .token = h->job.lease_token,
				       .result = r->result,
				       .error = r->error,
				       .wall_ms = h->wall_ms,
				       .cpu_ms = h->cpu_ms,
				       .max_rss_kb = h->max_rss_kb,
				       .status = -1};
	if (h->release) {
		h->fin.state = JOB_AVAILABLE;
		h->fin.refund = 1;
		h->fin.error = "interrupted: the worker shut down";
		return;
	}
	if (r->outcome == OUTCOME_DONE) {
		h->fin.state = JOB_DONE;
		return;
	}
	/* A snooze gives the attempt back and leaves last_error alone: it
	 * is not a failure, whatever max_attempts says.  The database counts
	 * it, and past the cap writes it dead (queue_finish()). */
	if (r->outcome == OUTCOME_RETRY && r->snooze && r->retry_in_ms >= 0) {
		h->fin.state = JOB_AVAILABLE;
		h->fin.snooze = 1;
		h->fin.refund = 1;
		h->fin.error = NULL;
		h->fin.delay_ms = r->retry_in_ms;
		return;
	}
	/* A failure keeps its status with its attempt (the done path
	 * sends none: sql/upgrade/013_attempts.sql). */
	if (r->has_status)
		h->fin.status = r->status;
	/* Attempts lost with their worker do not count here. */
	int failed = h->job.attempt - h->job.lost_attempts;
	if (r->outcome == OUTCOME_DEAD || failed >= max) {
		h->fin.state = JOB_DEAD;
		return;
	}
	h->fin.state = JOB_AVAILABLE;
	h->fin.delay_ms =
		r->retry_in_ms >= 0
			? r->retry_in_ms
			: backoff_job_delay(hc->backoff.base_ms,
					    hc->backoff.max_ms, h->job.attempt,
					    backoff_random());
	if (h->fin.delay_ms == 0 && again_here(h)) {
		h->fin.again = 1;
		h->fin.lease_ms = h->w->cfg->lease_ms;
		h->again = 1;
	}
}

/*
 * The line of a failed attempt's end, once the database took it: before,
 * it could be the end of a job that another worker now holds (this one
 * was frozen past its lease), which is not this worker's to retry or to
 * declare dead; that one logs the lease loss alone (held_written()).
 */
static void
log_end(struct held *h, int capped)
{
	/* Its own error: not the one carried from a retry in place before
	 * it (carried_error), which goes to the job's row only. */
	const char *own =
		h->fin.error != h->carried_error ? h->fin.error : NULL;
	const char *err = own ? own : "(no error text)";
	/* A snooze's reason, which is not written as an error. */
	const char *why = h->res.error ? h->res.error : "the handler asked";
	struct log_job l = held_log(h);
	char dur[32];

	if (h->release)
		return;
	if (h->fin.snooze && capped)
		log_job(LOG_WARN, &l,
			"dead: snoozed %d times, the most a job may (%s)",
			QUEUE_MAX_SNOOZES, why);
	else if (h->fin.snooze)
		log_job(LOG_INFO, &l, "snoozed, next run in %s (%s)",
			duration_format(h->fin.delay_ms, dur, sizeof(dur)),
			why);
	else if (h->fin.state == JOB_DEAD)
		log_job(LOG_WARN, &l, "dead after %d failed attempts of %d: %s",
			h->job.attempt - h->job.lost_attempts,
			h->job.max_attempts, err);
	else if (h->fin.again)
		log_job(LOG_INFO, &l, "attempt failed, retry at once: %s", err);
	else if (h->fin.state == JOB_AVAILABLE)
		log_job(LOG_INFO, &l, "attempt failed, retry in %s: %s",
			duration_format(h->fin.delay_ms, dur, sizeof(dur)),
			err);
}

/* Counts the handler's run time. */
static void
observe_run(struct held *h)
{
	if (h->sk)
		stats_observe_dur(h->w->stats, h->sk,
				  (util_now_ms() - h->started_ms) * 1000);
}

/*
 * What the attempt used, for its row (last_wall_ms, last_cpu_ms,
 * last_max_rss_kb: sql/upgrade/012_attempt_usage.sql) and the kind's counters:
 * its wall time as the worker saw it, from the start to the report, and what
 * the handler measured (exec: CPU and peak RSS of its child; plugin: CPU
 * of the call); -1 where it measured nothing.  Counted even when the lease
 * was lost: the time was spent.
 */
static void
note_usage(struct held *h)
{
	const struct handler_result *r = &h->res;

	h->wall_ms = util_now_ms() - h->started_ms;
	h->cpu_ms = r->measured && r->cpu_ms >= 0 ? r->cpu_ms : -1;
	h->max_rss_kb = r->measured && r->max_rss_kb >= 0 ? r->max_rss_kb : -1;
	if (h->sk)
		stats_observe_usage(h->sk, h->cpu_ms, h->max_rss_kb);
}

/* Counts how an attempt's end was written: written, or refused. */
static void
count_end(struct held *h, enum job_state state, int written)
{
	struct lease_totals *t = &h->w->ended;
	/* A snooze that stayed one is neither failed nor retried: it
	 * would count in the failure rate (docs/operations.md). */
	int retried = state == JOB_AVAILABLE && !h->release && !h->fin.snooze;
	if (written && state == JOB_DONE)
		t->done++;
	else if (written && (state == JOB_DEAD || retried))
		t->failed++;
	if (written && retried)
		t->retried++;
	/* Not an attempt given back at a shutdown: it did not end. */
	if (written && !h->release)
		history_ended(h, state, retried);
	if (!h->sk)
		return;
	if (!written)
		stats_add(&h->sk->lost, 1);
	else if (state == JOB_DONE)
		stats_add(&h->sk->done, 1);
	else if (state == JOB_DEAD)
		stats_add(&h->sk->dead, 1);
	else if (retried)
		stats_add(&h->sk->retried, 1);
	/* Also in retried or dead: the timeouts apart. */
	if (written && h->res.timed_out && state != JOB_DONE)
		stats_add(&h->sk->timed_out, 1);
}

/* The attempt's span, for a job in a trace (docs/tracing.md). */
static void
send_span(struct held *h, enum job_state state, int written)
{
	const char *outcome = !written		  ? "lost"
			      : h->release	  ? "interrupted"
			      : state == JOB_DONE ? "done"
			      : state == JOB_DEAD ? "dead"
			      : h->fin.snooze	  ? "snoozed"
						  : "retry";
	int64_t wall =
		h->wall_ms > 0 ? h->wall_ms : util_now_ms() - h->started_ms;
	otlp_span(h->w->otlp, &h->job, wall, outcome, h->w->locked_by);
}

/*
 * An adaptive queue's server said to wait (an http 429 or 503 with
 * Retry-After): the whole queue waits, across the cluster
 * (pgjob.throttle()), not only this job.
 */
static void
throttle(struct held *h)
{
	struct worker *w = h->w;
	const struct queue_conf *q = &w->cfg->queues[h->queue];
	char dur[32];
	if (h->res.throttle_ms <= 0 || !q->adaptive || h->lost || !w->db)
		return;
	struct log_job l = held_log(h);
	log_job(LOG_INFO, &l, "queue throttled for %s: the server asked so",
		duration_format(h->res.throttle_ms, dur, sizeof(dur)));
	queue_throttle(w->db, h->job.queue, h->res.throttle_ms);
}

void
held_ended(struct held *h, struct handler_result *res)
{
	struct worker *w = h->w;
	h->run = NULL;
	h->res = *res;
	*res = (struct handler_result){.outcome = OUTCOME_DONE,
				       .retry_in_ms = -1};
	throttle(h);
	h->state = HELD_DONE;
	observe_run(h);
	note_usage(h);
	if (h->lost) {
		w->wq[h->queue].running--;
		struct log_job l = held_log(h);
		if (h->cancelled)
			log_job(LOG_INFO, &l, "stopped: cancelled");
		else
			log_job(LOG_WARN, &l,
				"result discarded: the lease was lost");
		held_unlink(w, h);
		return;
	}
	decide(h);
	/* An end without an error of its own writes the last retry in
	 * place's (carried_error): the job's row ends as it did when that
	 * retry wrote last_error itself.  A snooze too: its row keeps
	 * last_error, and its attempt row takes no error. */
	if (!h->fin.error && h->carried_error)
		h->fin.error = h->carried_error;
	if (h->again)
		return; /* it keeps its place: held_written() runs it again */
	w->wq[h->queue].running--;
	claim_after_end(w, h->queue, h->fin.state, h->job.parent);
}

/* handler_start()'s done callback. */
static void
on_handler_done(void *arg, struct handler_result *res)
{
	held_ended(arg, res);
}

/*
 * An attempt whose end was written with its work (an sql handler's, in its
 * transaction), or that found its lease gone before anything ran.
 */
void
held_ended_written(struct held *h, int written)
{
	struct worker *w = h->w;
	observe_run(h);
	count_end(h, JOB_DONE, written);
	send_span(h, JOB_DONE, written);
	w->wq[h->queue].running--;
	claim_after_end(w, h->queue, JOB_DONE, h->job.parent);
	held_unlink(w, h);
}

/* --- starting ------------------------------------------------------------ */

static int
payload_is_object(const char *p)
{
	while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')
		p++;
	return *p == '{';
}

/*
 * Why a claimed job must not run at all, or NULL (why is the buffer for
 * the message).  Lost attempts are not failures, but a job that takes its
 * worker down every time (a crashing plugin, an OOM kill) must stop
 * somewhere: they have an allowance of their own, max_attempts
 * (docs/daemon.md, "Attempts").
 */
static const char *
refusal(const struct worker *w, const struct job *job, char *why, size_t len)
{
	if (job->lost_attempts > job->max_attempts) {
		snprintf(why, len,
			 "lost %d attempts: the worker running it died or "
			 "lost its lease each time (allowance: %d)",
			 job->lost_attempts, job->max_attempts);
		return why;
	}
	if (!job->payload) {
		/* The claim did not send it: see queue_claim_req. */
		snprintf(why, len,
			 "payload of %lld bytes is over max_payload_bytes "
			 "(%lld)",
			 (long long)job->payload_bytes,
			 (long long)w->cfg->max_payload_bytes);
		return why;
	}
	if (!payload_is_object(job->payload))
		return "payload is not a JSON object";
	return NULL;
}

/* Starts the attempt of h: its handler, or its turn on the connection. */
static void
run_attempt(struct held *h)
{
	if (h->job.handler->type == HANDLER_SQL) {
		h->state = HELD_SQL_WAITING; /* sqlhandler_next() */
		return;
	}
	h->state = HELD_RUNNING;
	h->run = handler_start(h->w->loop, &h->job, h->w->slot, on_handler_done,
			       h);
}

/*
 * sent_ms is when the claim was sent: the lease runs from a moment between
 * that and the answer, so the deadline counts from the earlier one.
 */
void
held_start(struct worker *w, struct job *job, size_t q, int64_t sent_ms)
{
	struct held *h = xcalloc(1, sizeof(*h));
	h->w = w;
	h->job = *job;
	free(job);
	h->job.handler = worker_handler(w, h->job.kind);
	h->queue = q;
	h->started_ms = util_now_ms();
	history_started(h);
	if ((h->sk = stats_kind(w->st, h->job.kind, h->job.queue)) != NULL) {
		stats_add(&h->sk->claimed, 1);
		if (h->job.wait_ms >= 0)
			stats_observe_wait(h->sk, h->job.wait_ms * 1000);
	}
	h->deadline_ms = sent_ms + w->cfg->lease_ms - lease_margin(w);
	h->next = w->head;
	if (w->head)
		w->head->prev = h;
	w->head = h;
	w->nheld++;
	w->wq[h->queue].running++;
	if (h->job.max_attempts <= 0)
		h->job.max_attempts = h->job.handler->max_attempts;
	char why[160];
	const char *refuse = refusal(w, &h->job, why, sizeof(why));
	if (refuse) {
		struct handler_result r = {.outcome = OUTCOME_DEAD,
					   .error = xstrdup(refuse),
					   .retry_in_ms = -1};
		struct log_job l = held_log(h);
		log_job(LOG_WARN, &l, "%s", refuse);
		held_ended(h, &r);
		handler_result_clear(&r);
		return;
	}
	run_attempt(h);
}

/*
 * A retry in place whose end the database wrote (held_written()): the job
 * is running again under token + 1 with its lease renewed from sent_ms
 * (when that end was sent), and its next attempt starts now, in the place
 * it kept in its queue's running count.  A worker that began to drain
 * meanwhile gives it back instead, unstarted, as it gives back an sql
 * job still waiting for its turn (held_stop_all()).
 */
static void
again_start(struct held *h, int64_t sent_ms)
{
	struct worker *w = h->w;
	/* The failure's error, for the job's row at its next end
	 * (carried_error); fin.error may be the one carried before. */
	if (h->fin.error && h->fin.error != h->carried_error) {
		free(h->carried_error);
		h->carried_error = xstrdup(h->fin.error);
	}
	h->again = 0;
	h->job.attempt++;
	h->job.lease_token++;
	h->job.wait_ms = 0;
	h->job.waited_us = -1;
	if (h->job.trace)
		trace_attempt(h->job.trace, h->job.traceparent);
	handler_result_clear(&h->res);
	h->res = (struct handler_result){.outcome = OUTCOME_DONE,
					 .retry_in_ms = -1};
	h->fin = (struct queue_finish){0};
	h->solo = h->write_failures = 0;
	h->wall_ms = h->cpu_ms = h->max_rss_kb = -1;
	h->started_ms = util_now_ms();
	h->deadline_ms = sent_ms + w->cfg->lease_ms - lease_margin(w);
	if (w->draining) {
		struct handler_result r = {.outcome = OUTCOME_RETRY,
					   .retry_in_ms = -1};
		h->release = 1;
		held_ended(h, &r);
		return;
	}
	run_attempt(h);
}

/* --- ends written ------------------------------------------------------- */

/*
 * A job's end that PostgreSQL refused for its data (SQLSTATE_CLASS_DATA):
 * the result, which the handler printed and which passed our check, but
 * not jsonb's (a number past numeric's range, say).  The run succeeded: it
 * is written done without its result, and last_error says why, rather than
 * running again.  Returns 1 when it had a result to drop.
 */
static int
drop_result(struct held *h, const struct db_status *st)
{
	if (!h->fin.result || !sqlstate_is(st->sqlstate, SQLSTATE_CLASS_DATA))
		return 0;
	char *note = xasprintf("result not stored: PostgreSQL refused it (%s)",
			       st->text);
	struct log_job l = held_log(h);
	log_job(LOG_WARN, &l, "%s; writing the end without it", note);
	free(h->res.result);
	h->res.result = NULL;
	free(h->res.error);
	h->res.error = note;
	h->fin.result = NULL;
	h->fin.error = note;
	return 1;
}

/* One held job whose end's write failed (a whole batch fails together). */
static void
write_failed(struct worker *w, struct held *h, size_t n,
	     const struct db_status *st)
{
	h->state = HELD_DONE;
	if (st->error == DB_LOST)
		return; /* again after reconnecting */
	/* Alone, the error is this job's own. */
	if (h->solo && st->error == DB_PERMANENT && drop_result(h, st))
		return;
	/* A job whose batch failed is written alone, so one bad result
	 * cannot block the others. */
	h->solo = 1;
	if (n == 1 && ++h->write_failures >= 3) {
		struct log_job l = held_log(h);
		log_job(LOG_ERROR, &l,
			"giving up writing its end (%s); the lease will "
			"expire and it runs again",
			st->text);
		held_unlink(w, h);
	}
}

/* The statement that carried the ends of these jobs answered (st; written:
 * the ids the database wrote, sorted; capped: the snoozes among them that
 * it wrote dead, past the cap). */
static void
held_written(struct worker *w, struct held **held, size_t n,
	     const struct db_status *st, const int64_t *written,
	     size_t nwritten, const int64_t *capped, size_t ncapped,
	     int64_t sent_ms)
{
	for (size_t i = 0; i < n; i++) {
		struct held *h = held[i];
		if (st->error != DB_OK) {
			write_failed(w, h, n, st);
			continue;
		}
		int ok = queue_id_in(written, nwritten, h->job.id);
		int cap = ok && h->fin.snooze &&
			  queue_id_in(capped, ncapped, h->job.id);
		struct log_job l = held_log(h);
		count_end(h, cap ? JOB_DEAD : h->fin.state, ok);
		send_span(h, cap ? JOB_DEAD : h->fin.state, ok);
		if (!ok)
			log_job(LOG_WARN, &l,
				"lease lost: the database refused the end of "
				"this attempt (%s), result discarded",
				job_state_name(h->fin.state));
		else if (h->fin.state == JOB_DONE)
			log_job(LOG_DEBUG, &l, "%s",
				job_state_name(h->fin.state));
		else
			log_end(h, cap);
		if (ok && h->fin.again)
			again_start(h, sent_ms);
		else
			held_unlink(w, h);
	}
}

/* --- ends sent ---------------------------------------------------------- */

/* A batch of ends in flight: the jobs it carries. */
struct ends {
	struct worker *w;
	int64_t sent_ms; /* a retry in place's lease runs from then */
	size_t n;
	struct held *held[];
};

static void
on_ends(void *arg, const struct db_status *st, const int64_t *written, size_t n,
	const int64_t *capped, size_t ncapped)
{
	struct ends *e = arg;
	struct worker *w = e->w;
	char what[64];

	cycle_done(w);
	snprintf(what, sizeof(what), "writing %zu job ends", e->n);
	if (st->answered)
		conn_ok(w, st, what);
	held_written(w, e->held, e->n, st, written, n, capped, ncapped,
		     e->sent_ms);
	free(e);
}

/* The ends waiting to be written (or one written alone, after its batch
 * failed), marked WRITING; NULL when none waits. */
static struct ends *
ends_new(struct worker *w)
{
	size_t n = 0;
	for (struct held *h = w->head; h; h = h->next)
		n += h->state == HELD_DONE;
	if (n == 0)
		return NULL;
	struct ends *e = xcalloc(1, sizeof(*e) + n * sizeof(struct held *));
	e->w = w;
	for (struct held *h = w->head; h; h = h->next) {
		if (h->state != HELD_DONE)
			continue;
		/* A job whose batch failed is written alone, so one bad
		 * result cannot block the others. */
		if (h->solo && e->n > 0)
			continue;
		h->state = HELD_WRITING;
		e->held[e->n++] = h;
		if (h->solo)
			break;
	}
	return e;
}

int
held_send_ends(struct worker *w)
{
	struct ends *e = ends_new(w);
	if (!e)
		return -1;
	int parents = 0;
	struct queue_finish *f = xcalloc(e->n + 1, sizeof(*f));
	for (size_t i = 0; i < e->n; i++) {
		f[i] = e->held[i]->fin;
		parents |= e->held[i]->job.parent && !e->held[i]->again &&
			   f[i].state != JOB_AVAILABLE;
	}
	w->cycle_inflight++;
	e->sent_ms = util_now_ms();
	queue_finish(w->db, f, e->n, w->cfg->retention_ms, on_ends, e);
	free(f);
	return parents;
}

static void
on_given_back(void *arg, const struct db_status *st, const int64_t *written,
	      size_t n, const int64_t *capped, size_t ncapped)
{
	cycle_done(arg);
}

/*
 * A claim that answers after the worker began to retire (a reload): its
 * jobs go back to their queue as they are, unstarted and with the attempt
 * refunded, for the workers on the new config.  Started here, they would
 * run on the old one, or be left behind when the worker exits (their
 * lease then has to expire first).
 */
void
held_give_back(struct worker *w, struct queue_claimed *r)
{
	struct queue_finish *f = xcalloc((size_t)r->njobs + 1, sizeof(*f));
	for (int i = 0; i < r->njobs; i++)
		f[i] = (struct queue_finish){.id = r->jobs[i]->id,
					     .token = r->jobs[i]->lease_token,
					     .state = JOB_AVAILABLE,
					     .refund = 1,
					     .wall_ms = -1,
					     .cpu_ms = -1,
					     .max_rss_kb = -1,
					     .status = -1};
	w->cycle_inflight++;
	queue_finish(w->db, f, (size_t)r->njobs, w->cfg->retention_ms,
		     on_given_back, w);
	free(f);
	for (int i = 0; i < r->njobs; i++)
		job_free(r->jobs[i]);
}

/* --- stopping now -------------------------------------------------------- */

void
held_stop_all(struct worker *w, const char *why)
{
	struct held *next;
	for (struct held *h = w->head; h; h = next) {
		next = h->next;
		if (h->state == HELD_SQL_WAITING) {
			/* Never started: given back as it is. */
			struct handler_result r = {.outcome = OUTCOME_RETRY,
						   .retry_in_ms = -1};
			h->release = 1;
			held_ended(h, &r);
			continue;
		}
		if (h->state != HELD_RUNNING || !h->run)
			continue; /* an sql handler ends by its timeout */
		h->release = 1;
		handler_stop(h->run, why);
	}
}
