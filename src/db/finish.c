/*
 * finish: the statement that writes the ends of a batch of attempts, in
 * four prepared forms (a job done deleted or kept, its rows found one by
 * one or by a range of ids).  Every row is written only where its lease
 * still holds: id, lease_token and state 'running' (compare-and-set), so
 * a worker that lost a lease cannot overwrite the end of an attempt that
 * another worker now runs.  A file of its own: the statement is long, and
 * each of its parts is shaped by a plan it must not get (the comments say
 * which).
 */
#include "db/finish.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/failpoint.h"
#include "common/text.h"
#include "common/util.h"
#include "db/db.h"
#include "db/internal.h"

/*
 * The end of a batch: each row is written only where id, token and state
 * 'running' still match (compare-and-set on the lease).  A job that ends
 * done is deleted there and then (fd): no new row version, no index
 * entries in pgjob.jobs, nothing for the pruning duty to delete later.
 * With $8 (retention 0) that is all; but for a job with children
 * (sql/upgrade/011_workflows.sql), which is written done so that its row
 * trigger releases them, and pruned later.  With a retention, a plain job (no
 * workflow, batch, parent or child: MOVED) gets a copy of its row in
 * pgjob.jobs_done (fm), in the ring of its end's period for the retention
 * $13 (sql/upgrade/019_jobs_done.sql); every other end is written in place
 * (f; a retry in place by fr, below, AGAIN_CODE).  Since schema version 40 a
 * job done at a later attempt is moved too: its attempt rows stay in
 * pgjob.attempts, and pgjob.prune_done() deletes them with its ring
 * (jobs_done_tried_idx).  fd's and f's conditions are each other's complement
 * for a done row: write them together. $9, $10, $11: each attempt's figures
 * (sql/upgrade/012_attempt_usage.sql; the rows deleted at retention 0 keep
 * none).  $12: a failure's exit or HTTP status, NULL for the rest (last_status,
 * sql/upgrade/013_attempts.sql). locked_by is left as it is: it names the
 * worker of the job's last attempt.  An attempt that did not end done gets its
 * row of pgjob.attempts: from this statement (fh) when it leaves the job
 * available or dead or retries it in place (AGAIN_CODE), from the trigger of
 * sql/upgrade/013_attempts.sql otherwise; a job deleted at retention 0 takes
 * its rows with it (fa), in the statement of a worker with retention 0 only
 * (pgjob_finish_delete): elsewhere it would call a function at every finish to
 * delete nothing.
 *
 * Rows: 'f' and the id of each job whose end was written ('s': written dead,
 * a snooze past the cap), and one 'h' when attempt rows were written (fh).
 *
 * The worker pipelines the next claim right behind it, in the same round
 * trip but its own transaction: see the worker's turn (worker/ends.c) for
 * why the two are not one statement.
 */
/*
 * No join with the batch: each statement finds its rows by
 * j.id = any(...) over the ids in $1, an index condition on jobs_pkey
 * (fd only those of the ends that are done, f only those fd did not
 * delete: every CTE sees the statement's snapshot, where fd's rows are
 * still there, and f would look each one up again only to leave it), and
 * reads the values of row j out of the arrays at DB_AT_ID(): queue_finish()
 * sends them sorted by id.  A join of jobs with unnest($1, ...) has two
 * plans, and which one the planner takes depends on what the last ANALYZE
 * found: under a feed it can find few live rows, and then the finish reads
 * jobs_pkey whole, with no index condition, for every batch
 * (docs/performance.md, "Plans that depend on what an ANALYZE found").
 */
/*
 * An element of an array with NULLs costs a walk to it too (the null
 * bitmap is counted up to it), and so does a text element: read at the
 * position of every row of a batch, a walk of half the batch per row and
 * array, which showed in the server's profile of a drain of no-op jobs.
 * So the attempt figures travel without NULLs, -1 standing for one
 * (figure_array(); FIGURE_AT).  The results travel as one jsonb array
 * of those there are ($4; the worker checked each one's text,
 * pgtext_is_jsonb()), whose element k jsonb finds without a walk, and $15
 * is each end's place in it (0: none).  The errors, on failures only,
 * travel compact too, as one jsonb array of strings of those there are
 * ($5, error_array()), and $16 is each end's place in it (0: none): as a
 * text[] each was a walk of half the batch's errors, a batch of failures
 * (every job failing once: 1.5 us of an end's 12 on the server).
 */
#define FIGURE_AT(param, i) "nullif((" param "::int[])[" i "], -1)"
#define RESULT_AT(i)                                                           \
	"(case when ($15::int[])[" i "] > 0 then ($4::jsonb) ->"               \
	" (($15::int[])[" i "] - 1) end)"
#define ERROR_AT(i)                                                            \
	"(case when ($16::int[])[" i "] > 0 then ($5::jsonb) ->>"              \
	" (($16::int[])[" i "] - 1) end)"
/*
 * An end's state travels as its code, enum job_state (common/job.h): 0
 * available, 1 running, 2 done, 3 dead, 4 cancelled.  As names (text[]),
 * f read it three times per row, each a walk of half the batch: on the
 * ends that stay in pgjob.jobs, the retries and failures.  Its name comes
 * from a constant array of five.
 */
#define STATE_AT DB_AT_ID("$3", "smallint[]")
#define STATE_NAMES                                                            \
	"'{available,running,done,dead,cancelled,available}'::text[]"
#define STATE_NAME "(" STATE_NAMES ")[" STATE_AT " + 1]"
/*
 * A snooze (struct queue_finish's snooze) travels as state 5, one past
 * enum job_state, and is written available, or dead past the cap: its
 * count is on the row (snoozes, sql/upgrade/031_snoozes.sql), which the worker
 * does not read.
 */
#define SNOOZE_CODE "5"
/*
 * A failure retried at once in place (struct queue_finish's again) travels
 * as state 6 and is written running by fr, not f: its next attempt counted
 * (attempts, attempted_at), a new lease token (token + 1, as a claim's)
 * and its lease ($6 carries the lease's length for it, not a delay), in
 * one HOT update of columns no index holds; run_at stays, so the row keeps
 * its place in the claim's index.  No lost attempt is counted
 * (lost_attempts stays), by which the row trigger jobs_attempt_ended tells
 * it from a claim's takeover of an expired lease and leaves its attempt row
 * to fh (sql/schema/triggers/jobs.sql, version 43).  The failure's error
 * and figures go to that attempt row only, not to the job's row: the new
 * row version is then the claim's size, and fits on the page beside it
 * (a HOT update); written to the row as well, it did not for one in five
 * (the page's room is the claim's: fillfactor,
 * sql/upgrade/027_hot_claim.sql), and each of those wrote an entry in
 * every index of pgjob.jobs.  The worker carries that error to the job's
 * next end that has none of its own (worker/held.c, carried_error), so the
 * row ends as before.  Only the statements for a batch with such an end
 * have fr (the _again forms): in the others it would be an update of no
 * row, and such an update of pgjob.jobs costs a finish of one job 70-100
 * us of its 240 (f's, measured on a scratch server, 2026-12-07).
 */
#define AGAIN_CODE "6"
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
	"(j.children is not true and ($8 or (j.parents_left is null"          \
	" and j.workflow_id is null and j.batch_id is null)))"

static const char finish_fd_sql[] =
	"with fd as ("
	"  delete from pgjob.jobs j"
	/* Only the ids of the ends that are done ($14) are looked up. */
	"  where j.id = any(array(select u.i from unnest($1::bigint[],"
	"    $14::bool[]) u(i, d) where u.d))"
	"   and j.lease_token = " DB_AT_ID("$2", "bigint[]")
	"   and coalesce(j.state, '') = 'running'"
	"   and " MOVED;

/*
 * The same delete for a batch whose done ids are dense (queue_finish()
 * decides: FINISH_DENSE): one read of jobs_pkey from the lowest ($17) to
 * the highest ($18), each entry tested for membership at its position,
 * rather than a descent of the index per id: the cheaper read of a batch
 * of claimed rows (docs/performance.md, "The finish of a dense batch").  A
 * batch of ids far apart (a retry, a job that ran long, many workers in
 * one lane) would read every entry between them: that one takes the
 * statement above.
 */
static const char finish_fd_range_sql[] =
	"with fd as ("
	"  delete from pgjob.jobs j"
	"  where j.id >= $17::bigint and j.id <= $18::bigint"
	"   and ($1::bigint[])[" DB_ID_POS "] = j.id"
	"   and " DB_AT_ID("$14", "bool[]")
	"   and j.lease_token = " DB_AT_ID("$2", "bigint[]")
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
 * can have any (sql/upgrade/013_attempts.sql); the function is not called for a
 * batch without one (the call of a security definer is not free, and a
 * batch of no-op jobs pays it for nothing).  fa has one row: the join
 * below makes it run, after fd. */
static const char finish_delete_sql[] =
	/* Only what fa and the rows below read: the whole row, payload and
	 * all, would be kept in fd's tuplestore for nothing. */
	"  returning j.id, j.lease_token),"
	/* $13, the retention (0 here), is named so that its type is known:
	 * a parameter no part of a statement reads has none, and the
	 * statement would not prepare. */
	" fa as (select $13::bigint as retention,"
	"  case when exists (select 1 from fd"
	"   where lease_token > 1) then pgjob.forget_attempts(array("
	"   select id from fd where lease_token > 1)) end as n),";

/* clang-format off */
/* f: every end that stays in pgjob.jobs but a retry in place (fr). */
#define FINISH_F_SET                                                           \
	" f as ("                                                              \
	"  update pgjob.jobs j set state = case when " SNOOZE_CAPPED           \
	"    then 'dead' else " STATE_NAME " end,"                             \
	"   result = " RESULT_AT(DB_ID_POS) ","                                \
	"   last_error = case when " SNOOZE_CAPPED " then 'snoozed "          \
	QUEUE_MAX_SNOOZES_S " times, the most a job may'"                      \
	"    else coalesce(" ERROR_AT(DB_ID_POS) ", j.last_error) end,"       \
	/* What the attempt used (sql/upgrade/012_attempt_usage.sql). */       \
	"   last_wall_ms = " FIGURE_AT("$9", DB_ID_POS) ","                    \
	"   last_cpu_ms = " FIGURE_AT("$10", DB_ID_POS) ","                    \
	"   last_max_rss_kb = " FIGURE_AT("$11", DB_ID_POS) ","                \
	"   last_status = " FIGURE_AT("$12", DB_ID_POS) ","                    \
	/* Not available: the attempt ended the job (done, failed, dead,     \
	 * cancelled); available: a retry, after its delay. */                 \
	"   finished_at = case when " STATE_AT " <> 0"                         \
	"    and (" STATE_AT " <> " SNOOZE_CODE " or " SNOOZE_CAPPED ")"       \
	"    then now() end,"                                                  \
	"   run_at = case when " STATE_AT " in (0, " SNOOZE_CODE ")"           \
	"    then now() + " DB_AT_ID("$6", "bigint[]")                         \
	"     * interval '1 millisecond' else j.run_at end,"                   \
	"   snoozes = j.snoozes + case when " STATE_AT " = " SNOOZE_CODE       \
	"    then 1 else 0 end,"                                               \
	"   attempts = j.attempts"                                             \
	"    + case when " DB_AT_ID("$7", "bool[]")                            \
	"     and not " SNOOZE_CAPPED " then -1 else 0 end,"                   \
	"   locked_until = null"

/* f's rows: not the ids fd deleted, each of which would be looked up
 * again in jobs_pkey and its heap row read, to be left (every CTE sees the
 * statement's snapshot, where fd's rows are still there).  Nothing left
 * when fd took every end, as it does for a batch of plain jobs done: a
 * one-time test, so that neither the except nor the scan runs. */
#define FINISH_F_IDS                                                           \
	"  where j.id = any(array(select u.i from unnest($1::bigint[]) u(i)"   \
	"    except all select fd.id from fd))"                                \
	"   and (select count(*) from fd) < cardinality($1::bigint[])"
/* The same without the retries in place, fr's. */
#define FINISH_F_IDS_AGAIN                                                     \
	"  where j.id = any(array(select u.i from unnest($1::bigint[],"        \
	"    $3::smallint[]) u(i, s) where u.s <> " AGAIN_CODE                 \
	"    except all select fd.id from fd))"                                \
	"   and (select count(*) from fd) < (select count(*)"                  \
	"    from unnest($3::smallint[]) s where s <> " AGAIN_CODE ")"

#define FINISH_F_REST                                                          \
	"   and not (" DB_AT_ID("$14", "bool[]") " and " MOVED ")"             \
	"   and j.lease_token = " DB_AT_ID("$2", "bigint[]")                   \
	/* The state test is not written j.state = 'running': the planner    \
	 * would then prefer to read every running job from                  \
	 * jobs_running_idx (dead entries too). */                             \
	"   and coalesce(j.state, '') = 'running'"                             \
	/* A snooze past the cap: written dead (returned 's'). */              \
	"  returning j.id, " STATE_AT " = " SNOOZE_CODE                        \
	"   and j.state = 'dead' as capped,"                                   \
	/* The attempt row of an end that leaves the job available or dead   \
	 * (fh), as pgjob.attempt_ended() would have written it: RETURNING   \
	 * gives the row as written, so j.attempts is after the refund and   \
	 * j.snoozes after the snooze, and the outcome is read from the      \
	 * state and the codes.  Null for the other ends (done, cancelled:   \
	 * the trigger's, or none). */                                         \
	"   case when j.state in ('available', 'dead') then"                   \
	"    row(j.id, j.attempts + case when " DB_AT_ID("$7", "bool[]")       \
	"      and not (" STATE_AT " = " SNOOZE_CODE " and j.state = 'dead')"  \
	"      then 1 else 0 end,"                                             \
	"     j.lease_token, j.attempted_at, now(), j.locked_by,"              \
	"     case when j.state = 'dead' then 'dead'"                          \
	"      when " STATE_AT " = " SNOOZE_CODE " then 'snoozed'"             \
	"      when " DB_AT_ID("$7", "bool[]") " then 'interrupted'"           \
	"      else 'failed' end,"                                             \
	"     j.last_status, case when j.state = 'dead' or " STATE_AT          \
	"      <> " SNOOZE_CODE " then j.last_error end,"                      \
	"     j.last_wall_ms, j.last_cpu_ms, j.last_max_rss_kb"                \
	"    )::pgjob.attempts end as h),"

/*
 * fr: the retries in place (AGAIN_CODE): attempts, token, start and lease
 * only, and the failed attempt's row (fh) from the values before the
 * update (its number, token and start: the subquery reads under the
 * statement's snapshot, where this statement's own new row version is not
 * yet visible) and the end's error and figures; jobs_attempt_ended's
 * condition leaves the row to fh.  It names finished_at (null, as it is)
 * although it ends nothing: PostgreSQL queues one AFTER STATEMENT event per
 * table and command in a statement, and the last update of pgjob.jobs to
 * end cancels the ones before; an fr that did not name finished_at took
 * the statement trigger jobs_ended_flush away from f's ends, and a parent
 * that died beside a retry in place released none of its children
 * (fault.chaos; test_workflow_ends test_ends_beside_a_retry_in_place).
 * The ends' row triggers compare the states (running to running) and
 * note nothing.
 */
#define FINISH_FR                                                              \
	" fr as ("                                                             \
	"  update pgjob.jobs j set attempts = j.attempts + 1,"                 \
	"   lease_token = j.lease_token + 1, attempted_at = now(),"            \
	"   finished_at = null,"                                               \
	"   locked_until = statement_timestamp()"                              \
	"    + " DB_AT_ID("$6", "bigint[]") " * interval '1 millisecond'"      \
	"  where j.id = any(array(select u.i from unnest($1::bigint[],"        \
	"    $3::smallint[]) u(i, s) where u.s = " AGAIN_CODE "))"             \
	"   and j.lease_token = " DB_AT_ID("$2", "bigint[]")                   \
	"   and coalesce(j.state, '') = 'running'"                             \
	"  returning j.id, row(j.id, j.attempts - 1, j.lease_token - 1,"       \
	"   (select p.attempted_at from pgjob.jobs p where p.id = j.id),"      \
	"   now(), j.locked_by, 'failed', " FIGURE_AT("$12", DB_ID_POS) ","    \
	"   coalesce(" ERROR_AT(DB_ID_POS) ", j.last_error),"                  \
	"   " FIGURE_AT("$9", DB_ID_POS) ", " FIGURE_AT("$10", DB_ID_POS) ","  \
	"   " FIGURE_AT("$11", DB_ID_POS) ")::pgjob.attempts as h),"

/*
 * The attempt history of those ends, one insert for the batch: the row
 * trigger leaves them out (sql/schema/triggers/jobs.sql), so a failure
 * costs what its row costs, not a call of a plpgsql function per job.  No
 * call at all for a batch without one (HAVING), the usual batch of jobs
 * done.  In the same statement as the ends: both are written or neither
 * is, whenever the worker dies.  Its row ('h') is read by nobody, but it
 * makes the CTE run.  not (h is null): "h is not null" of a row is false
 * when any of its fields is null.
 */
#define FINISH_FH                                                              \
	" fh as (select pgjob.attempts_add(array_agg(f.h)) as n"               \
	"  from f where not (f.h is null) having count(*) > 0)"
#define FINISH_FH_AGAIN                                                        \
	" fh as (select pgjob.attempts_add(array_agg(x.h)) as n"               \
	"  from (select f.h from f where not (f.h is null)"                    \
	"   union all select fr.h from fr) x having count(*) > 0)"

static const char finish_tail_sql[] =
	FINISH_F_SET FINISH_F_IDS FINISH_F_REST FINISH_FH;
static const char finish_tail_again_sql[] =
	FINISH_F_SET FINISH_F_IDS_AGAIN FINISH_F_REST FINISH_FR
	FINISH_FH_AGAIN;
/* clang-format on */

static const char finish_end_sql[] =
	" select case when capped then 's' else 'f' end, id from f"
	" union all select 'f', id from fd"
	" union all select 'h', n from fh";
static const char finish_delete_end_sql[] =
	" select case when capped then 's' else 'f' end, id from f"
	" union all select 'f', fd.id from fd, fa"
	" union all select 'h', n from fh";
/* With fr (FINISH_FR). */
#define FINISH_END_FR " union all select 'f', id from fr"

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
	qsort(ids, n, sizeof(int64_t), db_cmp_int64);
	qsort(capped, nc, sizeof(int64_t), db_cmp_int64);
	((queue_finish_fn *)c->cb)(c->arg, st, ids, n, capped, nc);
	free(ids);
	free(capped);
}

/*
 * The int[] literal of an attempt figure (or status) of each end: -1 where
 * it was not measured (< 0), which the statement reads as NULL
 * (FIGURE_AT), 2^31-1 past that (sql/upgrade/012_attempt_usage.sql).
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

/* The jsonb array of the errors v[0..n) (ERROR_AT): each a JSON string
 * (text_escape_append(), which writes a byte that is not UTF-8 as U+FFFD:
 * in a text[], such a byte failed the whole batch's statement). */
static char *
error_array(const char *const *v, size_t n)
{
	struct buf b = {0};
	buf_append(&b, "[", 1);
	for (size_t i = 0; i < n; i++) {
		buf_append(&b, i ? ",\"" : "\"", i ? 2 : 1);
		text_escape_append(&b, v[i], true);
		buf_append(&b, "\"", 1);
	}
	buf_append(&b, "]", 1);
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
	int again = 0;
	char *refunds = xcalloc(n1, 1), *dones = xcalloc(n1, 1);
	/* wall, cpu, rss, status */
	int64_t *fig = xcalloc(4 * n1, sizeof(int64_t));
	for (size_t i = 0; i < nf; i++) {
		const struct queue_finish *f = sorted[i];
		ids[i] = f->id;
		tokens[i] = f->token;
		/* A retry in place: its lease's length (AGAIN_CODE). */
		delays[i] = f->again ? f->lease_ms : f->delay_ms;
		/* STATE_AT; a snooze is SNOOZE_CODE, a retry in place
		 * AGAIN_CODE. */
		states[i] = f->snooze ? 5 : f->again ? 6 : (int64_t)f->state;
		again |= f->again != 0;
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
	a[4] = error_array(errors, ne);
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
	/* A batch with a retry in place takes the forms with fr
	 * (FINISH_FR), and reads its done ids one by one. */
	static const char *const names[2][3] = {
		{"pgjob_finish", "pgjob_finish_range", "pgjob_finish_again"},
		{"pgjob_finish_delete", "pgjob_finish_delete_range",
		 "pgjob_finish_delete_again"}};
	int form = again ? 2 : range;
	struct db_call call = DB_CALL(cb, arg);
	dbev_failpoints(d, FP_FINISH_SEND, FP_FINISH_RESULT);
	int rc = dbev_call(d, names[delete_done][form], 1,
			   form == 1 ? FINISH_RANGE_NPARAMS : FINISH_NPARAMS, p,
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
	return bsearch(&id, sorted, n, sizeof(int64_t), db_cmp_int64) != NULL;
}

char *
queue_finish_sql(const char *name, int *nparams)
{
	static const char *const forms[] = {"", "_range", "_again"};
	for (int del = 0; del < 2; del++)
		for (int form = 0; form < 3; form++) {
			char n[64];
			snprintf(n, sizeof(n), "pgjob_finish%s%s",
				 del ? "_delete" : "", forms[form]);
			if (strcmp(name, n) != 0)
				continue;
			*nparams = form == 1 ? FINISH_RANGE_NPARAMS
					     : FINISH_NPARAMS;
			return xasprintf(
				"%s%s%s%s%s",
				form == 1 ? finish_fd_range_sql : finish_fd_sql,
				del ? finish_delete_sql : finish_move_sql,
				form == 2 ? finish_tail_again_sql
					  : finish_tail_sql,
				del ? finish_delete_end_sql : finish_end_sql,
				form == 2 ? FINISH_END_FR : "");
		}
	*nparams = 0;
	return NULL;
}
