/*
 * Integration: the ends of parents, workflow steps and batch jobs are
 * counted once per statement, set by set (docs/workflows.md, "Exactly
 * once"; sql/schema/functions/ends_count.sql).  SQL only, no daemon: each
 * case ends many jobs in one statement, as a worker's finish of a batch
 * does, and reads what the transaction wrote from
 * pg_stat_xact_user_tables: a row that many of the ends share (a fan-in's
 * child, the workflow's, the batch's) is written once, not once per end.
 */
#include "testlib.h"

#include <stdlib.h>

#include "db/queue.h"

/* Row versions this session wrote in table t (pgjob.t) that it has not yet
 * reported: read twice in one transaction, nothing is reported between
 * the two reads, so their difference is what the statements between them
 * wrote. */
static long long
updates(PGconn *c, const char *t)
{
	return t_long(c,
		      "select n_tup_upd from pg_stat_xact_user_tables"
		      " where relid = 'pgjob.%s'::regclass",
		      t);
}

/* The JSON of a workflow of n parents p1..pn and one child c after all. */
static void
fan_in(PGconn *c, int n)
{
	t_exec(c,
	       "select pgjob.enqueue_workflow(jsonb_build_object('steps',"
	       " (select jsonb_agg(jsonb_build_object('name', 'p' || i,"
	       "   'kind', 'k')) from generate_series(1, %d) i)"
	       " || jsonb_build_array(jsonb_build_object('name', 'c',"
	       "   'kind', 'k', 'after', (select jsonb_agg('p' || i)"
	       "    from generate_series(1, %d) i)))))",
	       n, n);
}

/* Fails on the code that counted one end at a time: 50 versions of the
 * child's row and 50 of the workflow's. */
static void
test_fan_in_one_statement(void **state)
{
	(void)state;
	char *ci = t_db_migrated("t_wf_ends_fan_in");
	PGconn *c = t_connect(ci);
	fan_in(c, 50);
	t_exec(c, "begin");
	long long j0 = updates(c, "jobs"), w0 = updates(c, "workflows");
	t_exec(c, "update pgjob.jobs set state = 'done', finished_at = now(),"
		  " result = to_jsonb(step) where step like 'p%%'");
	/* The 50 parents, and the child once, released. */
	assert_int_equal(updates(c, "jobs") - j0, 51);
	assert_int_equal(updates(c, "workflows") - w0, 1);
	t_exec(c, "commit");
	t_assert_value(c, "available|0|50",
		       "select state || '|' || parents_left || '|' ||"
		       " (select count(*) from jsonb_object_keys(payload"
		       "  -> 'pgjob' -> 'parents')) from pgjob.jobs"
		       " where step = 'c'");
	t_assert_value(c, "p17",
		       "select payload -> 'pgjob' -> 'parents' ->> 'p17'"
		       " from pgjob.jobs where step = 'c'");
	t_assert_value(c, "51|50|0",
		       "select steps || '|' || ended || '|' || failed"
		       " from pgjob.workflows");
	PQfinish(c);
	free(ci);
}

/* More ends in one statement than the row trigger notes before it counts
 * them (some 2,000 ids): counted in parts, the child released once. */
static void
test_fan_in_counted_in_parts(void **state)
{
	(void)state;
	char *ci = t_db_migrated("t_wf_ends_parts");
	PGconn *c = t_connect(ci);
	fan_in(c, 5000);
	t_exec(c, "begin");
	long long j0 = updates(c, "jobs"), w0 = updates(c, "workflows");
	t_exec(c, "update pgjob.jobs set state = 'done', finished_at = now()"
		  " where step like 'p%%'");
	/* The parents, and the child's row and the workflow's written once
	 * per part (two or three), where one end at a time wrote each of
	 * them 5,000 times. */
	assert_in_range(updates(c, "jobs") - j0, 5002, 5003);
	assert_in_range(updates(c, "workflows") - w0, 2, 3);
	t_exec(c, "commit");
	t_assert_value(c, "available|5000",
		       "select state || '|' || (select count(*) from"
		       " jsonb_object_keys(payload -> 'pgjob' -> 'parents'))"
		       " from pgjob.jobs where step = 'c'");
	t_assert_value(c, "5000|0",
		       "select ended || '|' || failed from pgjob.workflows");
	t_assert_value(c, "0",
		       "select count(*) from pgjob.job_deps"
		       " where resolved is null");
	PQfinish(c);
	free(ci);
}

/* Every on_parent_failure in one statement that ends a done parent and a
 * dead one together; the cancelled child's own child is cancelled in
 * turn. */
static void
test_policies_one_statement(void **state)
{
	(void)state;
	char *ci = t_db_migrated("t_wf_ends_policies");
	PGconn *c = t_connect(ci);
	t_exec(c, "select pgjob.enqueue_workflow('{\"steps\": ["
		  "{\"name\": \"ok\", \"kind\": \"k\"},"
		  "{\"name\": \"bad\", \"kind\": \"k\"},"
		  "{\"name\": \"run\", \"kind\": \"k\", \"after\": [\"ok\","
		  " \"bad\"], \"on_parent_failure\": \"run\"},"
		  "{\"name\": \"cancel\", \"kind\": \"k\", \"after\": [\"ok\","
		  " \"bad\"]},"
		  "{\"name\": \"grand\", \"kind\": \"k\", \"after\":"
		  " [\"cancel\"]},"
		  "{\"name\": \"wait\", \"kind\": \"k\", \"after\": [\"ok\","
		  " \"bad\"], \"on_parent_failure\": \"wait\"}]}')");
	t_exec(c, "update pgjob.jobs set finished_at = now(),"
		  " state = case step when 'ok' then 'done' else 'dead' end,"
		  " last_error = case step when 'bad' then 'boom' end,"
		  " result = case step when 'ok' then '7' end::jsonb"
		  " where step in ('ok', 'bad')");
	t_assert_value(c, "available|7|dead",
		       "select state || '|' || (payload -> 'pgjob' -> 'parents'"
		       " ->> 'ok') || '|' || (payload -> 'pgjob' -> 'failed'"
		       " -> 'bad' ->> 'state') from pgjob.jobs"
		       " where step = 'run'");
	t_assert_value(c, "cancelled|parent bad ended dead",
		       "select state || '|' || last_error from pgjob.jobs"
		       " where step = 'cancel'");
	t_assert_value(c, "cancelled|parent cancel ended cancelled",
		       "select state || '|' || last_error from pgjob.jobs"
		       " where step = 'grand'");
	t_assert_value(c, "waiting|1",
		       "select state || '|' || parents_left from pgjob.jobs"
		       " where step = 'wait'");
	t_assert_value(c, "4|3",
		       "select ended || '|' || failed from pgjob.workflows");
	PQfinish(c);
	free(ci);
}

/* A batch's 20 jobs end in one statement: its row counts them once, the
 * callback goes out once. */
static void
test_batch_one_statement(void **state)
{
	(void)state;
	char *ci = t_db_migrated("t_wf_ends_batch");
	PGconn *c = t_connect(ci);
	long long b = t_long(c, "select pgjob.batch_open('report')");
	t_exec(c,
	       "select pgjob.enqueue('k', batch_id => %lld)"
	       "  from generate_series(1, 20)",
	       b);
	t_exec(c, "select pgjob.batch_seal(%lld)", b);
	t_exec(c, "begin");
	long long b0 = updates(c, "batches");
	t_exec(c, "update pgjob.jobs set finished_at = now(), state ="
		  " case when id %% 4 = 0 then 'dead' else 'done' end"
		  " where kind = 'k'");
	/* The count, then finished_at and the callback. */
	assert_int_equal(updates(c, "batches") - b0, 2);
	t_exec(c, "commit");
	t_assert_value(c, "15|5|0|1",
		       "select done || '|' || dead || '|' || cancelled || '|'"
		       " || (select count(*) from pgjob.jobs"
		       "  where kind = 'report')"
		       " from pgjob.batches where id = %lld",
		       b);
	PQfinish(c);
	free(ci);
}

/*
 * A step cancelled (pgjob workflow cancel, pgjob cancel, the console) while
 * its parent ends: the cancel holds the step's row, and counts its end for
 * the workflow; the parent's end releases the step and counts its own.
 * Until version 49 a parent's end took the workflow's row before its
 * children's (pgjob.ends_count()), the cancel the other way round, and one
 * of the two failed with a deadlock (int.test_roles saw `pgjob workflow
 * cancel` fail under a loaded ctest).  Here the cancel holds the step
 * first, the parent's end waits for it, and the cancel's end then takes
 * the workflow's row: both succeed, the step stays cancelled, and the
 * workflow counts both ends.
 */
static void
test_cancel_beside_parents_end(void **state)
{
	(void)state;
	char *ci = t_db_migrated("t_wf_ends_cancel_race");
	PGconn *c = t_connect(ci), *cancel = t_connect(ci),
	       *end = t_connect(ci), *watch = t_connect(ci);
	long long wf = t_long(c, "select pgjob.enqueue_workflow('{\"steps\": ["
				 "{\"name\": \"a\", \"kind\": \"k\"},"
				 "{\"name\": \"b\", \"kind\": \"k\","
				 " \"after\": [\"a\"]}]}')");
	long long a = t_long(c,
			     "select id from pgjob.jobs where workflow_id ="
			     " %lld and step = 'a'",
			     wf);
	long long b = t_long(c,
			     "select id from pgjob.jobs where workflow_id ="
			     " %lld and step = 'b'",
			     wf);
	t_exec(c,
	       "update pgjob.jobs set state = 'running', lease_token = 1,"
	       " attempts = 1, locked_by = 'w', attempted_at = now(),"
	       " locked_until = now() + interval '1 minute' where id = %lld",
	       a);
	t_exec(cancel, "begin");
	t_exec(cancel, "select 1 from pgjob.jobs where id = %lld for update",
	       b);
	char q[192];
	snprintf(q, sizeof(q),
		 "update pgjob.jobs set state = 'done', finished_at = now(),"
		 " locked_until = null where id = %lld",
		 a);
	assert_int_equal(PQsendQuery(end, q), 1);
	/* The parent's end waits for the step's row. */
	t_wait_lock_wait(watch, PQbackendPID(end), 30);
	t_exec(cancel,
	       "update pgjob.jobs set state = 'cancelled', finished_at ="
	       " now(), last_error = 'workflow cancelled' where id = %lld",
	       b);
	t_exec(cancel, "commit");
	PGresult *res = PQgetResult(end);
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		fail_msg("the parent's end failed: %s",
			 PQresultErrorMessage(res));
	PQclear(res);
	assert_null(PQgetResult(end));
	t_assert_value(c, "done cancelled",
		       "select string_agg(state, ' ' order by id)"
		       " from pgjob.jobs where workflow_id = %lld",
		       wf);
	t_assert_value(c, "2 1",
		       "select ended || ' ' || failed from pgjob.workflows"
		       " where id = %lld",
		       wf);
	PQfinish(watch);
	PQfinish(end);
	PQfinish(cancel);
	PQfinish(c);
	free(ci);
}

/*
 * A workflow's parent that dies in the same worker's finish as another
 * job's retry in place (the statement pgjob_finish_again, src/db/finish.c):
 * its end is counted in that statement, its children cancelled or
 * released by their policies.  The retry's update (fr) once named no
 * finished_at, and PostgreSQL, which queues one AFTER STATEMENT event per
 * table and command, dropped the ends' statement trigger with it: the
 * parent's death was noted and never counted (fault.chaos: a cancel child
 * ran once the parent was retried and done).
 */
static void
test_ends_beside_a_retry_in_place(void **state)
{
	(void)state;
	char *ci = t_db_migrated("t_wf_ends_again");
	PGconn *c = t_connect(ci);
	long long wf = t_long(
		c, "select pgjob.enqueue_workflow('{\"steps\": ["
		   "{\"name\": \"p\", \"kind\": \"k\"},"
		   "{\"name\": \"cc\", \"kind\": \"k\", \"after\": [\"p\"]},"
		   "{\"name\": \"rr\", \"kind\": \"k\", \"after\": [\"p\"],"
		   " \"on_parent_failure\": \"run\"}]}')");
	long long p = t_long(c,
			     "select id from pgjob.jobs where workflow_id ="
			     " %lld and step = 'p'",
			     wf);
	long long x = t_long(c, "select pgjob.enqueue('k')");
	t_exec(c,
	       "update pgjob.jobs set state = 'running', lease_token = 1,"
	       " attempts = 1, locked_by = 'w', attempted_at = now(),"
	       " locked_until = now() + interval '1 minute'"
	       " where id in (%lld, %lld)",
	       p, x);
	int n;
	char *text = queue_statement("pgjob_finish_again", &n);
	assert_non_null(text);
	PGresult *r = PQprepare(c, "fin", text, n, NULL);
	assert_int_equal(PQresultStatus(r), PGRES_COMMAND_OK);
	PQclear(r);
	free(text);
	/* In id order: p dead (3) with its error, x retried in place (6)
	 * with its own, for a lease of 60 s. */
	t_exec(c,
	       "execute fin('{%lld,%lld}', '{1,1}', '{3,6}', '[]',"
	       " '[\"p boom\", \"x boom\"]', '{0,60000}', '{f,f}', false,"
	       " '{1,1}', '{1,1}', '{1,1}', '{-1,-1}', 604800000, '{f,f}',"
	       " '{0,0}', '{1,2}')",
	       p, x);
	t_assert_value(c, "cc cancelled|p dead|rr available",
		       "select string_agg(step || ' ' || state, '|'"
		       " order by step) from pgjob.jobs where workflow_id ="
		       " %lld",
		       wf);
	t_assert_value(
		c, "dead p boom",
		"select payload -> 'pgjob' -> 'failed' -> 'p' ->> 'state'"
		" || ' ' || (payload -> 'pgjob' -> 'failed' -> 'p' ->>"
		" 'error') from pgjob.jobs where workflow_id = %lld"
		" and step = 'rr'",
		wf);
	/* x runs its second attempt; its failure is in its history. */
	t_assert_value(c, "running 2 2 -",
		       "select state || ' ' || attempts || ' ' || lease_token"
		       " || ' ' || coalesce(last_error, '-')"
		       " from pgjob.jobs where id = %lld",
		       x);
	t_assert_value(c, "1 failed x boom",
		       "select attempt || ' ' || outcome || ' ' || error"
		       " from pgjob.attempts where job_id = %lld",
		       x);
	PQfinish(c);
	free(ci);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fan_in_one_statement),
		cmocka_unit_test(test_ends_beside_a_retry_in_place),
		cmocka_unit_test(test_fan_in_counted_in_parts),
		cmocka_unit_test(test_policies_one_statement),
		cmocka_unit_test(test_batch_one_statement),
		cmocka_unit_test(test_cancel_beside_parents_end),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
