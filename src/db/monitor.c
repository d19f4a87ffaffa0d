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
#include "db/queue_counts.h"

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
		q[i].estimated = *PQgetvalue(res, i, 14) == 't';
	}
	((queue_depths_fn *)c->cb)(c->arg, st, q, (size_t)n);
	free(q);
}

/*
 * Bounded, as `pgjob status` and the console are (src/db/queue_counts.h):
 * counting every unfinished job took 1.2 s at 2,000,000 and passed the
 * read's 5 s at 10,000,000, so /metrics kept a drain's first figures for
 * as long as it lasted.  Per queue (the queues found by skipping along
 * jobs_claim_idx, each with its first open entry, where its walks start:
 * QC_HEADS; and those of pgjob.limits), counted exactly up to
 * DEPTH_CAP: its due jobs, available and running, in one window of
 * DEPTH_CAP + 1 rows in the claim's order, their states and kinds read
 * from the heap; its scheduled jobs, one priority after the other, up to
 * DEPTH_CAP + 1 (QC_PRIORITIES, as QC_SCHEDULED walks them, here with
 * the kinds); the oldest due job, the first available one of each
 * priority (the index holds each priority's jobs by run_at).  A window that
 * held more than DEPTH_CAP rows is estimated: one pass over a sample of about
 * DEPTH_SAMPLE_PAGES pages of the table (TABLESAMPLE SYSTEM, whose
 * percentage follows pg_class.relpages), each count scaled by it, and
 * never less than what the window counted; it runs only when some
 * window was full.  The running count stays the window's (a running job
 * was due when claimed: at the window's head unless jobs of a higher
 * priority came since).
 *
 * The configured queues ($3) come first and each has a row (up to max - 1
 * of them, by name); every other queue, one that only a client named, is
 * summed into the last row, with a NULL name: any role that may enqueue
 * can make queues, and by name alone 32 of them sorting before the real
 * ones took every row.  pgjob.limit_waiting() runs for the configured
 * queues only.
 */
#define DEPTH_CAP	   "10000"
#define DEPTH_SAMPLE_PAGES "2000"

/* clang-format off */
/* The queue n.queue's rows of jobs_claim_idx that match cond. */
#define DEPTH_ROWS(cond)                                                       \
	" from pgjob.jobs j where " QC_OPEN " and j.queue = n.queue and " cond

/* A sampled count of e's rows that match cond, scaled to the table. */
#define DEPTH_SAMPLED(cond, name)                                              \
	"  (count(*) filter (where " cond ") * 100"                            \
	"   / (select p from pct))::bigint as " name

static const char DEPTHS_SQL[] =
	"with recursive"
	QC_HEADS("qa")
	" n as (select queue from qa where queue is not null"
	"  union select queue from pgjob.limits),"
	" c as (select n.queue, o.due, o.running, o.unhandled as due_unhandled,"
	"  o.seen, s.n as scheduled, s.unhandled as sched_unhandled, a.oldest"
	"  from n left join qa hd on hd.queue = n.queue"
	"  cross join lateral (select"
	"   count(*) filter (where x.state = 'available') as due,"
	"   count(*) filter (where x.state = 'running') as running,"
	"   count(*) filter (where x.state = 'available'"
	"    and x.kind <> all($2::text[])) as unhandled,"
	"   count(*) as seen"
	"   from (select j.state, j.kind"
	DEPTH_ROWS("j.run_at <= now()" QC_AT_HEAD("hd"))
	"    order by j.priority, j.run_at, j.id"
	"    limit " DEPTH_CAP " + 1) x) o"
	/* Scheduled jobs are all available (a running one's run_at is
	 * past): the index's entries and their kinds. */
	"  cross join lateral (select count(*) as n,"
	"   count(*) filter (where y.kind <> all($2::text[])) as unhandled"
	"   from (" QC_PRIORITIES
	"   select x.kind from pr cross join lateral (select j.kind"
	DEPTH_ROWS("j.priority = pr.p and j.run_at > now()")
	"    limit " DEPTH_CAP " + 1) x"
	"   limit " DEPTH_CAP " + 1) y) s"
	"  cross join lateral (select min(x.run_at) as oldest"
	"   from (" QC_PRIORITIES
	"   select (select j.run_at" DEPTH_ROWS("j.priority = pr.p"
	"     and j.run_at <= now() and j.state = 'available'"
	QC_AT_HEAD("hd"))
	"     order by j.run_at limit 1) as run_at"
	"    from pr where pr.p is not null) x) a),"
	" pct as (select least(100, 100.0 * " DEPTH_SAMPLE_PAGES
	"   / greatest(t.relpages, 1))::float8 as p"
	"  from pg_class t where t.oid = 'pgjob.jobs'::regclass),"
	" e as (select j.queue,"
	DEPTH_SAMPLED("j.state = 'available' and j.run_at <= now()", "due") ","
	DEPTH_SAMPLED("j.state = 'available' and j.run_at > now()",
		      "scheduled") ","
	DEPTH_SAMPLED("j.state = 'available' and j.run_at <= now()"
		      " and j.kind <> all($2::text[])", "due_unhandled") ","
	DEPTH_SAMPLED("j.state = 'available' and j.run_at > now()"
		      " and j.kind <> all($2::text[])", "sched_unhandled")
	"  from pgjob.jobs j tablesample system ((select p from pct))"
	"  where " QC_OPEN
	"   and (select bool_or(c.seen > " DEPTH_CAP " or c.scheduled > "
	DEPTH_CAP ") from c)"
	"  group by j.queue),"
	" q as (select c.queue, c.running,"
	"  case when c.seen > " DEPTH_CAP " then greatest(c.due, e.due)"
	"   else c.due end as due,"
	"  coalesce(extract(epoch from now() - c.oldest) * 1000, 0)::bigint"
	"   as oldest,"
	"  case when c.scheduled > " DEPTH_CAP
	"   then greatest(c.scheduled, e.scheduled) else c.scheduled end"
	"   as scheduled,"
	"  case when c.seen > " DEPTH_CAP
	"   then greatest(c.due_unhandled, e.due_unhandled)"
	"   else c.due_unhandled end"
	"  + case when c.scheduled > " DEPTH_CAP
	"   then greatest(c.sched_unhandled, e.sched_unhandled)"
	"   else c.sched_unhandled end as unhandled,"
	"  c.seen > " DEPTH_CAP " or c.scheduled > " DEPTH_CAP " as estimated,"
	"  l.queue is not null as lim, coalesce(l.paused, false) as paused,"
	/* The aggregate's label: a queue of that name is summed. */
	"  c.queue = any($3::text[]) and c.queue <> '" QUEUE_OTHER "' as own"
	"  from c left join e on e.queue = c.queue"
	"  left join pgjob.limits l on l.queue = c.queue),"
	" o as (select q.*, own and row_number() over (partition by own"
	"   order by queue) < $1::int as shown from q)"
	" select o.queue, o.due, o.running, o.oldest, o.lim, o.paused,"
	"  w.paused, w.throttled, w.concurrency, w.rate,"
	"  w.key_concurrency, (w.tokens * 1000)::bigint,"
	"  o.scheduled, o.unhandled, o.estimated"
	" from o cross join lateral pgjob.limit_waiting(o.queue) w"
	" where o.shown"
	" union all"
	" select null, sum(due), sum(running), max(oldest), false, false,"
	"  0, 0, 0, 0, 0, null, sum(scheduled), sum(unhandled),"
	"  bool_or(estimated)"
	" from o where not shown having count(*) > 0"
	" order by 1 nulls last";
/* clang-format on */

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
	int rc = dbev_call(d, DEPTHS_SQL, 0, 3, p, read_depths, &call);
	if (timeout_ms > 0)
		dbev_time_limit_end(d);
	free(k);
	free(own);
	return rc;
}

static void
read_nothing(const struct db_call *c, const struct db_status *st,
	     const PGresult *res)
{
	(void)c;
	(void)st;
	(void)res;
}

/*
 * The monitor's own connection: no JIT.  The depths' statement is cheap
 * but its estimated cost is not (a recursive walk per queue, estimated at
 * a hundred queues): past jit_above_cost, compiling it took a second of
 * every read, about a thousand times the read, and the next read waits
 * 49 times a read's cost.  The workers' own connection has it off
 * already (session_planner_settings), for the same reason.  An answer
 * that failed is the connection's, which the next read finds.
 */
int
monitor_session(struct dbev *d)
{
	struct db_call call = DB_CALL(NULL, NULL);
	return dbev_call(d, "select set_config('jit', 'off', false)", 0, 0,
			 NULL, read_nothing, &call);
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

/* Read with the dead jobs, once a minute.  Among each queue's first
 * 1,001 available jobs in the claim's order (QC_UNSERVED_HEAD, as `pgjob
 * status`): pgjob.unserved() reads every available job, seconds at ten
 * million, on the connection the depths are read on next.  A job no one
 * serves stays at its queue's head while the others are claimed.  As
 * queue_dead(): the config's queues each have their row, every other
 * queue (a name any client that may enqueue can write) is summed into
 * QUEUE_OTHER's. */
/* clang-format off */
static const char UNSERVED_SQL[] =
	"with u as (select queue, sum(jobs)::bigint as n,"
	"  queue = any($3::text[]) and queue <> '" QUEUE_OTHER "' as own"
	"  from (" QC_UNSERVED_HEAD("$2::bigint * interval '1 ms'") ") h"
	"  group by queue),"
	" o as (select u.*, own and row_number() over (partition by own"
	"   order by queue) < $1::int as shown from u)"
	" select queue, n from o where shown"
	" union all select '" QUEUE_OTHER "', sum(n)::bigint from o"
	"  where not shown having count(*) > 0"
	" order by 1";
/* clang-format on */

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
	int rc = dbev_call(d, UNSERVED_SQL, 0, 3, p, read_counts, &call);
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
