/*
 * Integration: the figures for /metrics that one worker per instance reads
 * (src/worker/monitor.c) go on a connection of their own, "pgjobd monitor"
 * in pg_stat_activity, so that a read that waits (under a snapshot held
 * open elsewhere it counts every dead index entry: seconds) holds up none
 * of the worker's claims and ends.  While that connection cannot be made,
 * the reads go on the worker's own and the figures stay fresh; once it can,
 * they move back.  Losing it costs the worker nothing.
 */
#include "testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MONITORS                                                               \
	"select count(*) from pg_stat_activity where application_name ="       \
	" 'pgjobd monitor' and datname = current_database()"

/* Waits until /metrics holds line (a whole line); fails after 60 s. */
static void
wait_metric_line(int port, const char *line)
{
	char want[256];
	snprintf(want, sizeof(want), "\n%s\n", line);
	for (int i = 0; i < 600; i++) {
		char *m = t_http_get(port, "/metrics");
		int found = m && strstr(m, want);
		free(m);
		if (found)
			return;
		t_sleep_ms(100);
	}
	fail_msg("/metrics never held \"%s\"", line);
}

static const char *
config_body(int port)
{
	static char body[512];
	snprintf(
		body, sizeof(body),
		"workers: 1\nlease: 30s\n"
		"queues: { later: {} }\n"
		"metrics: { listen: \"127.0.0.1:%d\" }\n"
		"handlers:\n"
		"  ok: { type: exec, command: [\"/bin/true\"] }\n"
		"  later: { type: exec, queue: later, command: [\"/bin/true\"] "
		"}\n",
		port);
	return body;
}

/* n jobs of kind later, due in an hour: pgjobd_queue_scheduled counts
 * them. */
static void
enqueue_later(PGconn *c, int n)
{
	t_exec(c,
	       "select pgjob.enqueue('later', '{}', 'later', now() + interval"
	       " '1 hour') from generate_series(1, %d)",
	       n);
}

/*
 * The monitor's read of the workflows waits for a lock for as long as the
 * test holds it; meanwhile the worker claims and ends five jobs.  With the
 * reads on the worker's connection, its claims waited behind them until
 * the lock went or the connection's 30 s timeout called it lost.  Then
 * the monitor's backend is terminated: the worker's connection stays, and
 * the figures come back on a new one.
 */
static void
test_reads_on_their_own_connection(void **state)
{
	char *ci = t_db_migrated("t_monitor_own");
	PGconn *c = t_connect(ci);
	int port = t_free_port();
	/* A minute of throughput past its 2 hours, for the pruning pass at
	 * start to delete. */
	t_exec(c, "insert into pgjob.worker_minutes values (1, now() -"
		  " interval '3 hours', now() - interval '3 hours', 0, 0, 0)");
	pid_t d = t_start("monown", ci, "%s", config_body(port));
	t_wait_workers(c, 1, 20);
	t_wait_until(c, 30, "select (" MONITORS ") = 1");
	enqueue_later(c, 2);
	wait_metric_line(port, "pgjobd_queue_scheduled{queue=\"later\"} 2");
	/* The pruning duty's pass at start (it writes workflow_totals too, on
	 * the worker's connection) is over: its statements run in the order
	 * sent (src/worker/pruning.c), and the minute's delete comes after
	 * the jobs' and their workflows' totals.  The next is a minute
	 * away. */
	t_wait_until(c, 30,
		     "select count(*) = 0 from pgjob.worker_minutes"
		     " where slot = 1 and at < now() - interval '2 hours'");

	PGconn *l = t_connect(ci);
	t_exec(l, "begin");
	t_exec(l, "lock table pgjob.workflow_totals in access exclusive mode");
	t_wait_until(c, 30,
		     "select count(*) = 1 from pg_stat_activity where"
		     " application_name = 'pgjobd monitor' and"
		     " datname = current_database() and"
		     " wait_event_type = 'Lock'");
	t_exec(c, "select pgjob.enqueue('ok') from generate_series(1, 5)");
	t_wait_done(c, 5, 15);
	t_exec(l, "commit");
	PQfinish(l);
	assert_int_equal(t_log_count("monown", "database connection lost"), 0);

	long long before = t_long(c, "select pid from pg_stat_activity where"
				     " application_name = 'pgjobd monitor'"
				     " and datname = current_database()");
	t_exec(c, "select pg_terminate_backend(%lld)", before);
	t_wait_log("monown", "the queue figures' own connection:", 1, 30);
	enqueue_later(c, 1);
	wait_metric_line(port, "pgjobd_queue_scheduled{queue=\"later\"} 3");
	t_wait_log("monown",
		   "the queue figures have their own connection again", 1, 60);
	t_wait_until(c, 30,
		     "select count(*) = 1 from pg_stat_activity where"
		     " application_name = 'pgjobd monitor' and"
		     " datname = current_database() and pid <> %lld",
		     before);
	t_exec(c, "select pgjob.enqueue('ok')");
	t_wait_done(c, 6, 15);
	assert_int_equal(t_log_count("monown", "database connection lost"), 0);
	t_stop_clean(d);
	t_assert_value(c, "0", MONITORS);
	PQfinish(c);
	free(ci);
}

/*
 * A role allowed one connection: the worker's.  The monitor's is refused,
 * the reads go on the worker's connection (the figures are there), and
 * once the limit is lifted they get their own.
 */
static void
test_falls_back_to_the_workers_connection(void **state)
{
	char *ci = t_db_migrated("t_monitor_one");
	PGconn *c = t_connect(ci);
	t_exec(c, "do $$ begin create role t_monitor_one login;"
		  " exception when duplicate_object then null; end $$");
	t_exec(c, "alter role t_monitor_one connection limit 1;"
		  "grant usage on schema pgjob to t_monitor_one;"
		  "grant select, insert, update, delete on all tables in"
		  " schema pgjob to t_monitor_one;"
		  /* PUBLIC's no more since schema version 30. */
		  "grant execute on all functions in schema pgjob to"
		  " t_monitor_one");
	char role_ci[1200];
	snprintf(role_ci, sizeof(role_ci), "%s user=t_monitor_one", ci);
	int port = t_free_port();
	enqueue_later(c, 4);
	pid_t d = t_start("monone", role_ci, "%s", config_body(port));
	t_wait_workers(c, 1, 20);
	t_wait_log("monone", "too many connections for role", 1, 30);
	wait_metric_line(port, "pgjobd_queue_scheduled{queue=\"later\"} 4");
	t_assert_value(c, "0", MONITORS);
	t_exec(c, "select pgjob.enqueue('ok') from generate_series(1, 3)");
	t_wait_done(c, 3, 15);

	t_exec(c, "alter role t_monitor_one connection limit -1");
	t_wait_log("monone",
		   "the queue figures have their own connection again", 1, 60);
	t_assert_value(c, "1", MONITORS);
	enqueue_later(c, 1);
	wait_metric_line(port, "pgjobd_queue_scheduled{queue=\"later\"} 5");
	/* Said once, however many attempts failed. */
	assert_int_equal(t_log_count("monone", "the queue figures' own "
					       "connection:"),
			 1);
	assert_int_equal(t_log_count("monone", "database connection lost"), 0);
	t_stop_clean(d);
	PQfinish(c);
	free(ci);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reads_on_their_own_connection),
		cmocka_unit_test(test_falls_back_to_the_workers_connection),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
