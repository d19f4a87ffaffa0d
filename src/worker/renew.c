/*
 * renew: the leases of the jobs a worker holds.
 *
 * Every third of a lease, one statement renews every lease the worker
 * holds; an answer is matched to the attempt it was sent for (id and
 * token).  A job not renewed has been taken over (or cancelled by an
 * operator): its handler is stopped and its result discarded.  A job whose
 * lease could not be renewed by its deadline (the claim's or the last
 * renewal's send time, plus a lease, less a fifth) has its handler stopped
 * by the worker itself: the database can refuse a late write, but only the
 * worker can stop a handler that a paused or partitioned worker left
 * running (docs/daemon.md, "Leases").
 */
#include "worker/internal.h"

#include <stdlib.h>

#include "common/config.h"
#include "common/stats.h"
#include "common/util.h"
#include "db/db.h"
#include "worker/duty.h"

/* Renewal: when it was sent. */
struct renewal {
	struct worker *w;
	int64_t sent_ms;
};

/* A held job whose lease is gone: stop its handler, or forget it. */
static void
lease_gone(struct worker *w, struct held *h, int cancelled)
{
	struct log_job l = held_log(h);
	log_job(cancelled ? LOG_INFO : LOG_WARN, &l, "%s; stopping it",
		cancelled ? "cancelled by an operator"
			  : "lease lost (another worker holds the job now)");
	h->lost = 1;
	h->cancelled = cancelled;
	/* The alert on leases lost counts this, the common case, as well as
	 * ends the database refused (held_written()). */
	if (!cancelled && h->sk)
		stats_add(&h->sk->lost, 1);
	if (h->state == HELD_RUNNING) {
		if (h->run)
			handler_stop(h->run,
				     cancelled ? "cancelled" : "lease lost");
		return;
	}
	if (h->state == HELD_SQL_WAITING)
		w->wq[h->queue].running--;
	held_unlink(w, h);
}

static void
on_renew(void *arg, const struct db_status *st, const struct queue_renewal *r,
	 size_t n)
{
	struct renewal *rn = arg;
	struct worker *w = rn->w;
	if (!st->answered || !conn_ok(w, st, "renewing leases")) {
		free(rn);
		return;
	}
	for (size_t k = 0; k < n; k++) {
		struct held *h = held_find(w, r[k].id, r[k].token);
		if (!h || h->lost)
			continue;
		if (r[k].renewed) {
			h->deadline_ms = rn->sent_ms + w->cfg->lease_ms -
					 lease_margin(w);
			continue;
		}
		if (h->state == HELD_WRITING)
			continue; /* its finish will tell */
		lease_gone(w, h, r[k].cancelled);
	}
	free(rn);
}

void
renew_all(struct worker *w)
{
	if (!w->db || w->nheld == 0)
		return;
	int64_t *ids = xcalloc((size_t)w->nheld, sizeof(int64_t));
	int64_t *tokens = xcalloc((size_t)w->nheld, sizeof(int64_t));
	size_t n = 0;
	for (struct held *h = w->head; h; h = h->next) {
		if (h->lost)
			continue;
		tokens[n] = h->job.lease_token;
		ids[n++] = h->job.id;
	}
	struct renewal *rn = xcalloc(1, sizeof(*rn));
	rn->w = w;
	rn->sent_ms = util_now_ms();
	queue_renew(w->db, ids, tokens, n, w->cfg->lease_ms, w->locked_by,
		    on_renew, rn);
	free(ids);
	free(tokens);
}

void
renew_check_deadlines(struct worker *w)
{
	int64_t now = util_now_ms();
	for (struct held *h = w->head; h; h = h->next) {
		if (h->state != HELD_RUNNING || !h->run || h->lost ||
		    h->overdue || now < h->deadline_ms)
			continue;
		/* The end is still written, compare-and-set on the token:
		 * if the lease is in fact still ours it counts as a failed
		 * attempt, and if not the database refuses it. */
		struct log_job l = held_log(h);
		log_job(LOG_WARN, &l,
			"lease not renewed by its deadline; "
			"stopping the handler");
		h->overdue = 1;
		handler_stop(h->run, "lease not renewed in time");
	}
}
