/*
 * dbev: libpq pipeline mode on libev.  See dbev.h.
 *
 * Each statement is followed by its own PQpipelineSync(), so the results of
 * one statement are: its result, a NULL, then PGRES_PIPELINE_SYNC.  The
 * reader walks that sequence for the oldest pending statement.
 */
#include "dbev.h"

#include <ev.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "util.h"

struct op {
	dbev_result_fn cb;
	void *arg;
	struct op *next;
};

struct dbev {
	struct ev_loop *loop;
	PGconn *conn;
	struct dbev_hooks hooks;
	ev_io rio, wio;
	struct op *head, *tail;
	int pending;
	PGresult *res;	/* the head statement's result, once read */
	int got_result; /* the head's result (or its NULL) has come */
	int lost;
	unsigned long round_trips;
};

static void
push(struct dbev *d, dbev_result_fn cb, void *arg)
{
	struct op *op = xcalloc(1, sizeof(*op));
	op->cb = cb;
	op->arg = arg;
	if (d->tail)
		d->tail->next = op;
	else
		d->head = op;
	d->tail = op;
	d->pending++;
}

/* Pops the head and calls its callback with res (which it then clears). */
static void
complete_head(struct dbev *d, PGresult *res)
{
	struct op *op = d->head;
	d->head = op->next;
	if (!d->head)
		d->tail = NULL;
	d->pending--;
	d->got_result = 0;
	d->res = NULL;
	op->cb(op->arg, res);
	PQclear(res);
	free(op);
}

/* Fails every pending statement and reports the loss once. */
static void
lose(struct dbev *d, const char *why)
{
	if (d->lost)
		return;
	d->lost = 1;
	ev_io_stop(d->loop, &d->rio);
	ev_io_stop(d->loop, &d->wio);
	PQclear(d->res);
	d->res = NULL;
	while (d->head)
		complete_head(d, NULL);
	if (d->hooks.on_lost)
		d->hooks.on_lost(d->hooks.arg, why);
}

static void
flush(struct dbev *d)
{
	int rc = PQflush(d->conn);
	if (rc < 0) {
		lose(d, PQerrorMessage(d->conn));
		return;
	}
	if (rc > 0)
		ev_io_start(d->loop, &d->wio);
	else
		ev_io_stop(d->loop, &d->wio);
}

static void
on_write(struct ev_loop *loop, ev_io *w, int revents)
{
	flush(w->data);
}

static void
notifies(struct dbev *d)
{
	PGnotify *n;
	while ((n = PQnotifies(d->conn)) != NULL) {
		if (d->hooks.on_notify)
			d->hooks.on_notify(d->hooks.arg, n->relname);
		PQfreemem(n);
	}
}

/* Reads every result that has fully arrived; returns -1 when lost. */
static int
read_results(struct dbev *d)
{
	while (d->head && !d->lost && !PQisBusy(d->conn)) {
		PGresult *res = PQgetResult(d->conn);
		if (!d->got_result) {
			/* A statement's own result, or NULL after it. */
			if (res) {
				PQclear(d->res);
				d->res = res;
			} else {
				d->got_result = 1;
			}
			continue;
		}
		if (!res)
			continue;
		if (PQresultStatus(res) != PGRES_PIPELINE_SYNC) {
			/* More than one result for a statement: keep the
			 * last, as PQexec does. */
			PQclear(d->res);
			d->res = res;
			continue;
		}
		PQclear(res);
		d->round_trips++;
		complete_head(d, d->res);
	}
	if (PQstatus(d->conn) != CONNECTION_OK) {
		lose(d, PQerrorMessage(d->conn));
		return -1;
	}
	return 0;
}

static void
on_read(struct ev_loop *loop, ev_io *w, int revents)
{
	struct dbev *d = w->data;
	if (!PQconsumeInput(d->conn)) {
		lose(d, PQerrorMessage(d->conn));
		return;
	}
	if (read_results(d) < 0)
		return;
	notifies(d);
}

struct dbev *
dbev_new(struct ev_loop *loop, PGconn *conn, const struct dbev_hooks *hooks)
{
	if (PQsetnonblocking(conn, 1) != 0 || !PQenterPipelineMode(conn))
		return NULL;
	struct dbev *d = xcalloc(1, sizeof(*d));
	d->loop = loop;
	d->conn = conn;
	if (hooks)
		d->hooks = *hooks;
	ev_io_init(&d->rio, on_read, PQsocket(conn), EV_READ);
	ev_io_init(&d->wio, on_write, PQsocket(conn), EV_WRITE);
	d->rio.data = d->wio.data = d;
	ev_io_start(loop, &d->rio);
	return d;
}

void
dbev_free(struct dbev *d)
{
	if (!d)
		return;
	d->hooks.on_lost = NULL;
	lose(d, "closed");
	PQfinish(d->conn);
	free(d);
}

/* Calls cb(arg, NULL) from the loop, soon, for a send on a lost link. */
struct deferred {
	ev_timer t;
	dbev_result_fn cb;
	void *arg;
};

static void
on_deferred(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct deferred *df = (struct deferred *)t;
	df->cb(df->arg, NULL);
	free(df);
}

int
dbev_send(struct dbev *d, const char *sql, int nparams,
	  const char *const *params, dbev_result_fn cb, void *arg)
{
	if (!d->lost &&
	    PQsendQueryParams(d->conn, sql, nparams, NULL, params, NULL, NULL,
			      0) &&
	    PQpipelineSync(d->conn)) {
		push(d, cb, arg);
		flush(d);
		return 0;
	}
	struct deferred *df = xcalloc(1, sizeof(*df));
	df->cb = cb;
	df->arg = arg;
	ev_timer_init(&df->t, on_deferred, 0., 0.);
	ev_timer_start(d->loop, &df->t);
	if (!d->lost)
		lose(d, PQerrorMessage(d->conn));
	return -1;
}

int
dbev_pending(const struct dbev *d)
{
	return d->pending;
}

unsigned long
dbev_round_trips(const struct dbev *d)
{
	return d->round_trips;
}

PGconn *
dbev_conn(struct dbev *d)
{
	return d->conn;
}
