/*
 * queue_counts: the pieces of the statements that count a queue's jobs
 * without reading a backlog whole, shared by the console's queues
 * (web/api.c) and `pgjob status` (cli/cli_status.c).  Macros, so that
 * each statement is one string literal, built at compile time.
 *
 * Only partial indexes are read, never the table's other rows: the queues
 * of available, dead and waiting jobs by skipping from one queue to the
 * next along jobs_claim_idx, jobs_dead_idx and jobs_waiting_idx; per
 * queue, its due jobs (available and running, one window of
 * jobs_claim_idx), scheduled, dead and waiting ones, each read up to
 * QC_CAP + 1 rows at most, so that a backlog of millions costs what a
 * thousand do (docs/performance.md, "A huge backlog").
 */
#ifndef PGJOBD_DB_QUEUE_COUNTS_H
#define PGJOBD_DB_QUEUE_COUNTS_H

/* A count past this is shown as "at least" (the answers' at_least). */
#define QC_CAP "1000"

/* Unfinished, released jobs (available or running): jobs_claim_idx. */
#define QC_OPEN "j.finished_at is null and coalesce(j.parents_left, 0) = 0"

/* clang-format off */
/* A CTE `name(queue)` of the distinct queues of the rows that match cond,
 * one index descent each (a recursive CTE: the statement must start with
 * "with recursive"); its last row is null. */
#define QC_SKIP_SCAN(name, cond)                                               \
	" " name "(queue) as (select min(j.queue) from pgjob.jobs j"           \
	"  where " cond                                                        \
	"  union all select (select min(j.queue) from pgjob.jobs j"            \
	"   where " cond " and j.queue > " name ".queue)"                      \
	"  from " name " where " name ".queue is not null),"

/* `name`(queue, priority, run_at, id): each queue that has open jobs
 * (QC_OPEN), one index descent each as QC_SKIP_SCAN, with the key of its
 * first open entry of jobs_claim_idx; no null row at the end.  The walks
 * after it start at that key (QC_AT_HEAD): the entries before it are of
 * jobs that ended, which stay in the index until vacuum removes them (a
 * drain of sixty thousand jobs a second leaves millions between two
 * autovacuum runs, the naptime being a minute), and each walk from the
 * queue's start read every one of their index pages again: a statement
 * of `pgjob status` walked them five times (docs/performance.md, "A huge
 * backlog").  The key is read in the statement's snapshot, as every part
 * of it: no open entry sorts before it there. */
#define QC_HEADS(name)                                                         \
	" " name "(queue, priority, run_at, id) as ((select j.queue,"         \
	"  j.priority, j.run_at, j.id from pgjob.jobs j where " QC_OPEN        \
	"  order by j.queue, j.priority, j.run_at, j.id limit 1)"              \
	"  union all select x.queue, x.priority, x.run_at, x.id from " name    \
	"  cross join lateral (select j.queue, j.priority, j.run_at, j.id"     \
	"   from pgjob.jobs j where " QC_OPEN " and j.queue > " name ".queue"  \
	"   order by j.queue, j.priority, j.run_at, j.id limit 1) x),"

/* A condition on j, a row of queue hd.queue in jobs_claim_idx: at or past
 * hd's key, the queue's first open entry (QC_HEADS): an index bound, where
 * the walk starts. */
#define QC_AT_HEAD(hd)                                                         \
	" and (j.priority, j.run_at, j.id) >= (" hd ".priority, " hd           \
	".run_at, " hd ".id)"

/* `alias`.n and .oldest: the count (up to QC_CAP + 1) and oldest run_at
 * of queue n.queue's rows that match cond. */
#define QC_CAPPED(alias, cond)                                                 \
	" cross join lateral (select count(*) as n, min(run_at) as oldest"     \
	"  from (select run_at from pgjob.jobs j where " cond                  \
	"   and j.queue = n.queue limit " QC_CAP " + 1) x) " alias

/* `o`: the queue's due jobs, available and running, in one window of
 * jobs_claim_idx: the first QC_CAP + 1 in the claim's order, where claims
 * take them (a running job was due when claimed); each row's state is
 * read from the heap, since no index holds running or available jobs
 * apart (schema 27: the claim writes no index entry).  One window for
 * both: a window each read the heap twice over.  o.seen > QC_CAP: the
 * window did not hold them all, and o's figures are lower bounds. */
#define QC_DUE_WINDOW                                                          \
	" cross join lateral (select"                                          \
	"  count(*) filter (where x.state = 'available') as available,"        \
	"  count(*) filter (where x.state = 'running') as running,"            \
	"  min(x.run_at) filter (where x.state = 'available') as oldest,"      \
	"  count(*) as seen from (select j.state, j.run_at"                    \
	"  from pgjob.jobs j where " QC_OPEN " and j.queue = n.queue"          \
	QC_AT_HEAD("hd") " and j.run_at <= now()"                             \
	"  order by j.priority, j.run_at, j.id"                                \
	"  limit " QC_CAP " + 1) x) o"

/* `pr`(p): the priorities of queue n.queue's open jobs, the first its
 * head's (hd, QC_HEADS: null when it has none), the next skipped to along
 * jobs_claim_idx (one descent each, as the queues), for a statement that
 * goes on with "select ... from pr ...": QC_SCHEDULED here, and the
 * workers' queue figures (src/db/monitor.c). */
#define QC_PRIORITIES                                                          \
	"  with recursive pr(p) as (select hd.priority"                        \
	"   union all select (select min(j.priority) from pgjob.jobs j"        \
	"    where " QC_OPEN " and j.queue = n.queue and j.priority > pr.p)"   \
	"   from pr where pr.p is not null)"

/* `s`.n: the queue's scheduled jobs, up to QC_CAP + 1, along
 * jobs_claim_idx one priority after the other (the priorities by skipping,
 * as the queues): its columns are queue, priority, run_at, so "run_at >
 * now()" alone walks every due job of the queue before the first
 * scheduled one (a backlog of a million: a million index entries).
 * Scheduled jobs are all available (a running job's run_at is past):
 * counted along the index alone. */
#define QC_SCHEDULED                                                           \
	" cross join lateral (select count(*) as n from ("                     \
	QC_PRIORITIES                                                          \
	"  select 1 from pr cross join lateral (select 1 from pgjob.jobs j"    \
	"   where " QC_OPEN " and j.queue = n.queue and j.priority = pr.p"     \
	"    and j.run_at > now() limit " QC_CAP " + 1) x"                     \
	"  limit " QC_CAP " + 1) y) s"
/* `f`(queue, done, failed): the attempts each queue's jobs ended done and
 * failed (retried or dead) in about the last minute, from the history the
 * workers write at their heartbeats (pgjob.history_minutes, docs/
 * operations.md "History per queue and kind"): the current minute's rows,
 * and the previous minute's weighed by the share of it still within the
 * last 60 s.  A few rows by the primary key, where counting the jobs done
 * in the last minute read every one of them (pgjob.done_since(), a
 * million and more a minute in a drain) and BRIN's ranges not yet
 * summarized; the figures are up to a heartbeat (10 s) behind, and an end
 * that no worker made (SQL by hand) is not in them. */
#define QC_LAST_MINUTE                                                         \
	" f as (select h.queue, round(sum(h.done * x.w))::bigint as done,"     \
	"  round(sum(h.failed * x.w))::bigint as failed"                       \
	"  from pgjob.history_minutes h cross join lateral (select case"       \
	"   when h.at >= date_trunc('minute', now()) then 1.0"                 \
	"   else 1.0 - extract(epoch from now()"                               \
	"    - date_trunc('minute', now())) / 60 end as w) x"                  \
	"  where h.at >= date_trunc('minute', now()) - interval '1 minute'"    \
	"  group by h.queue),"

/* The CTEs qa (QC_HEADS), qd, qw, f (QC_LAST_MINUTE) and the start of `n`, the
 * queues to show: every queue that has jobs available or running, dead or
 * waiting for their parents, that ended jobs in the last minute or that
 * has a row in pgjob.limits (a paused queue with no jobs is still paused).
 * The statement goes on with more "union select queue from ..." and the
 * closing ")". */
#define QC_QUEUES                                                              \
	QC_HEADS("qa")                                                         \
	QC_SKIP_SCAN("qd", "j.dead")                                           \
	QC_SKIP_SCAN("qw", "j.finished_at is null and j.parents_left > 0")     \
	QC_LAST_MINUTE                                                         \
	" n as (select queue from qa where queue is not null"                  \
	"  union select queue from qd where queue is not null"                 \
	"  union select queue from qw where queue is not null"                 \
	"  union select queue from f"                                          \
	"  union select queue from pgjob.limits"

/* The statement's end after QC_QUEUES and its select list: per queue of
 * `n`, its head hd (qa's row, QC_HEADS), the windows o and s, the capped
 * counts w (waiting) and d (dead), its last minute f and its pgjob.limits
 * row l. */
#define QC_FROM_QUEUES                                                         \
	" from n left join qa hd on hd.queue = n.queue"                        \
	QC_DUE_WINDOW                                                          \
	QC_SCHEDULED                                                           \
	QC_CAPPED("w", "j.finished_at is null and j.parents_left > 0")         \
	QC_CAPPED("d", "j.dead")                                               \
	" left join f on f.queue = n.queue"                                    \
	" left join pgjob.limits l on l.queue = n.queue"                       \
	" order by n.queue"

/* A pgjob.limits row `l`'s flow control, as `pgjob status` shows it: its
 * limited column (any limit or fairness set) and throttled_until (null:
 * not throttled). */
#define QC_LIMITED_THROTTLED                                                   \
	"  coalesce(l.global_concurrency is not null"                          \
	"   or l.per_key_concurrency is not null or l.rate is not null"        \
	"   or l.rate_per_key is not null or l.fair, false) as limited,"       \
	"  case when l.throttled_until > now() then l.throttled_until end"     \
	"   as throttled_until,"
/*
 * The available jobs no live worker serves, per kind and queue (the
 * columns of pgjob.unserved() as `pgjob status` shows them: kind, queue,
 * jobs, due, oldest_due_age_s, kind_handled, at_least), among the first
 * QC_CAP + 1 available jobs of each queue in the claim's order
 * (jobs_claim_idx), the ones the workers would take next: `pgjob status`
 * and the workers' metrics (src/db/monitor.c).  A job no one serves is
 * never taken, so it stays at its queue's head as the others are claimed
 * around it; one queued behind a backlog shows once the backlog before it
 * is gone (`pgjob status --exact` and `pgjob doctor` read them all).
 * When a queue's window was full, its rows' figures are lower bounds
 * (at_least).  The live workers are few, but each may handle thousands
 * of kinds: their kinds are a set (w, one row a kind and worker), looked
 * up by hash; "p.kind = any(kinds)" walked each worker's array for every
 * pair, 2.3 s with two workers of 10,000 kinds (tests/bench/many.sh's
 * config).  The windows hold QC_CAP + 1 rows each at most.  Who serves a
 * job (w, and the last "not exists") is pgjob.unserved()'s rule, a worker
 * live while its heartbeat is younger than live (an SQL interval)
 * (sql/schema/functions/unserved.sql), restated here because that
 * function groups every available job: a change to one is a change to
 * both (test_cli's test_status_capped and test_status_text read both).
 */
#define QC_UNSERVED_HEAD(live)                                                 \
	"with recursive"                                                       \
	QC_HEADS("qa")                                                         \
	" w as (select k.kind, x.queues from pgjob.workers x"                  \
	"  cross join lateral unnest(x.kinds) k(kind)"                         \
	"  where x.heartbeat_at >= now() - " live "),"                          \
	" h as (select qa.queue, x.kind, x.run_at, x.seen from qa"             \
	"  cross join lateral (select y.kind, y.run_at,"                       \
	"   count(*) over () as seen from (select j.kind, j.run_at"            \
	"   from pgjob.jobs j where " QC_OPEN " and j.queue = qa.queue"        \
	QC_AT_HEAD("qa") " and j.state = 'available'"                         \
	"   order by j.priority, j.run_at, j.id limit " QC_CAP " + 1) y) x"    \
	"  where qa.queue is not null),"                                       \
	" p as (select h.kind, h.queue, count(*) as jobs,"                     \
	"  count(*) filter (where h.run_at <= now()) as due,"                  \
	"  min(h.run_at) filter (where h.run_at <= now()) as oldest_due_at,"   \
	"  bool_or(h.seen > " QC_CAP ") as more"                               \
	"  from h group by h.kind, h.queue)"                                   \
	" select p.kind, p.queue, least(p.jobs, " QC_CAP ") as jobs,"          \
	"  least(p.due, " QC_CAP ") as due,"                                   \
	"  round(extract(epoch from now() - p.oldest_due_at)::numeric, 3)"     \
	"   as oldest_due_age_s,"                                              \
	"  coalesce(p.kind in (select w.kind from w), false)"                 \
	"   as kind_handled,"                                                  \
	"  case when p.more then '[\"jobs\", \"due\", \"oldest_due_age_s\"]'"  \
	"   else '[]' end::json as at_least"                                   \
	" from p where not exists (select 1 from w where w.kind = p.kind"      \
	"   and (w.queues is null or p.queue = any(w.queues)))"                \
	" order by p.queue, p.kind"
/* clang-format on */

#endif
