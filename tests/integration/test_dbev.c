/*
 * Integration: dbev, the worker's pipelined connection, against the real
 * server: an answer's own time (dbev_answer_ms()) leaves out the time its
 * statement waited in the pipeline behind the one sent before it, which the
 * sweep's time limit and the queue depths' backoff are measured by; and a
 * statement whose implicit transaction fails to commit, after its rows came,
 * is answered with that error, not with rows that were rolled back.
 */
#include "testlib.h"

#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "db/db.h"
#include "db/dbev.h"
#include "db/internal.h"

/* A pipelined connection to the test server. */
static struct dbev *
open_dbev(struct ev_loop *loop)
{
	char *err = NULL;
	struct db_conn *conn = db_connect(t_server_conninfo(), "test", &err);
	assert_non_null(conn);
	struct dbev *d = dbev_new(loop, conn, NULL);
	assert_non_null(d);
	return d;
}

struct answer {
	struct dbev *d;
	int64_t sent_ms, round_trip_ms, own_ms;
	int ok, *left;
};

static void
on_answer(void *arg, PGresult *res)
{
	struct answer *a = arg;
	a->ok = res && PQresultStatus(res) == PGRES_TUPLES_OK;
	a->round_trip_ms = util_now_ms() - a->sent_ms;
	a->own_ms = dbev_answer_ms(a->d);
	if (--*a->left == 0)
		ev_break(EV_DEFAULT, EVBREAK_ALL);
}

static void
test_answer_time_leaves_out_the_wait(void **state)
{
	struct ev_loop *loop = EV_DEFAULT;
	struct dbev *d = open_dbev(loop);
	int left = 2;
	struct answer slow = {.d = d, .left = &left};
	struct answer fast = {.d = d, .left = &left};
	/* Both go out at once; the second waits for the first's 2 s. */
	slow.sent_ms = fast.sent_ms = util_now_ms();
	assert_int_equal(
		dbev_send(d, "select pg_sleep(2)", 0, NULL, on_answer, &slow),
		0);
	assert_int_equal(dbev_send(d, "select 1", 0, NULL, on_answer, &fast),
			 0);
	ev_run(loop, 0);
	assert_true(slow.ok && fast.ok);
	assert_true(slow.own_ms >= 2000);
	assert_true(fast.round_trip_ms >= 2000);
	/* Its own time is what came after the sleep's answer: a small part
	 * of its round trip, however slow the host. */
	assert_true(fast.own_ms <= fast.round_trip_ms - 2000 + 1);
	print_message("sleep: answer %lld ms; select 1: round trip %lld ms, "
		      "answer %lld ms\n",
		      (long long)slow.own_ms, (long long)fast.round_trip_ms,
		      (long long)fast.own_ms);
	dbev_free(d);
}

struct commit {
	ExecStatusType status;
	char sqlstate[6];
	int *left;
};

static void
on_commit(void *arg, PGresult *res)
{
	struct commit *c = arg;
	c->status = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
	const char *s = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	snprintf(c->sqlstate, sizeof(c->sqlstate), "%s", s ? s : "");
	if (--*c->left == 0)
		ev_break(EV_DEFAULT, EVBREAK_ALL);
}

/*
 * A statement's rows and its CommandComplete come before its implicit
 * transaction commits, at the Sync.  A commit that fails there (here a
 * deferred constraint trigger; in the fault suite's workers200, the
 * statement_timeout of a time-limited claim firing between the claim's
 * end and its Sync) is an error result after the statement's own: the
 * statement must be answered with that error.  Answered with its rows, a
 * claim started jobs whose claim had rolled back, and the job's next
 * claimer got the same lease token (CI, 2026-12-04: "lease lost before the
 * statement ran").  The statement after it runs and commits as usual.
 */
static void
test_failed_commit_is_the_answer(void **state)
{
	PGconn *setup = t_connect(t_server_conninfo());
	t_exec(setup, "drop table if exists dbev_commit");
	t_exec(setup, "create table dbev_commit (x int)");
	t_exec(setup, "create or replace function dbev_refuse() returns "
		      "trigger language plpgsql as $$ begin if new.x < 0 then "
		      "raise exception 'refused at commit' using errcode = "
		      "'P0042'; end if; return null; end $$");
	t_exec(setup, "create constraint trigger dbev_refuse after insert on "
		      "dbev_commit deferrable initially deferred for each row "
		      "execute function dbev_refuse()");
	struct ev_loop *loop = EV_DEFAULT;
	struct dbev *d = open_dbev(loop);
	int left = 2;
	struct commit refused = {.left = &left}, kept = {.left = &left};
	assert_int_equal(dbev_send(d,
				   "insert into dbev_commit values (-1) "
				   "returning x",
				   0, NULL, on_commit, &refused),
			 0);
	assert_int_equal(dbev_send(d,
				   "insert into dbev_commit values (1) "
				   "returning x",
				   0, NULL, on_commit, &kept),
			 0);
	ev_run(loop, 0);
	print_message("refused at commit: %s %s; the next: %s\n",
		      PQresStatus(refused.status), refused.sqlstate,
		      PQresStatus(kept.status));
	assert_int_equal(refused.status, PGRES_FATAL_ERROR);
	assert_string_equal(refused.sqlstate, "P0042");
	assert_int_equal(kept.status, PGRES_TUPLES_OK);
	t_assert_value(setup, "1",
		       "select string_agg(x::text, ',') from "
		       "dbev_commit");
	dbev_free(d);
	t_exec(setup, "drop table dbev_commit");
	t_exec(setup, "drop function dbev_refuse()");
	PQfinish(setup);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_answer_time_leaves_out_the_wait),
		cmocka_unit_test(test_failed_commit_is_the_answer),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
