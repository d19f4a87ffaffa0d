/*
 * dbev: libpq pipeline mode on libev.  See dbev.h.
 *
 * Each statement is followed by its own PQpipelineSync(), so the results of
 * one statement are: its result, a NULL, then PGRES_PIPELINE_SYNC (and, if
 * its implicit transaction fails to commit, an error before the sync).  The
 * reader walks that sequence for the oldest pending statement, and answers
 * it only at the sync: rows are not committed until then.
 */
#include "db/dbev.h"

#include <ev.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/failpoint.h"
#include "common/log.h"
#include "common/util.h"
#include "db/internal.h"

/* One sync point's worth of statements, and their results so far. */
struct op {
	dbev_result_fn cb; /* a single statement */
	dbev_group_fn gcb; /* or a group */
	void *arg;
	int n;		 /* statements */
	int idx;	 /* the statement whose results are being read */
	PGresult **res;	 /* n results */
	int fp_result;	 /* failpoint: lose the link once it is done */
	int64_t sent_ms; /* monotonic */
	struct op *next;
};

struct dbev {
	struct ev_loop *loop;
	PGconn *conn;
	struct dbev_hooks hooks;
	ev_io rio, wio;
	struct op *head, *tail;
	int pending;
	int lost;
	ev_timer lost_timer; /* reports the loss from the loop */
	char *lost_why;
	int fp_send, fp_result; /* tags for the next statement */
	int64_t timeout_ms;	/* how long a statement may go unanswered */
	int64_t progress_ms;	/* when the last answer came */
	int64_t answer_ms;	/* the last answer's time (dbev_answer_ms()) */
	ev_timer watchdog;	/* checks the deadlines every second */
	unsigned long round_trips;
};

static struct op *
push(struct dbev *d, int n, void *arg)
{
	struct op *op = xcalloc(1, sizeof(*op));
	op->arg = arg;
	op->n = n;
	op->res = xcalloc((size_t)n, sizeof(PGresult *));
	op->sent_ms = util_now_ms();
	if (d->tail)
		d->tail->next = op;
	else
		d->head = op;
	d->tail = op;
	d->pending++;
	return op;
}

/* Pops the head and calls its callback with its results, then clears
 * them. */
static void
complete_head(struct dbev *d)
{
	struct op *op = d->head;
	d->head = op->next;
	if (!d->head)
		d->tail = NULL;
	d->pending--;
	if (op->gcb)
		op->gcb(op->arg, op->res, op->n);
	else
		op->cb(op->arg, op->res[0]);
	for (int i = 0; i < op->n; i++)
		PQclear(op->res[i]);
	free(op->res);
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
	while (d->head) {
		/* What a lost connection leaves unanswered is NULL: every
		 * result of an op whose sync never came back, even those
		 * that had arrived.  A statement's rows come before its
		 * implicit transaction commits (and, with a synchronous
		 * standby, before the standby has the commit): a claim whose
		 * rows were delivered here ran its jobs though the commit
		 * was lost, and the new primary gave them to another worker
		 * under the same token (fault.failover, 2026-12-03). */
		struct op *op = d->head;
		for (int i = 0; i < op->n; i++) {
			PQclear(op->res[i]);
			op->res[i] = NULL;
		}
		complete_head(d);
	}
	/* Reported from the loop, never from inside a send: the caller may
	 * still be using this dbev when its send finds the link broken. */
	d->lost_why = xstrdup(why);
	ev_timer_start(d->loop, &d->lost_timer);
}

/*
 * A server behind a frozen network path never answers and never closes:
 * the kernel keeps acknowledging, so TCP keepalives cannot tell.  While
 * statements are pending, some answer must come within the timeout: the
 * oldest pending statement was sent, or the last answer came, at most that
 * long ago.  (Progress, not each statement's age: statements queued behind
 * a slow one are answered in turn.)
 */
static void
on_watchdog(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct dbev *d = t->data;
	if (!d->head || d->lost || d->timeout_ms <= 0)
		return;
	int64_t since = d->head->sent_ms > d->progress_ms ? d->head->sent_ms
							  : d->progress_ms;
	int64_t quiet = util_now_ms() - since;
	if (quiet > d->timeout_ms) {
		char why[96];
		snprintf(why, sizeof(why),
			 "no answer from the server for %lld ms",
			 (long long)quiet);
		lose(d, why);
	}
}

static void
on_lost_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct dbev *d = t->data;
	if (d->hooks.on_lost)
		d->hooks.on_lost(d->hooks.arg, d->lost_why);
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
			d->hooks.on_notify(d->hooks.arg, n->relname, n->extra,
					   n->be_pid);
		PQfreemem(n);
	}
}

/* Reads every result that has fully arrived; returns -1 when lost. */
static int
read_results(struct dbev *d)
{
	while (d->head && !d->lost && !PQisBusy(d->conn)) {
		struct op *op = d->head;
		PGresult *res = PQgetResult(d->conn);
		if (op->idx < op->n) {
			/* A statement's result (the last one counts, as with
			 * PQexec), or the NULL that ends it. */
			if (res) {
				PQclear(op->res[op->idx]);
				op->res[op->idx] = res;
			} else {
				op->idx++;
			}
			continue;
		}
		if (!res)
			continue;
		if (PQresultStatus(res) != PGRES_PIPELINE_SYNC) {
			/* An error between the last statement's end and the
			 * sync: the implicit transaction failed to commit (a
			 * deferred trigger, or a statement_timeout that fired
			 * before the Sync was read), and what the statements
			 * answered was rolled back.  It is the last one's
			 * answer: a claim answered with its rows would run
			 * jobs that are not its own, whose next claimer gets
			 * the same lease token (test_dbev). */
			PQclear(op->res[op->n - 1]);
			op->res[op->n - 1] = res;
			continue;
		}
		PQclear(res);
		d->round_trips++;
		int64_t now = util_now_ms();
		d->answer_ms =
			now - (op->sent_ms > d->progress_ms ? op->sent_ms
							    : d->progress_ms);
		d->progress_ms = now;
		if (op->fp_result && FAILPOINT(op->fp_result)) {
			/* As if the link broke after the commit: the caller
			 * never sees the result. */
			op->idx = 0;
			lose(d, "failpoint");
			return -1;
		}
		complete_head(d);
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
dbev_new(struct ev_loop *loop, struct db_conn *c,
	 const struct dbev_hooks *hooks)
{
	PGconn *conn = db_pgconn(c);
	if (PQsetnonblocking(conn, 1) != 0 || !PQenterPipelineMode(conn))
		return NULL;
	struct dbev *d = xcalloc(1, sizeof(*d));
	d->loop = loop;
	d->conn = db_release(c);
	if (hooks)
		d->hooks = *hooks;
	ev_io_init(&d->rio, on_read, PQsocket(conn), EV_READ);
	ev_io_init(&d->wio, on_write, PQsocket(conn), EV_WRITE);
	ev_timer_init(&d->lost_timer, on_lost_timer, 0., 0.);
	d->lost_timer.data = d;
	ev_timer_init(&d->watchdog, on_watchdog, 1., 1.);
	d->watchdog.data = d;
	ev_timer_start(loop, &d->watchdog);
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
	ev_timer_stop(d->loop, &d->lost_timer);
	ev_timer_stop(d->loop, &d->watchdog);
	free(d->lost_why);
	PQfinish(d->conn);
	free(d);
}

/* Reports a send on a lost link from the loop, soon, as all-NULL results. */
struct deferred {
	ev_timer t;
	dbev_result_fn cb;
	dbev_group_fn gcb;
	void *arg;
	int n;
};

static void
on_deferred(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct deferred *df = (struct deferred *)t;
	PGresult **none = xcalloc((size_t)df->n, sizeof(PGresult *));
	if (df->gcb)
		df->gcb(df->arg, none, df->n);
	else
		df->cb(df->arg, NULL);
	free(none);
	free(df);
}

static int
send_failed(struct dbev *d, dbev_result_fn cb, dbev_group_fn gcb, void *arg,
	    int n)
{
	struct deferred *df = xcalloc(1, sizeof(*df));
	df->cb = cb;
	df->gcb = gcb;
	df->arg = arg;
	df->n = n;
	ev_timer_init(&df->t, on_deferred, 0., 0.);
	ev_timer_start(d->loop, &df->t);
	if (!d->lost)
		lose(d, PQerrorMessage(d->conn));
	return -1;
}

void
dbev_failpoints(struct dbev *d, int send_fp, int result_fp)
{
	d->fp_send = send_fp;
	d->fp_result = result_fp;
}

/* Takes the tags of the statement being sent; 1 when it must fail now. */
static int
take_tags(struct dbev *d, int *result_fp)
{
	int fs = d->fp_send;
	*result_fp = d->fp_result;
	d->fp_send = d->fp_result = 0;
	if (fs && FAILPOINT(fs)) {
		lose(d, "failpoint");
		return 1;
	}
	return 0;
}

/* Sends one statement: sql text, or the name of a prepared one. */
static int
send_one(struct dbev *d, const char *sql, const char *name, int nparams,
	 const char *const *params, dbev_result_fn cb, void *arg)
{
	int fr;
	if (take_tags(d, &fr))
		return send_failed(d, cb, NULL, arg, 1);
	if (d->lost ||
	    !(name ? PQsendQueryPrepared(d->conn, name, nparams, params, NULL,
					 NULL, 0)
		   : PQsendQueryParams(d->conn, sql, nparams, NULL, params,
				       NULL, NULL, 0)) ||
	    !PQpipelineSync(d->conn))
		return send_failed(d, cb, NULL, arg, 1);
	struct op *op = push(d, 1, arg);
	op->cb = cb;
	op->fp_result = fr;
	flush(d);
	return 0;
}

int
dbev_send(struct dbev *d, const char *sql, int nparams,
	  const char *const *params, dbev_result_fn cb, void *arg)
{
	return send_one(d, sql, NULL, nparams, params, cb, arg);
}

static void
on_prepared(void *arg, PGresult *res)
{
	if (res && PQresultStatus(res) != PGRES_COMMAND_OK)
		log_errorx("preparing statement %s: %s", (const char *)arg,
			   PQresultErrorMessage(res));
}

int
dbev_prepare(struct dbev *d, const char *name, const char *sql, int nparams)
{
	if (d->lost || !PQsendPrepare(d->conn, name, sql, nparams, NULL) ||
	    !PQpipelineSync(d->conn))
		return send_failed(d, on_prepared, NULL, (void *)name, 1);
	push(d, 1, (void *)name)->cb = on_prepared;
	flush(d);
	return 0;
}

int
dbev_send_prepared(struct dbev *d, const char *name, int nparams,
		   const char *const *params, dbev_result_fn cb, void *arg)
{
	return send_one(d, NULL, name, nparams, params, cb, arg);
}

int
dbev_send_group(struct dbev *d, const struct dbev_stmt *stmts, int n,
		dbev_group_fn cb, void *arg)
{
	int fr;
	if (take_tags(d, &fr))
		return send_failed(d, NULL, cb, arg, n);
	if (d->lost)
		return send_failed(d, NULL, cb, arg, n);
	for (int i = 0; i < n; i++)
		if (!(stmts[i].name ? PQsendQueryPrepared(
					      d->conn, stmts[i].name,
					      stmts[i].nparams, stmts[i].params,
					      NULL, NULL, 0)
				    : PQsendQueryParams(
					      d->conn, stmts[i].sql,
					      stmts[i].nparams, stmts[i].types,
					      stmts[i].params, NULL, NULL, 0)))
			return send_failed(d, NULL, cb, arg, n);
	if (!PQpipelineSync(d->conn))
		return send_failed(d, NULL, cb, arg, n);
	struct op *op = push(d, n, arg);
	op->gcb = cb;
	op->fp_result = fr;
	flush(d);
	return 0;
}

void
dbev_set_timeout(struct dbev *d, int64_t ms)
{
	d->timeout_ms = ms;
}

int
dbev_pending(const struct dbev *d)
{
	return d->pending;
}

int64_t
dbev_answer_ms(const struct dbev *d)
{
	return d->answer_ms;
}

int
dbev_backend_pid(const struct dbev *d)
{
	return d->conn ? PQbackendPID(d->conn) : 0;
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

void
dbev_ignore(void *arg, PGresult *res)
{
}

void
dbev_time_limit(struct dbev *d, int64_t ms)
{
	char v[24];
	snprintf(v, sizeof(v), "%lld", (long long)ms);
	const char *p[] = {v};
	dbev_send(d, "select set_config('statement_timeout', $1, false)", 1, p,
		  dbev_ignore, NULL);
}

void
dbev_time_limit_end(struct dbev *d)
{
	dbev_send(d, "reset statement_timeout", 0, NULL, dbev_ignore, NULL);
}

/* A call in flight: the module's reader and the caller's call. */
struct pending_call {
	db_read_fn *read;
	struct db_call c;
};

static void
on_call(void *arg, PGresult *res)
{
	struct pending_call *p = arg;
	char *text;
	struct db_status st = db_status_of(res, &text);
	p->read(&p->c, &st, res);
	free(text);
	for (size_t i = 0; p->c.names && i < p->c.n; i++)
		free(p->c.names[i]);
	free(p->c.names);
	free(p);
}

int
dbev_call(struct dbev *d, const char *sql, int prepared, int nparams,
	  const char *const *params, db_read_fn *read, const struct db_call *c)
{
	struct pending_call *p = xcalloc(1, sizeof(*p));
	p->read = read;
	p->c = *c;
	return send_one(d, prepared ? NULL : sql, prepared ? sql : NULL,
			nparams, params, on_call, p);
}
