/*
 * history: the worker's counts per (queue, kind) for the history
 * (docs/operations.md, "History"), kept in memory per attempt and written
 * at the heartbeat into pgjob.history_minutes (db/history.c), in the rows
 * of the minute they were counted in (history_take()).  Nothing here runs per
 * job but a hash lookup and a few increments: no statement, no trigger on the
 * claim or the end.
 */
#include <stdlib.h>
#include <time.h>

#include "common/history.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"
#include "db/history.h"
#include "worker/internal.h"

void
history_started(struct held *h)
{
	if (h->job.wait_ms >= 0)
		history_wait(
			history_pair(&h->w->hist, h->job.queue, h->job.kind),
			h->job.wait_ms);
}

void
history_ended(struct held *h, enum job_state state, int retried)
{
	struct history_pair *p =
		history_pair(&h->w->hist, h->job.queue, h->job.kind);
	if (state == JOB_DONE)
		p->done++;
	else if (state == JOB_DEAD || retried)
		p->failed++;
	if (retried)
		p->retried++;
	/* An sql handler's attempt, written with its work, has no wall time
	 * noted: its time to the write's answer. */
	history_run(p, h->wall_ms > 0 ? h->wall_ms
				      : util_now_ms() - h->started_ms);
}

/* A write in flight: what it carries, added back if it fails. */
struct flush {
	struct worker *w;
	struct history sent;
};

static void
on_written(void *arg, const struct db_status *st)
{
	struct flush *f = arg;
	struct worker *w = f->w;
	if (st->error == DB_OK) {
		if (w->history_failing)
			log_info("writing the history works again");
		w->history_failing = 0;
	} else {
		history_add_back(&w->hist, &f->sent);
		if (st->answered && !w->history_failing) {
			log_warnx("writing the history failed: %s "
				  "(pgjob.history_minutes: docs/security.md)",
				  st->text);
			w->history_failing = 1;
		}
	}
	history_free(&f->sent);
	free(f);
}

void
history_flush(struct worker *w)
{
	struct flush *f = xmalloc(sizeof(*f));
	f->w = w;
	history_init(&f->sent);
	if (history_take(&w->hist, &f->sent, (int64_t)time(NULL) / 60) == 0) {
		history_free(&f->sent);
		free(f);
		return;
	}
	/* A send that fails calls on_written() back too. */
	history_write(w->db, &f->sent, on_written, f);
}

void
history_flush_now(struct worker *w)
{
	struct history sent;
	history_init(&sent);
	if (history_take(&w->hist, &sent, (int64_t)time(NULL) / 60) > 0)
		history_write_now(w->db, &sent);
	history_free(&sent);
}
