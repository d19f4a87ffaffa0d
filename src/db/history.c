/*
 * history: the worker's writes into pgjob.history_minutes and the
 * pruning duty's rollup of it (sql/schema/tables/history.sql).
 */
#include "db/history.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/history.h"
#include "common/util.h"
#include "db/internal.h"

/* $1 queues, $2 kinds, $3..$5 done, failed, retried, $6 and $7 the wait
 * and run histograms as texts of integer[]; $8 the minute they were counted
 * in, by the worker's clock (minutes since the epoch: history_take()), whose
 * cap on named pairs they were counted under. */
static const char WRITE_SQL[] =
	"insert into pgjob.history_minutes as h"
	" (at, queue, kind, done, failed, retried, wait_ms, run_ms)"
	" select to_timestamp($8::bigint * 60), t.q, t.k, t.d, t.f, t.r,"
	"  t.w::integer[], t.u::integer[]"
	" from unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[],"
	"  $5::bigint[], $6::text[], $7::text[]) t(q, k, d, f, r, w, u)"
	" order by t.q, t.k"
	" on conflict (at, queue, kind) do update"
	"  set done = h.done + excluded.done,"
	"   failed = h.failed + excluded.failed,"
	"   retried = h.retried + excluded.retried,"
	"   wait_ms = pgjob.history_add(h.wait_ms, excluded.wait_ms),"
	"   run_ms = pgjob.history_add(h.run_ms, excluded.run_ms)";

/* The seven array parameters of WRITE_SQL and its minute, owned. */
struct params {
	char *a[8];
};

static void
params_make(struct params *p, const struct history *h)
{
	size_t n = h->n, i = 0, k = 0;
	const char **q = xcalloc(n + 1, sizeof(*q));
	const char **kd = xcalloc(n + 1, sizeof(*kd));
	char **w = xcalloc(n + 1, sizeof(*w)), **u = xcalloc(n + 1, sizeof(*u));
	int64_t *c[3] = {xcalloc(n + 1, sizeof(int64_t)),
			 xcalloc(n + 1, sizeof(int64_t)),
			 xcalloc(n + 1, sizeof(int64_t))};
	struct history_pair *hp;
	while ((hp = history_next(h, &i)) != NULL && k < n) {
		q[k] = hp->queue;
		kd[k] = hp->kind;
		c[0][k] = hp->done;
		c[1][k] = hp->failed;
		c[2][k] = hp->retried;
		w[k] = xmalloc(HISTORY_TEXT);
		u[k] = xmalloc(HISTORY_TEXT);
		history_text(hp->wait, w[k]);
		history_text(hp->run, u[k]);
		k++;
	}
	p->a[0] = db_text_array(q, k);
	p->a[1] = db_text_array(kd, k);
	for (int j = 0; j < 3; j++)
		p->a[2 + j] = db_int_array(c[j], k);
	p->a[5] = db_text_array((const char *const *)w, k);
	p->a[6] = db_text_array((const char *const *)u, k);
	p->a[7] = xasprintf("%lld", (long long)h->minute);
	for (size_t j = 0; j < k; j++) {
		free(w[j]);
		free(u[j]);
	}
	free(q);
	free(kd);
	free(w);
	free(u);
	for (int j = 0; j < 3; j++)
		free(c[j]);
}

static void
params_free(struct params *p)
{
	for (int j = 0; j < 8; j++)
		free(p->a[j]);
}

static void
read_done(const struct db_call *c, const struct db_status *st,
	  const PGresult *res)
{
	(void)res;
	if (c->cb)
		((history_done_fn *)c->cb)(c->arg, st);
}

int
history_write(struct dbev *d, const struct history *h, history_done_fn *cb,
	      void *arg)
{
	struct params p;
	params_make(&p, h);
	struct db_call call = DB_CALL(cb, arg);
	int rc = dbev_call(d, WRITE_SQL, 0, 8, (const char *const *)p.a,
			   read_done, &call);
	params_free(&p);
	return rc;
}

void
history_write_now(struct dbev *d, const struct history *h)
{
	PGconn *conn = dbev_conn(d);
	if (h->n == 0 || dbev_pending(d) > 0 || !PQexitPipelineMode(conn) ||
	    PQsetnonblocking(conn, 0) != 0)
		return;
	struct params p;
	params_make(&p, h);
	PQclear(PQexecParams(conn, WRITE_SQL, 8, NULL, (const char *const *)p.a,
			     NULL, NULL, 0));
	params_free(&p);
}

static void
read_count(const struct db_call *c, const struct db_status *st,
	   const PGresult *res)
{
	long long n = st->error == DB_OK && PQntuples(res) > 0
			      ? atoll(PQgetvalue(res, 0, 0))
			      : 0;
	if (c->cb)
		((history_pruned_fn *)c->cb)(c->arg, st, n);
}

int
history_prune(struct dbev *d, history_pruned_fn *cb, void *arg)
{
	struct db_call call = DB_CALL(cb, arg);
	return dbev_call(d, "select pgjob.history_prune()", 0, 0, NULL,
			 read_count, &call);
}
