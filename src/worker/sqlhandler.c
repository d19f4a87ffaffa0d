/*
 * sqlhandler: an sql handler's job on the worker's side (docs/handlers.md,
 * "sql").  Its statement runs on the worker's own connection, in one
 * transaction with the job's end (src/db/sqlhandler.c: queue_run_sql()),
 * so it waits for its turn there: one at a time, the longest waiting
 * first.  Its outcome: done and written, the lease found lost, or a
 * failure, which is an end like any other handler's to decide and write
 * (held_ended()).
 */
#include "worker/internal.h"

#include "common/stats.h"
#include "common/util.h"

static void
on_sql_done(void *arg, enum queue_sql_end end, const char *error)
{
	struct held *h = arg;
	struct worker *w = h->w;
	struct log_job l = held_log(h);
	struct handler_result r = {.outcome = OUTCOME_RETRY, .retry_in_ms = -1};

	if (w->sql_inflight > 0)
		w->sql_inflight--;
	switch (end) {
	case QUEUE_SQL_DONE:
		log_job(LOG_DEBUG, &l, "done");
		held_ended_written(h, 1);
		break;
	case QUEUE_SQL_LEASE:
		log_job(LOG_WARN, &l,
			"lease lost before the statement ran; "
			"nothing was done");
		held_ended_written(h, 0);
		break;
	case QUEUE_SQL_FAILED:
	case QUEUE_SQL_TIMED_OUT:
	case QUEUE_SQL_CONN_LOST:
		/* Rolled back (or, if the connection broke after the commit,
		 * done: then the compare-and-set refuses this end). */
		r.error = xstrdup(error);
		r.timed_out = end == QUEUE_SQL_TIMED_OUT;
		held_ended(h, &r);
		handler_result_clear(&r);
		break;
	}
	sqlhandler_next(w);
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
	/* Its transaction can end jobs with children too, and no claim of
	 * this worker's follows it at once: the NOTIFY it sends is for every
	 * worker (worker.c, send_turn()). */
	if (w->stats)
		stats_claim_behind(w->stats, w->index, 0, 0);
	/* Runs on this worker's connection, in the transaction that also
	 * ends the job: see queue_run_sql(). */
	queue_run_sql(w->db, &h->job, h->job.handler->statement, limit,
		      on_sql_done, h);
}

void
sqlhandler_next(struct worker *w)
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
