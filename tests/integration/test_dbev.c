/*
 * Integration: dbev, the worker's pipelined connection, against the real
 * server: an answer's own time (dbev_answer_ms()) leaves out the time its
 * statement waited in the pipeline behind the one sent before it, which the
 * sweep's time limit and the queue depths' backoff are measured by.
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
	char *err = NULL;
	struct db_conn *conn = db_connect(t_server_conninfo(), "test", &err);
	assert_non_null(conn);
	struct ev_loop *loop = EV_DEFAULT;
	struct dbev *d = dbev_new(loop, conn, NULL);
	assert_non_null(d);
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

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_answer_time_leaves_out_the_wait),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
