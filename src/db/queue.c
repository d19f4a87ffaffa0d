/*
 * queue: the finish, claim, renew and sql-handler statements.
 *
 * The claim takes, per queue, up to that queue's free capacity: due jobs
 * by priority, run_at and id, available or whose lease expired (their
 * worker died).  It is an UPDATE ... WHERE id = any(SELECT ... FOR UPDATE SKIP
 * LOCKED), so concurrent claimers skip each other's rows.  A worker sends
 * the ends of a batch and the next claim in one round trip.
 */
#include "db/queue.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/failpoint.h"
#include "common/util.h"
#include "db/db.h"
#include "db/internal.h"

/*
 * The end of a batch: each row is written only where id, token and state
 * 'running' still match (compare-and-set on the lease).  A job that ends
 * done is deleted there and then (fd): no new row version, no index
 * entries in pgjob.jobs, nothing for the pruning duty to delete later.
 * With $8 (retention 0) that is all; but for a job with children
 * (sql/011_workflows.sql), which is written done so that its row trigger
 * releases them, and pruned later.  With a retention, a plain job (done
 * at its first claim, no workflow, batch, parent or child: MOVED) gets a
 * copy of its row in pgjob.jobs_done (fm), in the ring of its end's period
 * for the retention $13 (sql/019_jobs_done.sql); every other end is
 * written in place (f), as before.  fd's and f's conditions are each
 * other's complement for a done row: write them together.
 * $9, $10, $11: each attempt's figures (sql/012_attempt_usage.sql; the
 * rows deleted at retention 0 keep none).  $12: a failure's exit or HTTP
 * status, NULL for the rest (last_status, sql/013_attempts.sql).
 * locked_by is left as it is: it names the worker of the job's last
 * attempt.  An attempt that did not end done gets its row of
 * pgjob.attempts from the trigger of sql/013_attempts.sql; a job deleted
 * at retention 0 takes its rows with it (fa), in the statement of a worker
 * with retention 0 only (pgjob_finish_delete): elsewhere it would call a
 * function at every finish to delete nothing.  A moved job has none: it
 * ended at its first attempt.
 * Rows: 'f' and the id of each job whose end was written.
 *
 * The worker pipelines the next claim right behind it, in the same round
 * trip but its own transaction: see send_cycle() in worker.c for why the
 * two are not one statement.
 */
/*
 * No join with the batch: each statement finds its rows by
 * j.id = any(...) over the ids in $1, an index condition on jobs_pkey
 * (fd only those of the ends that are done, f only those fd did not
 * delete: every CTE sees the statement's snapshot, where fd's rows are
 * still there, and f would look each one up again to leave it; that was a
 * third of the finish's buffer reads), and reads the values
 * of row j out of the arrays at AT(j), where $1 holds j.id (queue_finish()
 * sends the arrays sorted by id, and width_bucket() on a sorted array is
 * a binary search that gives the element's position).  A join of jobs
 * with unnest($1, ...) had two plans, and which one the planner took
 * depended on what the last ANALYZE found: under a feed it can find few
 * live rows, and then the finish read jobs_pkey whole, with no index
 * condition, for every batch (1 to 1.6 s each; docs/performance.md,
 * "Plans that depend on what an ANALYZE found").  A fixed-width array
 * without NULLs is read at a position in constant time (see below for
 * the rest).
 */
#define POS		"width_bucket(j.id, $1::bigint[])"
#define AT(param, type) "(" param "::" type ")[" POS "]"
/*
 * An element of an array with NULLs costs a walk to it too (the null
 * bitmap is counted up to it), and so does a text element: read at the
 * position of every row of a batch, a walk of half the batch per row and
 * array.  With a result per job, those walks were 5 % of the server's
 * samples in a drain of no-op jobs (perf record: array_get_element, in the
 * finish).  So the attempt figures travel without NULLs, -1 standing for
 * one (figure_array(); FIGURE_AT).  The results travel as one jsonb array
 * of those there are ($4; the worker checked each one's text,
 * pgtext_is_jsonb()), whose element k jsonb finds without a walk, and $15
 * is each end's place in it (0: none).  The errors, on failures only,
 * travel compact too, a text[] of those there are ($5), and $16 is each
 * end's place (0: none, a subscript out of range is NULL): a batch of
 * ends without one walks nothing.
 */
#define FIGURE_AT(param, i) "nullif((" param "::int[])[" i "], -1)"
#define RESULT_AT(i)                                                           \
	"(case when ($15::int[])[" i "] > 0 then ($4::jsonb) ->"               \
	" (($15::int[])[" i "] - 1) end)"
#define ERROR_AT(i) "($5::text[])[($16::int[])[" i "]]"
/*
 * An end's state travels as its code, enum job_state (common/job.h): 0
 * available, 1 running, 2 done, 3 dead, 4 cancelled.  As names (text[]),
 * f read it three times per row, each a walk of half the batch: on the
 * ends that stay in pgjob.jobs, the retries and failures.  Its name comes
 * from a constant array of five.
 */
#define STATE_AT AT("$3", "smallint[]")
#define STATE_NAMES                                                            \
	"'{available,running,done,dead,cancelled,available}'::text[]"
#define STATE_NAME "(" STATE_NAMES ")[" STATE_AT " + 1]"
/*
 * A snooze (struct queue_finish's snooze) travels as state 5, one past
 * enum job_state, and is written available, or dead past the cap: its
 * count is on the row (snoozes, sql/031_snoozes.sql), which the worker
 * does not read.
 */
#define SNOOZE_CODE "5"
#define SNOOZE_CAPPED                                                          \
	"(" STATE_AT " = " SNOOZE_CODE                                         \
	" and j.snoozes >= " QUEUE_MAX_SNOOZES_S ")"
_Static_assert(JOB_AVAILABLE == 0 && JOB_RUNNING == 1 && JOB_DONE == 2 &&
		       JOB_DEAD == 3 && JOB_CANCELLED == 4,
	       "STATE_NAMES lists enum job_state in its order");

#define FINISH_NPARAMS 16
/* The range statements: $17 and $18, the lowest and highest done id. */
#define FINISH_RANGE_NPARAMS 18
/* A batch's done ids are dense when the range from the lowest to the
 * highest holds at most half as many ids again as there are. */
#define FINISH_DENSE(n, lo, hi) ((hi) - (lo) < (int64_t)((n) + (n) / 2))

/* clang-format off */
#define MOVED                                                                  \
	"(j.children is not true and ($8 or (j.lease_token = 1"               \
	" and j.parents_left is null and j.workflow_id is null"                \
	" and j.batch_id is null)))"

static const char finish_fd_sql[] =
	"with fd as ("
	"  delete from pgjob.jobs j"
	/* Only the ids of the ends that are done ($14) are looked up. */
	"  where j.id = any(array(select u.i from unnest($1::bigint[],"
	"    $14::bool[]) u(i, d) where u.d))"
	"   and j.lease_token = " AT("$2", "bigint[]")
	"   and coalesce(j.state, '') = 'running'"
	"   and " MOVED;

/*
 * The same delete for a batch whose done ids are dense (queue_finish()
 * decides: FINISH_DENSE): one read of jobs_pkey from the lowest ($17) to
 * the highest ($18), each entry tested for membership at its position,
 * rather than a descent of the index per id.  On a copy of pgjob.jobs, a
 * delete of 1,000 claimed rows took 1.6 ms against 2.4 (docs/performance.md,
 * "The finish of a dense batch").  A batch of ids far apart (a retry, a
 * job that ran long, many workers in one lane) would read every entry
 * between them: that one takes the statement above.
 */
static const char finish_fd_range_sql[] =
	"with fd as ("
	"  delete from pgjob.jobs j"
	"  where j.id >= $17::bigint and j.id <= $18::bigint"
	"   and ($1::bigint[])[" POS "] = j.id"
	"   and " AT("$14", "bool[]")
	"   and j.lease_token = " AT("$2", "bigint[]")
	"   and coalesce(j.state, '') = 'running'"
	"   and " MOVED;

/* With a retention: fm copies what fd deleted into pgjob.jobs_done. */
static const char finish_move_sql[] =
	"  returning j.*, width_bucket(j.id, $1::bigint[]) as r_i),"
	" fm as ("
	"  insert into pgjob.jobs_done (id, queue, kind, payload, priority,"
	"   run_at, state, attempts, max_attempts, locked_by, locked_until,"
	"   lease_token, unique_key, ordering_key, last_error, result,"
	"   created_at, finished_at, lost_attempts, limit_key, cost,"
	"   attempted_at, children, parents_left, on_parent_failure,"
	"   workflow_id, step, batch_id, last_wall_ms, last_cpu_ms,"
	"   last_max_rss_kb, last_status, enqueued_by, ring)"
	"  select id, queue, kind, payload, priority, run_at, 'done',"
	"   attempts - case when ($7::bool[])[r_i] then 1 else 0 end,"
	"   max_attempts, locked_by, null, lease_token, unique_key,"
	"   ordering_key, coalesce(" ERROR_AT("r_i") ", last_error),"
	"   " RESULT_AT("r_i") ", created_at, now(),"
	"   lost_attempts, limit_key, cost, attempted_at, children,"
	"   parents_left, on_parent_failure, workflow_id, step, batch_id,"
	"   " FIGURE_AT("$9", "r_i") ", " FIGURE_AT("$10", "r_i") ","
	"   " FIGURE_AT("$11", "r_i") ", " FIGURE_AT("$12", "r_i") ","
	"   enqueued_by,"
	/* Once per statement, not per row. */
	"   (select pgjob.done_ring(now(), $13::bigint))"
	"  from fd where not $8),";
/* clang-format on */

/* With retention 0: the attempt history of the jobs deleted done, if they
 * can have any (sql/013_attempts.sql); the function is not called for a
 * batch without one (its call, a security definer's, cost 2-3 % of the
 * no-op throughput).  fa has one row: the join below makes it run, after
 * fd. */
static const char finish_delete_sql[] =
	/* Only what fa and the rows below read: the whole row, payload and
	 * all, was kept in fd's tuplestore for nothing (about 0.4 us a job). */
	"  returning j.id, j.lease_token),"
	/* $13, the retention (0 here), is named so that its type is known:
	 * a parameter no part of a statement reads has none, and the
	 * statement would not prepare. */
	" fa as (select $13::bigint as retention,"
	"  case when exists (select 1 from fd"
	"   where lease_token > 1) then pgjob.forget_attempts(array("
	"   select id from fd where lease_token > 1)) end as n),";

/* clang-format off */
static const char finish_tail_sql[] =
	" f as ("
	"  update pgjob.jobs j set state = case when " SNOOZE_CAPPED
	"    then 'dead' else " STATE_NAME " end,"
	"   result = " RESULT_AT(POS) ","
	"   last_error = case when " SNOOZE_CAPPED " then 'snoozed "
	QUEUE_MAX_SNOOZES_S " times, the most a job may'"
	"    else coalesce(" ERROR_AT(POS) ", j.last_error) end,"
	/* What the attempt used (sql/012_attempt_usage.sql). */
	"   last_wall_ms = " FIGURE_AT("$9", POS) ","
	"   last_cpu_ms = " FIGURE_AT("$10", POS) ","
	"   last_max_rss_kb = " FIGURE_AT("$11", POS) ","
	"   last_status = " FIGURE_AT("$12", POS) ","
	/* Not available: the attempt ended the job (done, failed, dead,
	 * cancelled); available: a retry, after its delay. */
	"   finished_at = case when " STATE_AT " <> 0 and (" STATE_AT " <> "
	SNOOZE_CODE " or " SNOOZE_CAPPED ") then now() end,"
	"   run_at = case when " STATE_AT " in (0, " SNOOZE_CODE ")"
	"    then now() + " AT("$6", "bigint[]") " * interval '1 millisecond'"
	"    else j.run_at end,"
	"   snoozes = j.snoozes + case when " STATE_AT " = " SNOOZE_CODE
	"    then 1 else 0 end,"
	"   attempts = j.attempts"
	"    - case when " AT("$7", "bool[]") " and not " SNOOZE_CAPPED
	"     then 1 else 0 end,"
	"   locked_until = null"
	/* Not the ids fd deleted: each would be looked up again in
	 * jobs_pkey and its heap row read, to be left (every CTE sees the
	 * statement's snapshot, where fd's rows are still there). */
	"  where j.id = any(array(select u.i from unnest($1::bigint[]) u(i)"
	"    except all select fd.id from fd))"
	/* Nothing left when fd took every end, as it does for a batch of
	 * plain jobs done: a one-time test, so that neither the except
	 * above nor the scan runs. */
	"   and (select count(*) from fd) < cardinality($1::bigint[])"
	"   and not (" AT("$14", "bool[]") " and " MOVED ")"
	"   and j.lease_token = " AT("$2", "bigint[]")
	/* The state test is not written j.state = 'running': the planner
	 * would then prefer to read every running job from
	 * jobs_running_idx (dead entries too). */
	"   and coalesce(j.state, '') = 'running'"
	/* A snooze past the cap: written dead (returned 's'). */
	"  returning j.id, " STATE_AT " = " SNOOZE_CODE
	"   and j.state = 'dead' as capped)";
/* clang-format on */

static const char finish_end_sql[] =
	" select case when capped then 's' else 'f' end, id from f"
	" union all select 'f', id from fd";
static const char finish_delete_end_sql[] =
	" select case when capped then 's' else 'f' end, id from f"
	" union all select 'f', fd.id from fd, fa";

/*
 * The claim, per queue (q.name, up to q.lim jobs, in mode q.mode), of the
 * queue's unfinished jobs that wait for no parent: by mode, due jobs by
 * priority, run_at, id (parallel); the head of the queue, its lowest
 * unfinished id, if it is due (serial); the head of each ordering_key, its
 * oldest unfinished job, if due (per_key; jobs without a key are
 * independent).  A job is taken if it is available or its lease expired
 * (its worker vanished; that attempt counts as lost): in place, where the
 * queue's order puts it.  A serial or per_key head that waits for a retry
 * or runs holds back the jobs behind it.  SKIP LOCKED on the head itself
 * never moves a claimer on to the next job: it finds nothing, as it
 * should.
 *
 * Every condition is in columns the claim does not write (finished_at,
 * parents_left, queue, run_at, priority, id, ordering_key), and every
 * index of pgjob.jobs is over such columns (sql/027_hot_claim.sql): the
 * claim's update can be HOT (fillfactor 40 leaves it room on the page),
 * and then writes no index entry.  An expired lease
 * behind a position is found by the next claim from the head (the sweep,
 * at least once a second: from_positions() in src/worker/claim.c).
 *
 * Rows: 'c' and the claimed job's columns; 'p' and, per queue, where the
 * parallel branch stopped (struct queue_claimed).
 *
 * Past a position, the parallel branch leaves every row whose version it
 * sees has an xmax: one that another claim has locked (SKIP LOCKED would
 * skip it after trying its lock), or has claimed and committed since this
 * statement's snapshot.  FOR UPDATE would follow such a row to its newest
 * version, running, lock it, find it no longer available and drop it, but
 * hold the lock to the end of the claim: the worker that ran the job
 * then waited for this claim to write the job's end.  With 16 claimers,
 * sampled wait events showed ends waiting on Lock:transactionid in 21 of
 * 50 samples (2 after), the ends' mean time fell from 17.4 to 9.0 ms, and
 * 16 x 1 workers ran 28,143 and 29,325 jobs/s before, 39,491 and 40,461
 * after.  An xmax equal to the row's xmin is a lock that the transaction
 * which wrote this version took after it (it would be a newer version
 * otherwise): a workflow's released steps (sql/011_workflows.sql leaves
 * them so), a parent its children were enqueued after in the same
 * transaction.  Those are taken: without that, the 10,000 steps a
 * parent's end released waited for the sweeps, 1,000 a second (the
 * suite's fan-out row fell from 7,038 to 1,087 jobs/s).  Another xmax can
 * be a lock a transaction took and left (children attached to a parent
 * later, pgjob cancel finding nothing to do): such a job waits for a claim
 * from the head, which reads without the test (at least once a second:
 * from_positions() in src/worker/claim.c).
 *
 * A claim that takes its turn (TURN_SQL) may start its parallel scan of a
 * queue further on than its position (ha): past the job where the last
 * claim in its turn stopped, of either lane, the further of the two (each
 * sets its queue's sequence of its lane, STOP_SEQ, to the id of the last
 * job it took; the next in its lane reads it once that one committed and
 * gave up the turn; the other lane's may be of a claim in progress, whose
 * job is not yet running in this claim's snapshot, and is passed over).
 * Every available job before it that that claim could see, it took or
 * found locked (the other lane's claim in progress, if any, started from
 * the same place or from further back: its rows are locked, and passed).
 * Only if that job is still the claim's, its lease taken in the last
 * 200 ms (a claim that rolled back leaves its value, setval() is not
 * transactional, but not its jobs), and if that claim's worker handles
 * every kind this one does (its slot, from locked_by, in pgjob.workers):
 * else the jobs it left for their kind would be passed over.  And only
 * before (cp, cr), the earliest key of the NOTIFYs this worker had since
 * its last claim that sort after its position: jobs that came after the
 * last claim's snapshot.  For the 200 ms a lease counts from the claim
 * statement's start (statement_timestamp()), not its transaction's, which
 * began with the wait for the turn: the last claim that committed started
 * its statement a claim's time ago, however long it waited.
 *
 * Until schema version 22 the start was read from jobs_running_idx
 * backwards (the running job whose lease ends last): under a snapshot
 * held open elsewhere that read passed the entries of every job that
 * ended since (78,000 of them through 2 s of leases, in a churn at 39,170
 * jobs/s), and it was a reader of running jobs through an index on state,
 * which every claim then has to write an entry in (docs/performance.md,
 * "Where a crowded claim starts").  Now one read of a sequence and one
 * lookup by id; a sequence rather than a row, which a snapshot held open
 * would keep every version of.  A NOTIFY from each claim was tried first:
 * a worker waiting for its turn receives none until its own claim is
 * done, so it knew only where claims stopped before it asked; 16 x 1
 * workers read 16 claim-index entries a job instead of 5, and ran at 0.79
 * of 1 x 2 instead of 0.90.
 *
 * queue_prepare() puts it together: claim_sql (the parallel branch),
 * the serial and per_key branches when a queue of the worker's needs them,
 * and claim_tail_sql.
 */
/* The sequence that holds where the last claim of queue q in lane l (SQL
 * expressions) stopped: one of 32 pairs, by the hash of the name
 * (sql/022_claim_stops.sql).  Two lanes: TURN_LANES in claim.c. */
#define STOP_SEQ(q, l)                                                         \
	"('pgjob.claim_stop_' || ((hashtext(" q ") & 31) * 2 + " l             \
	"))::regclass"

/* The sequence that holds when queue q (an SQL expression) was last swept
 * by a worker of the claim's kinds ($1): one of 32, by the hash of both
 * (sql/029_sweep_tickets.sql). */
#define SWEEP_SEQ(q)                                                           \
	"('pgjob.sweep_at_' || (hashtext(" q " || ' ' || $1::text[]::text)"    \
	" & 31))::regclass"

#define CLAIM_NPARAMS 17

/* clang-format off */
static const char claim_sql[] =
	/* (hp, hr, hi): where the parallel scan of a queue starts, past
	 * the index entries this worker's last claims left behind; NULL is
	 * the head (see queue_claim_req).  run_at travels as microseconds
	 * since the epoch: exact, and never a time the host could have
	 * written (the fault suite's clock scenario checks for those).  ha:
	 * whether to read ahead; tn: whether this claim takes its turn, and
	 * so says where it stopped.  $16: whether it asks for its queues'
	 * sweep tickets. */
	"with qa(name, lim, mode, hp, hr, hi, ha, cp, cr, tn, qi) as ("
	"  select * from unnest($2::text[], $3::int[], $6::text[],"
	"   $7::smallint[], $8::bigint[], $9::bigint[], $11::bool[],"
	"   $12::smallint[], $13::bigint[], $14::bool[]) with ordinality),"
	/* The sweep tickets granted: of each queue asked for whose last
	 * sweep by a worker of these kinds is $17 ms old or older, now
	 * (sql/029_sweep_tickets.sql).  This claim reads it from its head,
	 * the sweep, and says so ('s' rows).  CASEs: the sequence is set
	 * only where the test holds; a CTE of its own, run once.  A role
	 * not granted the sequence (an upgrade whose grants were not run
	 * again, docs/security.md) sweeps whenever it asks, as every
	 * worker did before version 29, rather than fail its claim. */
	" tk as (select qa.qi, case when not $16::bool then false"
	"   when not has_sequence_privilege(" SWEEP_SEQ("qa.name") ","
	"    'select, update') then true"
	"   else case when coalesce(pg_sequence_last_value("
	"     " SWEEP_SEQ("qa.name") "), 0)"
	"    <= (extract(epoch from statement_timestamp()) * 1000)::bigint"
	"     - $17::bigint"
	"   then setval(" SWEEP_SEQ("qa.name") ","
	"    (extract(epoch from statement_timestamp()) * 1000)::bigint)"
	"    is not null else false end end as swept from qa),"
	/* A queue with a row in pgjob.limits is claimed by
	 * pgjob.claim_limited() alone, whatever the worker believes: this
	 * claim leaves it, and says so ('l' rows). */
	" ql as (select qa.*, tk.swept, exists (select 1 from pgjob.limits l"
	"   where l.queue = qa.name) as limited,"
	/* Where the last claim in its turn stopped: read here, once, and
	 * a value the lookup below can use (the function is volatile). */
	"  case when qa.ha and not tk.swept then array["
	"   pg_sequence_last_value(" STOP_SEQ("qa.name", "0") "),"
	"   pg_sequence_last_value(" STOP_SEQ("qa.name", "1") ")]"
	"  end as hs from qa join tk on tk.qi = qa.qi),"
	/* With ha, the scan starts past the job where the last claim in
	 * its turn stopped (its queue's sequences, STOP_SEQ), if that job
	 * is still that claim's (its lease taken in the last 200 ms), further
	 * on than the position, its claimer handles every kind this worker
	 * does, and it sorts before (cp, cr): see the comment above
	 * claim_sql.  One lookup by id; not by j.state = 'running', which
	 * would let the planner read the queue's running jobs from
	 * jobs_running_idx instead. */
	" q as (select ql.name, ql.lim, ql.mode,"
	"   case when not ql.swept then coalesce(h.m[1]::smallint, ql.hp)"
	"    end as hp,"
	"   case when not ql.swept then coalesce(h.m[2], ql.hr) end as hr,"
	"   case when not ql.swept then coalesce(h.m[3], ql.hi) end as hi,"
	"   ql.tn, ql.qi"
	"  from ql left join lateral ("
	/* Of the two lanes' stops that hold, the further: the greatest
	 * position, as an array (an aggregate, where an order by would
	 * sort the rows it reads). */
	"   select max(array[h.priority::bigint, h.us, h.id]) as m from ("
	"    select j.priority, j.id, j.locked_by,"
	"     (extract(epoch from j.run_at) * 1000000)::bigint as us"
	"    from pgjob.jobs j where j.id = any(ql.hs)"
	"     and coalesce(j.state, '') = 'running'"
	"     and j.queue = ql.name"
	"     and j.locked_until > statement_timestamp()"
	"      + ($5::bigint - 200) * interval '1 millisecond') h"
	"   where (h.priority, h.us, h.id) > (ql.hp, ql.hr, ql.hi)"
	"    and (ql.cp is null or (h.priority, h.us) < (ql.cp, ql.cr))"
	"    and exists (select 1 from pgjob.workers wk"
	"     where wk.slot = substring(h.locked_by from ':([0-9]+)$')::int"
	"      and wk.kinds @> $1::text[])) h on true"
	"  where not ql.limited),"
	/* Per candidate: its branch, its queue's ordinal, and for the
	 * parallel branch its (priority, run_at), where the next claim
	 * starts from.  Narrow and fixed-width: the last one of each queue
	 * is found without deforming wide rows or comparing text. */
	" cand as ("
	"  select c.id, c.t, c.b, q.qi, c.pr, c.ra from q cross join lateral ("
	"   select a.id, a.ctid as t, 'a' as b, a.priority as pr,"
	"    a.run_at as ra from ("
	"     select j.id, j.ctid, j.priority, j.run_at from pgjob.jobs j"
	"     where q.mode = 'parallel' and j.finished_at is null"
	"       and coalesce(j.parents_left, 0) = 0"
	"       and (j.state = 'available' or j.locked_until < now())"
	"       and j.queue = q.name and j.run_at <= now()"
	"       and j.kind = any($1::text[])"
	/* A bound the index scan starts from, not a filter: always true
	 * without a position. */
	"       and (j.priority, j.run_at, j.id) > ("
	"        coalesce(q.hp, (-32768)::smallint),"
	"        coalesce(timestamptz 'epoch'"
	"         + q.hr * interval '1 microsecond', '-infinity'),"
	"        coalesce(q.hi, (-9223372036854775807)::bigint))"
	/* Past a position, a row that some transaction locked or updated
	 * is left for the head scans (see the comment above claim_sql). */
	"       and (q.hi is null or j.xmax = '0'::xid"
	"        or j.xmax = j.xmin)"
	"     order by j.priority, j.run_at, j.id"
	"     limit q.lim for update skip locked) a";

/* The serial branch, in the claim of a worker that serves a serial queue.
 * "lease_token is not null", true of every row, is the predicate of the
 * serial head's index that nothing in the parallel branch implies: so the
 * parallel branch cannot read its queue along that index and sort it
 * (sql/021_serial_head_index.sql). */
static const char claim_serial_sql[] =
	"   union all"
	"   select s.id, s.ctid, 's', null, null from ("
	"     select j.id, j.ctid from pgjob.jobs j"
	"     where q.mode = 'serial' and j.id = (select min(h.id)"
	"       from pgjob.jobs h where h.queue = q.name"
	"        and h.finished_at is null and coalesce(h.parents_left, 0) = 0"
	"        and h.created_at is not null)"
	"       and (j.state = 'available' or j.locked_until < now())"
	"       and j.run_at <= now() and j.kind = any($1::text[])"
	"     for update skip locked) s";

/* The per_key branch, likewise: a job whose key has an older unfinished
 * job waits for it. */
static const char claim_per_key_sql[] =
	"   union all"
	"   select k.id, k.ctid, 'k', null, null from ("
	"     select j.id, j.ctid from pgjob.jobs j"
	"     where q.mode = 'per_key' and j.finished_at is null"
	"       and coalesce(j.parents_left, 0) = 0"
	"       and (j.state = 'available' or j.locked_until < now())"
	"       and j.queue = q.name and j.run_at <= now()"
	"       and j.kind = any($1::text[])"
	"       and (j.ordering_key is null or not exists ("
	"        select 1 from pgjob.jobs o where o.queue = q.name"
	"         and o.ordering_key = j.ordering_key and o.id < j.id"
	"         and o.finished_at is null"
	"         and coalesce(o.parents_left, 0) = 0))"
	"     order by j.priority, j.run_at, j.id"
	"     limit q.lim for update skip locked) k";

static const char claim_tail_sql[] =
	"   limit q.lim) c),"
	" u as ("
	"  update pgjob.jobs j set state = 'running', locked_by = $4,"
	"   locked_until = statement_timestamp()"
	"    + $5::bigint * interval '1 millisecond',"
	"   lease_token = j.lease_token + 1, attempts = j.attempts + 1,"
	"   attempted_at = now(),"
	/* A running row here is one whose lease expired: its worker
	 * vanished, and that attempt is lost, not failed. */
	"   lost_attempts = j.lost_attempts"
	"    + case when j.state = 'running' then 1 else 0 end"
	/* An array, so that the planner reads the rows by their TIDs
	 * rather than joining the whole table.  By TID, not by id: cand
	 * locked each row, so the version it read is the one to update
	 * (a version another claim updated since the snapshot is followed
	 * to the newest, which the lock holds, as by id), and a TID costs
	 * no descent of jobs_pkey: a claim of 1,000 read 13 % fewer
	 * buffers, and spent 15.0 us a job on the server against 16.7
	 * (pg_stat_statements, four drains each in turn). */
	"  where j.ctid = any(array(select t from cand))"
	/* The payload as text, once: its length decides below whether it
	 * is sent at all. */
	"  returning j.id, j.kind, j.queue, j.payload::text as payload,"
	"   j.attempts, coalesce(j.max_attempts, 0) as max_attempts,"
	"   j.lease_token, j.ordering_key, j.lost_attempts, j.run_at)"
	/* A payload over $10 bytes never reaches the worker's memory: it
	 * gets the size, and the job ends dead (see start_job()). */
	" select 'c', id, kind, queue,"
	"  case when octet_length(payload) <= $10 then payload end,"
	"  attempts, max_attempts, lease_token, ordering_key,"
	"  null::smallint, null::bigint, lost_attempts, octet_length(payload),"
	/* Its time in the queue (/metrics), in ms. */
	"  (date_part('epoch', now() - run_at) * 1000)::bigint"
	" from u"
	" union all"
	/* Per queue, the last job its parallel branch claimed. */
	" select 'p', l.id, null, q.name, null, null, null, null, null, l.pr,"
	"  (extract(epoch from l.ra) * 1000000)::bigint, null, null, null"
	" from q cross join lateral (select cand.id, cand.pr, cand.ra"
	"  from cand where cand.qi = q.qi and cand.b = 'a'"
	"  order by cand.pr desc, cand.ra desc, cand.id desc limit 1) l"
	/* A claim in its turn says where it stopped, for the claims after
	 * it (ha).  An aggregate (of a column of its own level, or it would
	 * be the outer query's): one row, with the turn or without. */
	"  cross join lateral (select count(setval(o.s, o.id))"
	"   from (select " STOP_SEQ("q.name", "$15::int") " as s, l.id"
	"    where q.tn) o) n"
	" union all"
	" select 'l', null, null, ql.name, null, null, null, null, null, null,"
	"  null, null, null, null from ql where ql.limited"
	" union all"
	" select 's', null, null, ql.name, null, null, null, null, null, null,"
	"  null, null, null, null from ql where ql.swept";
/* clang-format on */

static int
cmp_id(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static void
read_finish(const struct db_call *c, const struct db_status *st,
	    const PGresult *res)
{
	size_t n = 0, nc = 0;
	int rows = st->error == DB_OK ? PQntuples(res) : 0;
	int64_t *ids = xcalloc((size_t)rows + 1, sizeof(int64_t));
	int64_t *capped = xcalloc((size_t)rows + 1, sizeof(int64_t));
	for (int i = 0; i < rows; i++) {
		char t = *PQgetvalue(res, i, 0);
		int64_t id = strtoll(PQgetvalue(res, i, 1), NULL, 10);
		if (t == 'f' || t == 's')
			ids[n++] = id;
		if (t == 's')
			capped[nc++] = id;
	}
	qsort(ids, n, sizeof(int64_t), cmp_id);
	qsort(capped, nc, sizeof(int64_t), cmp_id);
	((queue_finish_fn *)c->cb)(c->arg, st, ids, n, capped, nc);
	free(ids);
	free(capped);
}

/*
 * The int[] literal of an attempt figure (or status) of each end: -1 where
 * it was not measured (< 0), which the statement reads as NULL
 * (FIGURE_AT), 2^31-1 past that (sql/012_attempt_usage.sql).
 */
static char *
figure_array(const int64_t *v, size_t n)
{
	struct buf b = {0};
	buf_append(&b, "{", 1);
	for (size_t i = 0; i < n; i++) {
		if (i)
			buf_append(&b, ",", 1);
		buf_append_int(&b, v[i] < 0	      ? -1
				   : v[i] > INT32_MAX ? INT32_MAX
						      : v[i]);
	}
	buf_append(&b, "}", 1);
	return b.data;
}

/* The bool[] literal of v[0..n): 't' and 'f'. */
static char *
bool_array(const char *v, size_t n)
{
	char *s = xmalloc(2 * n + 2);
	size_t k = 0;
	s[k++] = '{';
	for (size_t i = 0; i < n; i++) {
		if (i)
			s[k++] = ',';
		s[k++] = v[i] ? 't' : 'f';
	}
	s[k++] = '}';
	s[k] = '\0';
	return s;
}

static int
cmp_finish_id(const void *a, const void *b)
{
	const struct queue_finish *x = *(const struct queue_finish *const *)a;
	const struct queue_finish *y = *(const struct queue_finish *const *)b;
	return (x->id > y->id) - (x->id < y->id);
}

int
queue_finish(struct dbev *d, const struct queue_finish *ends, size_t nf,
	     int64_t retention_ms, queue_finish_fn *cb, void *arg)
{
	/* In id order: the statement finds each row's values by a binary
	 * search of the ids (AT, above). */
	const struct queue_finish **sorted = xcalloc(nf + 1, sizeof(*sorted));
	for (size_t i = 0; i < nf; i++)
		sorted[i] = &ends[i];
	qsort(sorted, nf, sizeof(*sorted), cmp_finish_id);
	size_t n1 = nf + 1;
	int64_t *ids = xcalloc(n1, sizeof(int64_t));
	int64_t *tokens = xcalloc(n1, sizeof(int64_t));
	int64_t *delays = xcalloc(n1, sizeof(int64_t));
	int64_t *states = xcalloc(n1, sizeof(int64_t));
	struct buf res = {0};
	const char **errors = xcalloc(n1, sizeof(char *));
	int64_t *res_at = xcalloc(n1, sizeof(int64_t));
	int64_t *err_at = xcalloc(n1, sizeof(int64_t));
	size_t nr = 0, ne = 0;
	char *refunds = xcalloc(n1, 1), *dones = xcalloc(n1, 1);
	/* wall, cpu, rss, status */
	int64_t *fig = xcalloc(4 * n1, sizeof(int64_t));
	for (size_t i = 0; i < nf; i++) {
		const struct queue_finish *f = sorted[i];
		ids[i] = f->id;
		tokens[i] = f->token;
		delays[i] = f->delay_ms;
		/* STATE_AT; a snooze is SNOOZE_CODE. */
		states[i] = f->snooze ? 5 : (int64_t)f->state;
		/* Compact: see RESULT_AT and ERROR_AT. */
		if (f->result) {
			buf_append(&res, nr ? "," : "[", 1);
			buf_append(&res, f->result, strlen(f->result));
			res_at[i] = (int64_t)++nr;
		}
		if (f->error) {
			errors[ne] = f->error;
			err_at[i] = (int64_t)++ne;
		}
		refunds[i] = (char)(f->refund != 0);
		dones[i] = (char)(f->state == JOB_DONE);
		fig[i] = f->wall_ms;
		fig[n1 + i] = f->cpu_ms;
		fig[2 * n1 + i] = f->max_rss_kb;
		fig[3 * n1 + i] = f->status;
	}
	int delete_done = retention_ms == 0;
	/* The done ids' span: dense, the range statements. */
	size_t nd = 0;
	int64_t lo = 0, hi = 0;
	for (size_t i = 0; i < nf; i++)
		if (dones[i]) {
			if (!nd++)
				lo = ids[i];
			hi = ids[i];
		}
	int range = nd > 0 && FINISH_DENSE(nd, lo, hi);
	enum { NP = FINISH_RANGE_NPARAMS };
	char *a[NP];
	a[0] = db_int_array(ids, nf);
	a[1] = db_int_array(tokens, nf);
	a[2] = db_int_array(states, nf);
	buf_append(&res, nr ? "]" : "[]", nr ? 1 : 2);
	a[3] = res.data;
	a[4] = db_text_array(errors, ne);
	a[5] = db_int_array(delays, nf);
	a[6] = bool_array(refunds, nf);
	a[7] = xstrdup(delete_done ? "t" : "f");
	for (int k = 0; k < 4; k++)
		a[8 + k] = figure_array(fig + (size_t)k * n1, nf);
	a[12] = xasprintf("%lld", (long long)retention_ms);
	a[13] = bool_array(dones, nf);
	a[14] = db_int_array(res_at, nf);
	a[15] = db_int_array(err_at, nf);
	a[16] = xasprintf("%lld", (long long)lo);
	a[17] = xasprintf("%lld", (long long)hi);
	const char *p[NP];
	for (int i = 0; i < NP; i++)
		p[i] = a[i];
	static const char *const names[2][2] = {
		{"pgjob_finish", "pgjob_finish_range"},
		{"pgjob_finish_delete", "pgjob_finish_delete_range"}};
	struct db_call call = DB_CALL(cb, arg);
	dbev_failpoints(d, FP_FINISH_SEND, FP_FINISH_RESULT);
	int rc = dbev_call(d, names[delete_done][range], 1,
			   range ? FINISH_RANGE_NPARAMS : FINISH_NPARAMS, p,
			   read_finish, &call);
	for (int i = 0; i < NP; i++)
		free(a[i]);
	free(ids);
	free(tokens);
	free(delays);
	free(states);
	free(errors);
	free(res_at);
	free(err_at);
	free(refunds);
	free(dones);
	free(fig);
	free(sorted);
	return rc;
}

int
queue_id_in(const int64_t *sorted, size_t n, int64_t id)
{
	return bsearch(&id, sorted, n, sizeof(int64_t), cmp_id) != NULL;
}

/* The claimed jobs of a claim's result, as new structs. */
static struct job **
claimed_jobs(const PGresult *res, int *n)
{
	int rows = PQntuples(res);
	struct job **jobs = xcalloc((size_t)rows + 1, sizeof(*jobs));
	*n = 0;
	for (int i = 0; i < rows; i++) {
		if (*PQgetvalue(res, i, 0) != 'c')
			continue;
		struct job *j = xcalloc(1, sizeof(*j));
		j->id = strtoll(PQgetvalue(res, i, 1), NULL, 10);
		j->kind = xstrdup(PQgetvalue(res, i, 2));
		j->queue = xstrdup(PQgetvalue(res, i, 3));
		if (!PQgetisnull(res, i, 4))
			j->payload = xstrdup(PQgetvalue(res, i, 4));
		j->attempt = atoi(PQgetvalue(res, i, 5));
		j->max_attempts = atoi(PQgetvalue(res, i, 6));
		j->lease_token = strtoll(PQgetvalue(res, i, 7), NULL, 10);
		if (!PQgetisnull(res, i, 8))
			j->ordering_key = xstrdup(PQgetvalue(res, i, 8));
		j->lost_attempts = atoi(PQgetvalue(res, i, 11));
		/* NULL: over the limit, not sent (payload_bytes says how
		 * big). */
		j->payload_bytes = strtoll(PQgetvalue(res, i, 12), NULL, 10);
		j->wait_ms =
			PQgetisnull(res, i, 13)
				? -1
				: strtoll(PQgetvalue(res, i, 13), NULL, 10);
		jobs[(*n)++] = j;
	}
	return jobs;
}

/* Per queue asked for, the position of the last job its parallel branch
 * took ('p' rows name the queue). */
static void
claimed_positions(const PGresult *res, const struct db_call *c,
		  struct queue_position *pos, bool *has)
{
	for (int i = 0; i < PQntuples(res); i++) {
		if (*PQgetvalue(res, i, 0) != 'p')
			continue;
		const char *q = PQgetvalue(res, i, 3);
		for (size_t k = 0; k < c->n; k++) {
			if (has[k] || strcmp(c->names[k], q) != 0)
				continue;
			snprintf(pos[k].priority, sizeof(pos[k].priority), "%s",
				 PQgetvalue(res, i, 9));
			snprintf(pos[k].run_at, sizeof(pos[k].run_at), "%s",
				 PQgetvalue(res, i, 10));
			snprintf(pos[k].id, sizeof(pos[k].id), "%s",
				 PQgetvalue(res, i, 1));
			has[k] = true;
			break;
		}
	}
}

static const char *const wait_names[QUEUE_WAIT_N] = {
	[QUEUE_WAIT_PAUSED] = "paused",
	[QUEUE_WAIT_THROTTLED] = "throttled",
	[QUEUE_WAIT_CONCURRENCY] = "concurrency",
	[QUEUE_WAIT_RATE] = "rate",
	[QUEUE_WAIT_KEY_CONCURRENCY] = "key_concurrency",
	[QUEUE_WAIT_KEY_RATE] = "key_rate",
	[QUEUE_WAIT_BUSY] = "busy",
};

const char *
queue_wait_name(enum queue_wait w)
{
	return w < QUEUE_WAIT_N ? wait_names[w] : "?";
}

/* Per queue asked for, what the 'l', 'u' and 'w' rows say of its flow
 * control (kind: why; pr... ra: the retry in ms). */
static void
claimed_flow(const PGresult *res, const struct db_call *c,
	     struct queue_flow_said *flow)
{
	for (int i = 0; i < PQntuples(res); i++) {
		char t = *PQgetvalue(res, i, 0);
		if (t != 'l' && t != 'u' && t != 'w')
			continue;
		const char *q = PQgetvalue(res, i, 3);
		size_t k = 0;
		while (k < c->n && strcmp(c->names[k], q) != 0)
			k++;
		if (k == c->n)
			continue;
		struct queue_flow_said *f = &flow[k];
		f->flow = t == 'l'   ? QUEUE_FLOW_LIMITED
			  : t == 'u' ? QUEUE_FLOW_UNLIMITED
				     : QUEUE_FLOW_WAIT;
		f->why = QUEUE_WAIT_BUSY;
		for (int w = 0; w < QUEUE_WAIT_N; w++)
			if (strcmp(PQgetvalue(res, i, 2), wait_names[w]) == 0)
				f->why = (enum queue_wait)w;
		f->retry_ms =
			PQgetisnull(res, i, 10)
				? -1
				: strtoll(PQgetvalue(res, i, 10), NULL, 10);
	}
}

/* The sweep tickets the claim was granted ('s' rows): ticket[k] for queue k
 * of the request. */
static void
claimed_tickets(const PGresult *res, const struct db_call *c, bool *ticket)
{
	for (int i = 0; i < PQntuples(res); i++) {
		if (*PQgetvalue(res, i, 0) != 's')
			continue;
		const char *q = PQgetvalue(res, i, 3);
		for (size_t k = 0; k < c->n; k++)
			if (strcmp(c->names[k], q) == 0)
				ticket[k] = true;
	}
}

/* The claim's answer; c->names are the queues asked for, in order. */
static void
read_claim_turn(const struct db_call *c, const struct db_status *st,
		const PGresult *res, int turn_wait_ms)
{
	struct queue_position *pos = xcalloc(c->n + 1, sizeof(*pos));
	bool *has = xcalloc(c->n + 1, sizeof(bool));
	struct queue_flow_said *flow = xcalloc(c->n + 1, sizeof(*flow));
	bool *ticket = xcalloc(c->n + 1, sizeof(bool));
	struct queue_claimed out = {.pos = pos,
				    .has_pos = has,
				    .flow = flow,
				    .ticket = ticket,
				    .turn_wait_ms = turn_wait_ms};
	int *queue_of = NULL;
	if (st->error == DB_OK) {
		out.jobs = claimed_jobs(res, &out.njobs);
		claimed_positions(res, c, pos, has);
		claimed_flow(res, c, flow);
		claimed_tickets(res, c, ticket);
		queue_of = xcalloc((size_t)out.njobs + 1, sizeof(int));
		for (int i = 0; i < out.njobs; i++) {
			queue_of[i] = -1;
			for (size_t k = 0; k < c->n && queue_of[i] < 0; k++)
				if (strcmp(c->names[k], out.jobs[i]->queue) ==
				    0)
					queue_of[i] = (int)k;
		}
	}
	out.queue_of = queue_of;
	((queue_claim_fn *)c->cb)(c->arg, st, &out);
	free(queue_of);
	free(out.jobs);
	free(pos);
	free(has);
	free(flow);
	free(ticket);
}

static void
read_claim(const struct db_call *c, const struct db_status *st,
	   const PGresult *res)
{
	read_claim_turn(c, st, res, -1);
}

/*
 * A time limit on the statement sent between the two calls: statement_timeout
 * set for the session before it and reset after it.  Each statement has its
 * own sync, the pipeline keeps their order, and the three go out in one
 * call, so the limit covers that statement alone.
 */
static void
time_limit(struct dbev *d, int64_t ms)
{
	char v[24];
	snprintf(v, sizeof(v), "%lld", (long long)ms);
	const char *p[] = {v};
	dbev_send(d, "select set_config('statement_timeout', $1, false)", 1, p,
		  dbev_ignore, NULL);
}

static void
time_limit_end(struct dbev *d)
{
	dbev_send(d, "reset statement_timeout", 0, NULL, dbev_ignore, NULL);
}

/*
 * Claims that read ahead take turns, per queue and lane: each takes, in
 * one implicit transaction with the claim, a transaction lock per queue
 * it reads ahead in, keyed by the queue's hash and the claimer's lane
 * (its slot's parity: TURN_LANES in claim.c), in the order of the keys,
 * so that two claims that share queues never wait for each other
 * crosswise (two queues whose keys meet share turns, which costs only the
 * wait).  The claim's snapshot is taken after the lock is granted: it
 * sees the claim of its lane before it committed, and neither locks nor
 * reads that claim's rows.  It starts past the newest job of the last
 * claim that committed in either lane (ha in claim_sql), and passes the
 * rows that the other lane's claim in progress has locked.
 *
 * Sixteen claimers each reading from their own position read 16 index
 * entries and fetched 9 heap rows for every job they took.  In one lane,
 * 1.7 and 1.0, but a claim then waited 250-350 ms for its turn, and the
 * claims' time in a row bounded the rate; in two, about 4 and 2, and two
 * claims are in flight at once: 16 x 1 ran 54,518, 53,468 and 44,809
 * jobs/s with two lanes, 45,746, 45,326 and 37,056 with one, 31,699,
 * 48,799 and 52,576 without turns (docs/performance.md, "Claims in
 * turns").  The class, 0x70676a63 ("pgjc"), is not the slots' (config
 * lock_class, "pgjb" by default) nor the migrations' ("pgmg").
 */
#define TURN_SQL                                                               \
	"select count(pg_advisory_xact_lock(1885825635, k)),"                  \
	" (extract(epoch from clock_timestamp() - statement_timestamp())"      \
	"  * 1000)::int from (select distinct hashtext(x) # $2::int as k"      \
	"  from unnest($1::text[]) x order by 1) s"

static void
on_claim_group(void *arg, PGresult **res, int n)
{
	struct db_call *c = arg;
	int turned = res[1] && PQresultStatus(res[0]) == PGRES_TUPLES_OK &&
		     PQntuples(res[0]) == 1;
	PGresult *r = turned ? res[1] : res[0];
	char *text;
	struct db_status st = db_status_of(r, &text);
	read_claim_turn(c, &st, r,
			turned ? (int)strtol(PQgetvalue(res[0], 0, 1), NULL, 10)
			       : -1);
	free(text);
	for (size_t i = 0; c->names && i < c->n; i++)
		free(c->names[i]);
	free(c->names);
	free(c);
}

int
queue_claim(struct dbev *d, const struct queue_claim_req *req,
	    queue_claim_fn *cb, void *arg)
{
	size_t nq = req->nqueues;
	int64_t *lim = xcalloc(nq + 1, sizeof(int64_t));
	const char **fp = xcalloc(nq + 1, sizeof(char *));
	const char **fr = xcalloc(nq + 1, sizeof(char *));
	const char **fi = xcalloc(nq + 1, sizeof(char *));
	const char **ha = xcalloc(nq + 1, sizeof(char *));
	const char **tn = xcalloc(nq + 1, sizeof(char *));
	const char **cp = xcalloc(nq + 1, sizeof(char *));
	const char **cr = xcalloc(nq + 1, sizeof(char *));
	for (size_t i = 0; i < nq; i++) {
		lim[i] = req->limits[i];
		/* No position: NULL, from the head. */
		const struct queue_position *p =
			req->from ? req->from[i] : NULL;
		fp[i] = p ? p->priority : NULL;
		fr[i] = p ? p->run_at : NULL;
		fi[i] = p ? p->id : NULL;
		tn[i] = req->turn && req->turn[i] ? "t" : "f";
		ha[i] = req->turn && req->turn[i] && req->ahead && req->ahead[i]
				? "t"
				: "f";
		const struct queue_position *u =
			req->until ? req->until[i] : NULL;
		cp[i] = u ? u->priority : NULL;
		cr[i] = u ? u->run_at : NULL;
	}
	char *a[CLAIM_NPARAMS];
	a[0] = db_text_array(req->kinds, req->nkinds);
	a[1] = db_text_array(req->queues, nq);
	a[2] = db_int_array(lim, nq);
	a[3] = xstrdup(req->locked_by);
	a[4] = xasprintf("%lld", (long long)req->lease_ms);
	a[5] = db_text_array(req->modes, nq);
	a[6] = db_text_array(fp, nq);
	a[7] = db_text_array(fr, nq);
	a[8] = db_text_array(fi, nq);
	a[9] = xasprintf("%lld", (long long)req->max_payload_bytes);
	a[10] = db_text_array(ha, nq);
	a[11] = db_text_array(cp, nq);
	a[12] = db_text_array(cr, nq);
	a[13] = db_text_array(tn, nq);
	a[14] = xasprintf("%d", req->lane);
	a[15] = xstrdup(req->sweep_ask ? "t" : "f");
	a[16] = xasprintf("%lld", (long long)req->sweep_every_ms);
	free(lim);
	free(fp);
	free(fr);
	free(fi);
	free(ha);
	free(tn);
	free(cp);
	free(cr);
	const char *p[CLAIM_NPARAMS];
	for (int i = 0; i < CLAIM_NPARAMS; i++)
		p[i] = a[i];
	struct db_call call = DB_CALL(cb, arg);
	call.n = nq;
	call.names = xcalloc(nq + 1, sizeof(char *));
	for (size_t k = 0; k < nq; k++)
		call.names[k] = xstrdup(req->queues[k]);
	if (req->timeout_ms > 0)
		time_limit(d, req->timeout_ms);
	dbev_failpoints(d, FP_CLAIM_SEND, FP_CLAIM_RESULT);
	/* The queues that take turns (see TURN_SQL). */
	const char **tq = xcalloc(nq + 1, sizeof(char *));
	size_t nt = 0;
	for (size_t i = 0; req->turn && i < nq; i++)
		if (req->turn[i])
			tq[nt++] = req->queues[i];
	int rc;
	if (nt == 0) {
		rc = dbev_call(d, "pgjob_claim", 1, CLAIM_NPARAMS, p,
			       read_claim, &call);
	} else {
		char *turns = db_text_array(tq, nt);
		char lane[16];
		snprintf(lane, sizeof(lane), "%d", req->lane);
		const char *tp[] = {turns, lane};
		struct db_call *gc = xmalloc(sizeof(*gc));
		*gc = call;
		struct dbev_stmt st[2] = {
			{.sql = TURN_SQL, .nparams = 2, .params = tp},
			{.name = "pgjob_claim",
			 .nparams = CLAIM_NPARAMS,
			 .params = p},
		};
		rc = dbev_send_group(d, st, 2, on_claim_group, gc);
		free(turns);
	}
	free(tq);
	if (req->timeout_ms > 0)
		time_limit_end(d);
	for (int i = 0; i < CLAIM_NPARAMS; i++)
		free(a[i]);
	return rc;
}

int
queue_claim_limited(struct dbev *d, const struct queue_limited_req *req,
		    queue_claim_fn *cb, void *arg)
{
	char want[16], lease[24], maxp[24];
	snprintf(want, sizeof(want), "%d", req->want);
	snprintf(lease, sizeof(lease), "%lld", (long long)req->lease_ms);
	snprintf(maxp, sizeof(maxp), "%lld", (long long)req->max_payload_bytes);
	char *kinds = db_text_array(req->kinds, req->nkinds);
	const char *p[] = {req->queue,	   want,  kinds, req->mode,
			   req->locked_by, lease, maxp};
	struct db_call call = DB_CALL(cb, arg);
	call.n = 1;
	call.names = xcalloc(2, sizeof(char *));
	call.names[0] = xstrdup(req->queue);
	dbev_failpoints(d, FP_CLAIM_SEND, FP_CLAIM_RESULT);
	int rc =
		dbev_call(d, "pgjob_claim_limited", 1, 7, p, read_claim, &call);
	free(kinds);
	return rc;
}

int
queue_publish_limits(struct dbev *d, const char *limits_json)
{
	const char *p[] = {limits_json};
	return dbev_send(d, "select pgjob.publish_limits($1::jsonb)", 1, p,
			 dbev_ignore, NULL);
}

int
queue_throttle(struct dbev *d, const char *queue, int64_t ms)
{
	char v[24];
	snprintf(v, sizeof(v), "%lld", (long long)ms);
	const char *p[] = {queue, v};
	return dbev_send(d, "select pgjob.throttle($1, $2::bigint)", 2, p,
			 dbev_ignore, NULL);
}

/*
 * Renews every (id, token) still held; returns one row per job asked for:
 * id, renewed, whether an operator cancelled it (pgjob cancel sets a
 * running job's state to cancelled, and its worker stops the handler), and
 * the token asked for: an answer is about one attempt, and the worker may
 * hold the same job again under a newer token by the time it comes.
 *
 * Like the finish (AT, above): the rows by j.id = any($1), the token of
 * each at its position in $2 (queue_renew() sends the ids sorted); and
 * whether a job was cancelled, by a lookup per element that OFFSET 0
 * keeps a lookup (a join could read the whole table, as the finish's did).
 */
/* clang-format off */
static const char renew_sql[] =
	"with u as (update pgjob.jobs j"
	"  set locked_until = now() + $3::bigint * interval '1 millisecond',"
	/* The holder's name: a worker that reconnected to another slot
	 * moves its jobs there (session.c's slot_acquire()). */
	"   locked_by = $4::text"
	"  where j.id = any($1::bigint[])"
	"   and j.lease_token = " AT("$2", "bigint[]")
	/* Not j.state = 'running': the planner, which believes few jobs
	 * run, would read every entry of jobs_running_idx and join them to
	 * the batch, rather than look each job up by primary key.  Under a
	 * snapshot held open elsewhere that index keeps an entry for every
	 * job claimed since: at 47,500 jobs/s, seven minutes in, a renewal
	 * read 151,588 blocks and took 2 s, holding up its worker's claims
	 * and ends behind it (tests/bench/churn.sh --snapshot). */
	"   and coalesce(j.state, '') = 'running'"
	/* In a queue with a concurrency limit, a lease that expired gave
	 * its slot back: it cannot be taken back (docs/queues.md). */
	"   and (j.locked_until >= clock_timestamp() or not exists ("
	"    select 1 from pgjob.limits l where l.queue = j.queue"
	"     and (l.global_concurrency is not null"
	"      or l.per_key_concurrency is not null)))"
	"  returning j.id)"
	" select r.id, r.id in (select id from u), coalesce(c.cancelled, false),"
	"  r.token"
	" from unnest($1::bigint[], $2::bigint[]) as r(id, token)"
	"  left join lateral (select j.state = 'cancelled'"
	"   and j.lease_token = r.token as cancelled from pgjob.jobs j"
	"   where j.id = r.id offset 0) c on true";
/* clang-format on */

static void
read_renew(const struct db_call *c, const struct db_status *st,
	   const PGresult *res)
{
	int rows = st->error == DB_OK ? PQntuples(res) : 0;
	struct queue_renewal *r = xcalloc((size_t)rows + 1, sizeof(*r));
	for (int k = 0; k < rows; k++)
		r[k] = (struct queue_renewal){
			.id = strtoll(PQgetvalue(res, k, 0), NULL, 10),
			.renewed = *PQgetvalue(res, k, 1) == 't',
			.cancelled = *PQgetvalue(res, k, 2) == 't',
			.token = strtoll(PQgetvalue(res, k, 3), NULL, 10),
		};
	((queue_renew_fn *)c->cb)(c->arg, st, r, (size_t)rows);
	free(r);
}

int
queue_renew(struct dbev *d, const int64_t *ids, const int64_t *tokens, size_t n,
	    int64_t lease_ms, const char *locked_by, queue_renew_fn *cb,
	    void *arg)
{
	/* In id order, each token beside its id (renew_sql); cmp_id
	 * compares the first of a pair. */
	int64_t(*pairs)[2] = xcalloc(n + 1, sizeof(*pairs));
	for (size_t i = 0; i < n; i++) {
		pairs[i][0] = ids[i];
		pairs[i][1] = tokens[i];
	}
	qsort(pairs, n, sizeof(*pairs), cmp_id);
	int64_t *sid = xcalloc(n + 1, sizeof(int64_t));
	int64_t *stok = xcalloc(n + 1, sizeof(int64_t));
	for (size_t i = 0; i < n; i++) {
		sid[i] = pairs[i][0];
		stok[i] = pairs[i][1];
	}
	char *a = db_int_array(sid, n);
	char *b = db_int_array(stok, n);
	free(pairs);
	free(sid);
	free(stok);
	char lease[24];
	snprintf(lease, sizeof(lease), "%lld", (long long)lease_ms);
	const char *p[] = {a, b, lease, locked_by};
	struct db_call call = DB_CALL(cb, arg);
	dbev_failpoints(d, FP_RENEW_SEND, FP_RENEW_RESULT);
	int rc = dbev_call(d, "pgjob_renew", 1, 4, p, read_renew, &call);
	free(a);
	free(b);
	return rc;
}

/* The claim, with the serial and per_key branches if asked for. */
static char *
claim_text(int serial, int per_key)
{
	return xasprintf("%s%s%s%s", claim_sql, serial ? claim_serial_sql : "",
			 per_key ? claim_per_key_sql : "", claim_tail_sql);
}

char *
queue_statement(const char *name, int *nparams)
{
	if (strcmp(name, "pgjob_claim") == 0) {
		*nparams = CLAIM_NPARAMS;
		return claim_text(1, 1);
	}
	*nparams = FINISH_NPARAMS;
	if (strcmp(name, "pgjob_finish") == 0)
		return xasprintf("%s%s%s%s", finish_fd_sql, finish_move_sql,
				 finish_tail_sql, finish_end_sql);
	if (strcmp(name, "pgjob_finish_delete") == 0)
		return xasprintf("%s%s%s%s", finish_fd_sql, finish_delete_sql,
				 finish_tail_sql, finish_delete_end_sql);
	*nparams = FINISH_RANGE_NPARAMS;
	if (strcmp(name, "pgjob_finish_range") == 0)
		return xasprintf("%s%s%s%s", finish_fd_range_sql,
				 finish_move_sql, finish_tail_sql,
				 finish_end_sql);
	if (strcmp(name, "pgjob_finish_delete_range") == 0)
		return xasprintf("%s%s%s%s", finish_fd_range_sql,
				 finish_delete_sql, finish_tail_sql,
				 finish_delete_end_sql);
	*nparams = 4;
	if (strcmp(name, "pgjob_renew") == 0)
		return xstrdup(renew_sql);
	*nparams = 0;
	return NULL;
}

void
queue_prepare(struct dbev *d, int serial, int per_key)
{
	/* A branch no queue of the worker's uses still costs every claim
	 * its executor's start and end: only the ones used go in. */
	char *claim = claim_text(serial, per_key);
	/* Parsed and planned once per connection, not once per batch. */
	static const char *const finishes[] = {
		"pgjob_finish", "pgjob_finish_delete", "pgjob_finish_range",
		"pgjob_finish_delete_range"};
	for (size_t i = 0; i < sizeof(finishes) / sizeof(finishes[0]); i++) {
		int n;
		char *sql = queue_statement(finishes[i], &n);
		dbev_prepare(d, finishes[i], sql, n);
		free(sql);
	}
	dbev_prepare(d, "pgjob_claim", claim, CLAIM_NPARAMS);
	dbev_prepare(d, "pgjob_renew", renew_sql, 4);
	dbev_prepare(d, "pgjob_claim_limited",
		     /* Column 13, as pgjob_claim's: a claimed job's time
		      * in the queue, which the function gives in c_ra of
		      * its 'c' rows (sql/018_claim_limited_wait.sql). */
		     "select c.*, case when c.c_t = 'c' then c.c_ra end"
		     " from pgjob.claim_limited($1, $2::int,"
		     " $3::text[], $4, $5, $6::bigint, $7::bigint) c",
		     7);
	free(claim);
}

struct sql_ctx {
	queue_sql_fn *cb;
	void *arg;
};

static int
failed(const PGresult *r)
{
	ExecStatusType st = PQresultStatus(r);
	return st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK;
}

/* How the sql handler's group ended; *error (caller frees) for FAILED and
 * CONN_LOST. */
static enum queue_sql_end
sql_end(PGresult **res, int n, char **error)
{
	*error = NULL;
	for (int i = 0; i < n; i++) {
		if (!res[i]) {
			*error = xstrdup("the connection broke while the "
					 "statement ran");
			return QUEUE_SQL_CONN_LOST;
		}
		if (!failed(res[i]))
			continue;
		const char *state =
			PQresultErrorField(res[i], PG_DIAG_SQLSTATE);
		if (i == 1 && state && strcmp(state, "PJ001") == 0)
			return QUEUE_SQL_LEASE;
		*error = db_error_text(NULL, res[i]);
		/* query_canceled: only statement_timeout cancels the
		 * handler's statement on the worker's own connection. */
		if (i == 2 && state && strcmp(state, "57014") == 0)
			return QUEUE_SQL_TIMED_OUT;
		return QUEUE_SQL_FAILED;
	}
	return QUEUE_SQL_DONE;
}

static void
on_sql(void *arg, PGresult **res, int n)
{
	struct sql_ctx *c = arg;
	char *error;
	enum queue_sql_end end = sql_end(res, n, &error);
	c->cb(c->arg, end, error);
	free(error);
	free(c);
}

int
queue_run_sql(struct dbev *d, const struct job *job, const char *statement,
	      int64_t timeout_ms, queue_sql_fn *cb, void *arg)
{
	static const Oid types[] = {3802 /* jsonb */, 20 /* int8 */};
	char id[24], token[24], timeout[24];
	snprintf(id, sizeof(id), "%lld", (long long)job->id);
	snprintf(token, sizeof(token), "%lld", (long long)job->lease_token);
	snprintf(timeout, sizeof(timeout), "%lld", (long long)timeout_ms);
	const char *p_timeout[] = {timeout};
	const char *p_lease[] = {id, token};
	const char *p_stmt[] = {job->payload, id};
	/* Set locally: it ends with this transaction. */
	struct dbev_stmt st[] = {
		/* The worker's session turns JIT, custom plans, sequential
		 * and bitmap scans off for its own statements (session.c);
		 * the handler's gets the values it would have had. */
		{"select set_config('statement_timeout', $1, true),"
		 " set_config(name, reset_val, true) from pg_settings"
		 " where name in ('jit', 'plan_cache_mode', 'enable_seqscan',"
		 "  'enable_bitmapscan')",
		 1, NULL, p_timeout, NULL},
		{"select pgjob.lock_lease($1, $2)", 2, NULL, p_lease, NULL},
		{statement, 2, types, p_stmt, NULL},
		/* Its wall time is its transaction's so far (now() is when
		 * it began); CPU and memory are the server's, not its own. */
		{"update pgjob.jobs set state = 'done', finished_at = now(),"
		 " locked_until = null,"
		 " last_wall_ms = least(round(extract(epoch from"
		 "  clock_timestamp() - now()) * 1000), 2147483647)::int,"
		 " last_cpu_ms = null, last_max_rss_kb = null"
		 " where id = $1 and lease_token = $2"
		 " and coalesce(state, '') = 'running'",
		 2, NULL, p_lease, NULL},
	};
	struct sql_ctx *ctx = xcalloc(1, sizeof(*ctx));
	*ctx = (struct sql_ctx){cb, arg};
	dbev_failpoints(d, FP_SQL_HANDLER_SEND, FP_SQL_HANDLER_RESULT);
	return dbev_send_group(d, st, 4, on_sql, ctx);
}

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
		time_limit(d, timeout_ms);
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
		time_limit_end(d);
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
