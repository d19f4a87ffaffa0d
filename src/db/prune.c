/*
 * prune: deleting what is finished.  See prune.h.
 */
#include "db/prune.h"

#include <stdio.h>
#include <stdlib.h>

#include "common/util.h"
#include "db/internal.h"

/*
 * One batch, oldest first along jobs_finished_idx, whose predicate the
 * subquery's repeats word for word so that the planner reads the index in
 * finished_at order.  The cutoff is $1 when given (pgjob prune fixes it
 * once, so that its loop ends however fast jobs finish), else now() less
 * $2 milliseconds.  Rows locked by someone else (a retry, a cancel) are
 * skipped, not waited for; each batch is its own short transaction, so no
 * transaction holds many locks or holds back vacuum for long.  The batch's
 * ids go to the delete as an array, looked up in jobs_pkey: as a semi-join
 * ("id in (...)"), on statistics that an ANALYZE took under a held
 * snapshot (a handful of live rows), the planner read jobs_pkey whole
 * for the outer side, dead entries and all (docs/performance.md).
 */
static const char prune_jobs_sql[] =
	"with d as (delete from pgjob.jobs where id = any(array("
	"  select id from pgjob.jobs j"
	"   where state in ('done', 'dead', 'cancelled')"
	"    and finished_at < coalesce($1::timestamptz,"
	"     now() - $2::bigint * interval '1 millisecond')"
	/* Never a parent whose child has not ended (a dead parent of a
	 * child that waits for its retry, docs/workflows.md). */
	/* Written so that each child is looked up by its id: as a join
	 * of job_deps and jobs under an "or", on statistics taken under a
	 * held snapshot, the planner hashed all of jobs_pkey. */
	"    and not exists (select 1 from pgjob.job_deps e"
	"     where j.children and e.parent = j.id"
	"      and exists (select 1 from pgjob.jobs c where c.id = e.child"
	"       and c.state in ('waiting', 'available', 'running')))"
	/* A workflow goes as a whole, once every step is past the cutoff. */
	"    and (j.workflow_id is null or not exists ("
	"     select 1 from pgjob.jobs o where o.workflow_id = j.workflow_id"
	"      and (o.state in ('waiting', 'available', 'running')"
	"       or o.finished_at >= coalesce($1::timestamptz,"
	"        now() - $2::bigint * interval '1 millisecond'))))"
	"   order by finished_at limit $3"
	"   for update skip locked)) returning id, children,"
	"   parents_left is not null as kid, workflow_id, batch_id,"
	"   lease_token > 1 or state <> 'done' as tried),"
	/* Their attempt history (sql/upgrade/013_attempts.sql): a job done at
	 * its first claim has none.  One row: the join at the end makes it run.
	 */
	" a as (select pgjob.forget_attempts("
	"   array(select id from d where tried)) as n),"
	/* Their edges, and the workflows whose last step this was. */
	" e as (delete from pgjob.job_deps"
	"   where child in (select id from d where kid)"
	"    or parent in (select id from d where children)),"
	" w as (delete from pgjob.workflows x"
	"   where x.id in (select workflow_id from d)"
	"    and not exists (select 1 from pgjob.jobs o"
	"     where o.workflow_id = x.id"
	"      and o.id not in (select id from d))"
	"   returning x.failed > 0 as failed),"
	/* A batch goes with its last job, once it has ended (its
	 * callback is a job of its own). */
	" b as (delete from pgjob.batches x"
	"   where x.id in (select batch_id from d)"
	"    and x.finished_at is not null"
	"    and not exists (select 1 from pgjob.jobs o"
	"     where o.batch_id = x.id"
	"      and o.id not in (select id from d))),"
	/* What the metrics' totals keep of them. */
	" t as (update pgjob.workflow_totals"
	"   set done = done + (select count(*) from w where not failed),"
	"    failed = failed + (select count(*) from w where failed)"
	"   where exists (select 1 from w))"
	" select count(*) from d, a";

const char *
prune_jobs_statement(void)
{
	return prune_jobs_sql;
}

static void
read_count(const struct db_call *c, const struct db_status *st,
	   const PGresult *res)
{
	long long n = st->error == DB_OK && PQntuples(res) > 0
			      ? atoll(PQgetvalue(res, 0, 0))
			      : 0;
	((prune_fn *)c->cb)(c->arg, st, n);
}

int
prune_jobs(struct dbev *d, int64_t retention_ms, int batch, prune_fn *cb,
	   void *arg)
{
	char ms[24], b[16];
	snprintf(ms, sizeof(ms), "%lld", (long long)retention_ms);
	snprintf(b, sizeof(b), "%d", batch);
	const char *p[] = {NULL, ms, b};
	struct db_call call = DB_CALL(cb, arg);
	return dbev_call(d, prune_jobs_sql, 0, 3, p, read_count, &call);
}

long long
prune_jobs_now(struct db_conn *c, const char *cutoff, int batch, char **err)
{
	char b[16];
	snprintf(b, sizeof(b), "%d", batch);
	const char *p[] = {cutoff, "0", b};
	struct db_rows *r = db_query(c, prune_jobs_sql, 3, p, err);
	if (!r)
		return -1;
	long long n = atoll(db_rows_value(r, 0, 0));
	db_rows_free(r);
	return n;
}

int
prune_done(struct dbev *d, int64_t retention_ms, prune_fn *cb, void *arg)
{
	char ms[24];
	snprintf(ms, sizeof(ms), "%lld", (long long)retention_ms);
	const char *p[] = {ms};
	struct db_call call = DB_CALL(cb, arg);
	return dbev_call(d,
			 "select pgjob.prune_done(now() - $1::bigint"
			 " * interval '1 millisecond')",
			 0, 1, p, read_count, &call);
}

long long
prune_done_now(struct db_conn *c, const char *cutoff, int batch, char **err)
{
	char b[16];
	snprintf(b, sizeof(b), "%d", batch);
	const char *p[] = {cutoff, b};
	struct db_rows *r =
		db_query(c, "select pgjob.prune_done($1::timestamptz, $2::int)",
			 2, p, err);
	if (!r)
		return -1;
	long long n = atoll(db_rows_value(r, 0, 0));
	db_rows_free(r);
	return n;
}

int
prune_request_keys(struct dbev *d, int batch, prune_fn *cb, void *arg)
{
	char b[16];
	snprintf(b, sizeof(b), "%d", batch);
	const char *p[] = {b};
	struct db_call call = DB_CALL(cb, arg);
	return dbev_call(d, "select pgjob.prune_request_keys($1::int)", 0, 1, p,
			 read_count, &call);
}

int
prune_workers(struct dbev *d)
{
	/* And the minutes of pgjob.throughput() past its 2 hours (it counts
	 * on this horizon: sql/upgrade/014_console_state.sql). */
	return dbev_send(d,
			 "with m as (delete from pgjob.worker_minutes"
			 "  where at < now() - interval '2 hours')"
			 " delete from pgjob.workers"
			 " where heartbeat_at < now() - interval '1 day'",
			 0, NULL, dbev_ignore, NULL);
}

int
prune_limits(struct dbev *d, prune_fn *cb, void *arg)
{
	struct db_call call = DB_CALL(cb, arg);
	return dbev_call(d, "select pgjob.prune_limits()", 0, 0, NULL,
			 read_count, &call);
}
