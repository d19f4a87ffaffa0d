/*
 * monitor: the reads behind the worker's figures for /metrics
 * (src/worker/monitor.c): queue depths with their flow control, dead jobs,
 * jobs that no live worker serves, workflows.  Read-only, bounded in rows
 * (the configured queues each, every other summed), each with its own
 * reader.  Apart from the job statements: they read for a person, on the
 * monitor's own connection, and never write.
 */
#include "db/monitor.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "db/db.h"
#include "db/internal.h"

static void
read_depths(const struct db_call *c, const struct db_status *st,
	    const PGresult *res)
{
	int n = st->error == DB_OK ? PQntuples(res) : 0;
	if (n > (int)c->n)
		n = (int)c->n;
	struct queue_depth *q = xcalloc((size_t)n + 1, sizeof(*q));
	for (int i = 0; i < n; i++) {
		q[i].other = PQgetisnull(res, i, 0);
		snprintf(q[i].name, sizeof(q[i].name), "%s",
			 q[i].other ? QUEUE_OTHER : PQgetvalue(res, i, 0));
		q[i].due = strtoll(PQgetvalue(res, i, 1), NULL, 10);
		q[i].running = strtoll(PQgetvalue(res, i, 2), NULL, 10);
		q[i].oldest_due_ms = strtoll(PQgetvalue(res, i, 3), NULL, 10);
		q[i].limited = *PQgetvalue(res, i, 4) == 't';
		q[i].paused = *PQgetvalue(res, i, 5) == 't';
		for (int k = 0; k < 5; k++)
			q[i].waiting[k] =
				strtoll(PQgetvalue(res, i, 6 + k), NULL, 10);
		q[i].tokens_milli =
			PQgetisnull(res, i, 11)
				? -1
				: strtoll(PQgetvalue(res, i, 11), NULL, 10);
		q[i].scheduled = strtoll(PQgetvalue(res, i, 12), NULL, 10);
		q[i].unhandled = strtoll(PQgetvalue(res, i, 13), NULL, 10);
	}
	((queue_depths_fn *)c->cb)(c->arg, st, q, (size_t)n);
	free(q);
}

/*
 * The scans read the available and the running rows once each, along the
 * partial claim and running indexes; scheduled and unhandled are two more
 * filters on the same rows, not a scan of their own.
 *
 * The configured queues ($3) come first and each has a row (up to max - 1
 * of them, by name); every other queue, one that only a client named, is
 * summed into the last row, with a NULL name: any role that may enqueue
 * can make queues, and by name alone 32 of them sorting before the real
 * ones took every row.  pgjob.limit_waiting() runs for the configured
 * queues only.
 */
int
queue_depths(struct dbev *d, int max, const char *const *queues, size_t nqueues,
	     const char *const *kinds, size_t nkinds, int64_t timeout_ms,
	     queue_depths_fn *cb, void *arg)
{
	char lim[16];
	snprintf(lim, sizeof(lim), "%d", max);
	char *k = db_text_array(kinds, nkinds);
	char *own = db_text_array(queues, nqueues);
	const char *p[] = {lim, k, own};
	struct db_call call = DB_CALL(cb, arg);
	call.n = (size_t)max;
	if (timeout_ms > 0)
		dbev_time_limit(d, timeout_ms);
	int rc = dbev_call(
		d,
		"with d as (select queue,"
		"  count(*) filter (where state = 'available'"
		"   and run_at <= now()) as due,"
		"  count(*) filter (where state = 'running') as running,"
		"  coalesce(extract(epoch from now() - min(run_at)"
		"   filter (where state = 'available'"
		"    and run_at <= now())) * 1000, 0)::bigint as oldest,"
		"  count(*) filter (where state = 'available'"
		"   and run_at > now()) as scheduled,"
		"  count(*) filter (where state = 'available'"
		"   and kind <> all($2::text[])) as unhandled"
		/* The unfinished, released jobs: jobs_claim_idx (schema
		 * 27).  Not by state, which no index names any more. */
		" from (select queue, state, run_at, kind from pgjob.jobs"
		"   where finished_at is null"
		"    and coalesce(parents_left, 0) = 0) j"
		" group by queue),"
		" q as (select coalesce(d.queue, l.queue) as queue,"
		"  coalesce(d.due, 0) as due, coalesce(d.running, 0) as "
		"running,"
		"  coalesce(d.oldest, 0) as oldest, l.queue is not null as lim,"
		"  coalesce(l.paused, false) as paused,"
		"  coalesce(d.scheduled, 0) as scheduled,"
		"  coalesce(d.unhandled, 0) as unhandled,"
		/* The aggregate's label: a queue of that name is summed. */
		"  coalesce(d.queue, l.queue) = any($3::text[])"
		"   and coalesce(d.queue, l.queue) <> '" QUEUE_OTHER "' as own"
		" from d full join pgjob.limits l on l.queue = d.queue),"
		" o as (select q.*, own and row_number() over (partition by own"
		"   order by queue) < $1::int as shown from q)"
		" select o.queue, o.due, o.running, o.oldest, o.lim, o.paused,"
		"  w.paused, w.throttled, w.concurrency, w.rate,"
		"  w.key_concurrency, (w.tokens * 1000)::bigint,"
		"  o.scheduled, o.unhandled"
		" from o cross join lateral pgjob.limit_waiting(o.queue) w"
		" where o.shown"
		" union all"
		" select null, sum(due), sum(running), max(oldest), false, "
		"false,"
		"  0, 0, 0, 0, 0, null, sum(scheduled), sum(unhandled)"
		" from o where not shown having count(*) > 0"
		" order by 1 nulls last",
		0, 3, p, read_depths, &call);
	if (timeout_ms > 0)
		dbev_time_limit_end(d);
	free(k);
	free(own);
	return rc;
}

static void
read_dead(const struct db_call *c, const struct db_status *st,
	  const PGresult *res)
{
	int n = st->error == DB_OK ? PQntuples(res) : 0;
	if (n > (int)c->n)
		n = (int)c->n;
	struct queue_dead *q = xcalloc((size_t)n + 1, sizeof(*q));
	for (int i = 0; i < n; i++) {
		snprintf(q[i].name, sizeof(q[i].name), "%s",
			 PQgetisnull(res, i, 0) ? QUEUE_OTHER
						: PQgetvalue(res, i, 0));
		q[i].dead = strtoll(PQgetvalue(res, i, 1), NULL, 10);
	}
	((queue_dead_fn *)c->cb)(c->arg, st, q, (size_t)n);
	free(q);
}

/*
 * Dead rows are read along jobs_dead_idx (where dead, a column generated
 * from the state: schema 27).  The worker runs it once a minute, not per
 * scrape (docs/operations.md).  As queue_depths(): the configured queues
 * ($2) each have a row, the others are summed into one with a NULL name.
 */
int
queue_dead(struct dbev *d, int max, const char *const *queues, size_t nqueues,
	   queue_dead_fn *cb, void *arg)
{
	char lim[16];
	snprintf(lim, sizeof(lim), "%d", max);
	char *own = db_text_array(queues, nqueues);
	const char *p[] = {lim, own};
	struct db_call call = DB_CALL(cb, arg);
	call.n = (size_t)max;
	int rc = dbev_call(
		d,
		"with q as (select queue, count(*) as n,"
		"  queue = any($2::text[]) and queue <> '" QUEUE_OTHER
		"' as own"
		"  from pgjob.jobs where dead group by queue),"
		" o as (select q.*, own and row_number() over (partition by own"
		"   order by queue) < $1::int as shown from q)"
		" select queue, n from o where shown"
		" union all select null, sum(n) from o where not shown"
		"  having count(*) > 0"
		" order by 1 nulls last",
		0, 2, p, read_dead, &call);
	free(own);
	return rc;
}

static void
read_counts(const struct db_call *c, const struct db_status *st,
	    const PGresult *res)
{
	int n = st->error == DB_OK ? PQntuples(res) : 0;
	if (n > (int)c->n)
		n = (int)c->n;
	struct queue_count *q = xcalloc((size_t)n + 1, sizeof(*q));
	for (int i = 0; i < n; i++) {
		snprintf(q[i].name, sizeof(q[i].name), "%s",
			 PQgetvalue(res, i, 0));
		q[i].n = strtoll(PQgetvalue(res, i, 1), NULL, 10);
	}
	((queue_count_fn *)c->cb)(c->arg, st, q, (size_t)n);
	free(q);
}

/* Read with the dead jobs, once a minute: it reads every available job's
 * row, as the depths do (src/worker/monitor.c).  As queue_dead(): the
 * config's queues each have their row, every other queue (a name any
 * client that may enqueue can write) is summed into QUEUE_OTHER's. */
int
queue_unserved(struct dbev *d, int max, const char *const *queues,
	       size_t nqueues, int64_t live_ms, queue_count_fn *cb, void *arg)
{
	char lim[16], live[24];
	snprintf(lim, sizeof(lim), "%d", max);
	snprintf(live, sizeof(live), "%lld", (long long)live_ms);
	char *own = db_text_array(queues, nqueues);
	const char *p[] = {lim, live, own};
	struct db_call call = DB_CALL(cb, arg);
	call.n = (size_t)max;
	int rc = dbev_call(
		d,
		"with u as (select queue, sum(jobs)::bigint as n,"
		"  queue = any($3::text[]) and queue <> '" QUEUE_OTHER
		"' as own"
		"  from pgjob.unserved($2::bigint * interval '1 ms')"
		"  group by queue),"
		" o as (select u.*, own and row_number() over (partition by own"
		"   order by queue) < $1::int as shown from u)"
		" select queue, n from o where shown"
		" union all select '" QUEUE_OTHER "', sum(n)::bigint from o"
		"  where not shown having count(*) > 0"
		" order by 1",
		0, 3, p, read_counts, &call);
	free(own);
	return rc;
}

static void
read_workflows(const struct db_call *c, const struct db_status *st,
	       const PGresult *res)
{
	struct queue_workflows w = {0};
	if (st->error == DB_OK && PQntuples(res) == 1) {
		w.running = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
		w.done_total = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
		w.failed_total = strtoll(PQgetvalue(res, 0, 2), NULL, 10);
	}
	((queue_workflows_fn *)c->cb)(c->arg, st, &w);
}

/*
 * The retained workflows are counted (the running ones along their
 * partial index), the pruned ones read from pgjob.workflow_totals, which
 * the pruning duty adds to.
 */
int
queue_workflows(struct dbev *d, queue_workflows_fn *cb, void *arg)
{
	struct db_call call = DB_CALL(cb, arg);
	return dbev_call(d,
			 "select (select count(*) from pgjob.workflows"
			 "   where finished_at is null),"
			 "  t.done + (select count(*) from pgjob.workflows"
			 "   where finished_at is not null and failed = 0),"
			 "  t.failed + (select count(*) from pgjob.workflows"
			 "   where finished_at is not null and failed > 0)"
			 " from pgjob.workflow_totals t",
			 0, 0, NULL, read_workflows, &call);
}
