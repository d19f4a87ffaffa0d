/*
 * lease: slot locks, the worker registry, and named leases.
 */
#include "db/lease.h"

#include <stdio.h>
#include <stdlib.h>

#include "common/config.h"
#include "common/failpoint.h"
#include "common/util.h"
#include "db/internal.h"

/* The readers of the answers (dbev_call()): each calls its caller back
 * with the answer in the caller's types. */

static void
read_done(const struct db_call *c, const struct db_status *st,
	  const PGresult *res)
{
	if (c->cb)
		((lease_done_fn *)c->cb)(c->arg, st);
}

static void
read_published(const struct db_call *c, const struct db_status *st,
	       const PGresult *res)
{
	const char *at = st->error == DB_OK && PQntuples(res) > 0
				 ? PQgetvalue(res, 0, 0)
				 : NULL;
	((lease_published_fn *)c->cb)(c->arg, st, at);
}

static void
read_tasks(const struct db_call *c, const struct db_status *st,
	   const PGresult *res)
{
	long *live = xcalloc(c->n + 1, sizeof(long));
	for (int r = 0; st->error == DB_OK && r < PQntuples(res); r++) {
		size_t i = (size_t)atol(PQgetvalue(res, r, 0)) - 1;
		if (i < c->n)
			live[i] = atol(PQgetvalue(res, r, 1));
	}
	((lease_tasks_fn *)c->cb)(c->arg, st, live,
				  st->error == DB_OK ? c->n : 0);
	free(live);
}

static void
read_lease(const struct db_call *c, const struct db_status *st,
	   const PGresult *res)
{
	int64_t token = st->error == DB_OK && PQntuples(res) > 0
				? strtoll(PQgetvalue(res, 0, 0), NULL, 10)
				: 0;
	if (c->cb)
		((lease_fn *)c->cb)(c->arg, st, token);
}

static void
read_renewed(const struct db_call *c, const struct db_status *st,
	     const PGresult *res)
{
	int n = st->error == DB_OK ? PQntuples(res) : 0;
	const char **names = xcalloc((size_t)n + 1, sizeof(char *));
	for (int i = 0; i < n; i++)
		names[i] = PQgetvalue(res, i, 0);
	((lease_renewed_fn *)c->cb)(c->arg, st, names, (size_t)n);
	free(names);
}

int
lease_worker_publish(struct dbev *d, int slot, int pid,
		     const struct config *cfg, const char *defined_at,
		     lease_published_fn *cb, void *arg)
{
	size_t nt = cfg ? cfg->ntasks : 0, ns = cfg ? cfg->nschedules : 0;
	const char **tn = xcalloc(nt + 1, sizeof(char *));
	int64_t *tp = xcalloc(nt + 1, sizeof(int64_t));
	const char **col[7];
	for (int k = 0; k < 7; k++)
		col[k] = xcalloc(ns + 1, sizeof(char *));
	for (size_t i = 0; i < nt; i++) {
		tn[i] = cfg->tasks[i].name;
		tp[i] = cfg->tasks[i].partitions;
	}
	for (size_t i = 0; i < ns; i++) {
		const struct schedule_conf *s = &cfg->schedules[i];
		const struct handler_conf *h = config_handler(cfg, s->kind);
		col[0][i] = s->name;
		col[1][i] = s->cron;
		col[2][i] = s->timezone;
		col[3][i] = s->kind;
		col[4][i] = s->payload;
		col[5][i] = s->queue ? s->queue : h ? h->queue : "default";
		col[6][i] = s->catch_up_all ? "all" : "latest";
	}
	char sl[16], pd[16];
	snprintf(sl, sizeof(sl), "%d", slot);
	snprintf(pd, sizeof(pd), "%d", pid);
	/* Arrays by the one escaping writer; the JSON is built by the
	 * database, so no name or payload is ever spliced into text. */
	char *a[9] = {db_text_array(tn, nt), db_int_array(tp, nt)};
	for (int k = 0; k < 7; k++)
		a[2 + k] = db_text_array(col[k], ns);
	const char *p[] = {sl,	 pd,   a[0], a[1], a[2], a[3],
			   a[4], a[5], a[6], a[7], a[8], defined_at};
	struct db_call call = DB_CALL(cb, arg);
	int rc = dbev_call(
		d,
		"update pgjob.workers set"
		" tasks = coalesce((select jsonb_object_agg(n, p)"
		"  from unnest($3::text[], $4::int[]) t(n, p)), '{}'),"
		" schedules = coalesce((select jsonb_object_agg(n,"
		"   jsonb_build_object('cron', c, 'timezone', z, 'kind', k,"
		"    'payload', j::jsonb, 'queue', q, 'catch_up', u))"
		"  from unnest($5::text[], $6::text[], $7::text[],"
		"   $8::text[], $9::text[], $10::text[], $11::text[])"
		"   s(n, c, z, k, j, q, u)), '{}'),"
		" defined_at = coalesce($12::timestamptz, now())"
		" where slot = $1 and pid = $2"
		" returning to_char(defined_at at time zone 'UTC',"
		"  'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')",
		0, 12, p, read_published, &call);
	for (int k = 0; k < 9; k++)
		free(a[k]);
	for (int k = 0; k < 7; k++)
		free(col[k]);
	free(tn);
	free(tp);
	return rc;
}

int
lease_task_workers(struct dbev *d, const struct config *cfg, int64_t window_ms,
		   lease_tasks_fn *cb, void *arg)
{
	size_t nt = cfg->ntasks;
	const char **tn = xcalloc(nt + 1, sizeof(char *));
	int64_t *tp = xcalloc(nt + 1, sizeof(int64_t));
	for (size_t i = 0; i < nt; i++) {
		tn[i] = cfg->tasks[i].name;
		tp[i] = cfg->tasks[i].partitions;
	}
	char *a = db_text_array(tn, nt), *b = db_int_array(tp, nt);
	char ms[24];
	snprintf(ms, sizeof(ms), "%lld", (long long)window_ms);
	const char *p[] = {a, b, ms};
	struct db_call call = DB_CALL(cb, arg);
	call.n = nt;
	int rc = dbev_call(
		d,
		"select t.i, count(w.slot)"
		" from unnest($1::text[], $2::int[]) with ordinality"
		"  t(name, partitions, i)"
		" left join pgjob.workers w"
		"  on w.heartbeat_at > now() - $3::bigint * interval '1 ms'"
		"  and w.tasks -> t.name = to_jsonb(t.partitions)"
		" group by t.i",
		0, 3, p, read_tasks, &call);
	free(a);
	free(b);
	free(tn);
	free(tp);
	return rc;
}

/* A worker's slot, pid and totals as the text parameters $1..$5 of the
 * statements below (t NULL: zeros). */
struct worker_params {
	char slot[16], pid[16], done[24], failed[24], retried[24];
	const char *v[5];
};

static void
worker_params(struct worker_params *w, int slot, int pid,
	      const struct lease_totals *t)
{
	const struct lease_totals zero = {0};
	if (!t)
		t = &zero;
	snprintf(w->slot, sizeof(w->slot), "%d", slot);
	snprintf(w->pid, sizeof(w->pid), "%d", pid);
	snprintf(w->done, sizeof(w->done), "%lld", (long long)t->done);
	snprintf(w->failed, sizeof(w->failed), "%lld", (long long)t->failed);
	snprintf(w->retried, sizeof(w->retried), "%lld", (long long)t->retried);
	w->v[0] = w->slot;
	w->v[1] = w->pid;
	w->v[2] = w->done;
	w->v[3] = w->failed;
	w->v[4] = w->retried;
}

/* Adds $3, $4, $5 to the row of the current minute of worker (slot $1,
 * pid $2). */
static const char MINUTE_SQL[] =
	"insert into pgjob.worker_minutes as m"
	" (slot, worker_started_at, at, done, failed, retried)"
	" select slot, started_at, date_trunc('minute', now()),"
	"  $3::bigint, $4::bigint, $5::bigint"
	" from pgjob.workers where slot = $1 and pid = $2"
	" on conflict (slot, worker_started_at, at) do update"
	"  set done = m.done + excluded.done,"
	"   failed = m.failed + excluded.failed,"
	"   retried = m.retried + excluded.retried";

int
lease_worker_heartbeat(struct dbev *d, int slot, int pid, int running,
		       const struct lease_totals *t,
		       const struct lease_crashes *cr, lease_done_fn *cb,
		       void *arg)
{
	struct worker_params w;
	worker_params(&w, slot, pid, t);
	char total[24], held[16];
	snprintf(total, sizeof(total), "%lld", (long long)(cr ? cr->total : 0));
	snprintf(held, sizeof(held), "%d", running);
	/* The kinds by the one escaping writer, never spliced into text. */
	char *loops = db_text_array(cr ? cr->loops : NULL, cr ? cr->nloops : 0);
	const char *p[] = {w.v[0], w.v[1], w.v[2], w.v[3],
			   w.v[4], total,  loops,  held};
	struct db_call call = DB_CALL(cb, arg);
	dbev_failpoints(d, FP_HEARTBEAT_SEND, 0);
	int rc = dbev_call(d,
			   "update pgjob.workers set heartbeat_at = now(),"
			   "  done_total = $3, failed_total = $4,"
			   "  retried_total = $5, process_crashes = $6,"
			   "  crash_loops = nullif($7::text[], '{}'),"
			   "  running = $8"
			   " where slot = $1 and pid = $2",
			   0, 8, p, read_done, &call);
	free(loops);
	return rc;
}

int
lease_worker_minute(struct dbev *d, int slot, int pid,
		    const struct lease_totals *t, lease_done_fn *cb, void *arg)
{
	struct worker_params w;
	worker_params(&w, slot, pid, t);
	struct db_call call = DB_CALL(cb, arg);
	return dbev_call(d, MINUTE_SQL, 0, 5, w.v, read_done, &call);
}

void
lease_worker_unregister(struct dbev *d, int slot, int pid,
			const struct lease_totals *t)
{
	PGconn *conn = dbev_conn(d);
	if (dbev_pending(d) > 0 || !PQexitPipelineMode(conn) ||
	    PQsetnonblocking(conn, 0) != 0)
		return;
	struct worker_params w;
	worker_params(&w, slot, pid, t);
	if (t)
		PQclear(PQexecParams(conn, MINUTE_SQL, 5, NULL, w.v, NULL, NULL,
				     0));
	PQclear(PQexecParams(conn,
			     "delete from pgjob.workers"
			     " where slot = $1 and pid = $2",
			     2, NULL, w.v, NULL, NULL, 0));
}

int
lease_acquire(struct dbev *d, const char *name, const char *holder, int64_t ms,
	      lease_fn *cb, void *arg)
{
	char m[24];
	snprintf(m, sizeof(m), "%lld", (long long)ms);
	const char *p[] = {name, holder, m};
	struct db_call call = DB_CALL(cb, arg);
	dbev_failpoints(d, FP_LEASE_ACQUIRE, 0);
	return dbev_call(
		d,
		"insert into pgjob.leases as l (name, holder, token, "
		"expires_at)"
		" values ($1, $2, 1, now() + $3::bigint * interval '1 ms')"
		" on conflict (name) do update set holder = excluded.holder,"
		"  token = l.token + 1, expires_at = excluded.expires_at"
		"  where l.expires_at is null or l.expires_at < now()"
		"   or l.holder = excluded.holder"
		" returning token",
		0, 3, p, read_lease, &call);
}

int
lease_renew(struct dbev *d, const char *name, const char *holder, int64_t token,
	    int64_t ms, lease_fn *cb, void *arg)
{
	char t[24], m[24];
	snprintf(t, sizeof(t), "%lld", (long long)token);
	snprintf(m, sizeof(m), "%lld", (long long)ms);
	const char *p[] = {name, holder, t, m};
	struct db_call call = DB_CALL(cb, arg);
	return dbev_call(
		d,
		"update pgjob.leases"
		" set expires_at = now() + $4::bigint * interval '1 ms'"
		" where name = $1 and holder = $2 and token = $3"
		"  and expires_at >= now()"
		" returning token",
		0, 4, p, read_lease, &call);
}

int
lease_release(struct dbev *d, const char *name, const char *holder,
	      int64_t token, lease_fn *cb, void *arg)
{
	char t[24];
	snprintf(t, sizeof(t), "%lld", (long long)token);
	const char *p[] = {name, holder, t};
	struct db_call call = DB_CALL(cb, arg);
	return dbev_call(d,
			 "update pgjob.leases set holder = null,"
			 "  expires_at = null"
			 " where name = $1 and holder = $2 and token = $3"
			 " returning token",
			 0, 3, p, read_lease, &call);
}

int
lease_renew_many(struct dbev *d, const char *const *names,
		 const int64_t *tokens, size_t n, const char *holder,
		 int64_t ms, lease_renewed_fn *cb, void *arg)
{
	char *a = db_text_array(names, n);
	char *b = db_int_array(tokens, n);
	char m[24];
	snprintf(m, sizeof(m), "%lld", (long long)ms);
	const char *p[] = {a, b, m, holder};
	struct db_call call = DB_CALL(cb, arg);
	dbev_failpoints(d, 0, FP_TASK_RENEW);
	int rc = dbev_call(
		d,
		"update pgjob.leases l"
		" set expires_at = now() + $3::bigint * interval '1 ms'"
		" from unnest($1::text[], $2::bigint[]) r(name, token)"
		" where l.name = r.name and l.token = r.token"
		"  and l.holder = $4 and l.expires_at >= now()"
		" returning l.name",
		0, 4, p, read_renewed, &call);
	free(a);
	free(b);
	return rc;
}
