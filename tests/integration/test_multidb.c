/*
 * Integration: one pgjobd serving queues in two databases of two
 * PostgreSQL clusters at once (databases:, docs/configuration.md).  The
 * "pg" fixture gives the first cluster; the test starts a second with
 * scripts/testpg.sh and stops it in its teardown, which cmocka runs after
 * a failure too.  Jobs in both run; an outage of the second (pg_ctl stop
 * -m immediate) does not stop the first's jobs, and once it is back its
 * jobs run again; /metrics, /healthz and `pgjob -c FILE status` show both.
 */
#include "testlib.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

/* The second cluster's directory, while it runs; and the daemon. */
static char *pg2;
static pid_t daemon_pid;

/* Runs scripts/testpg.sh CMD on the second cluster; fails unless it exits
 * 0. */
static void
testpg(const char *cmd)
{
	struct t_run r;
	const char *argv[] = {"bash", t_src("scripts/testpg.sh"), cmd, pg2,
			      NULL};
	/* Durable (fsync, synchronous_commit): the outage below loses no
	 * committed end, so each job runs exactly once. */
	const char *env[] = {"PGJOBD_TESTPG_DURABLE=1", NULL};
	t_run(&r, 120, env, argv);
	if (r.status != 0)
		fail_msg("testpg.sh %s: exit %d\n%s%s", cmd, r.status, r.out,
			 r.err);
	t_run_free(&r);
}

static int
teardown(void **state)
{
	if (daemon_pid > 0 && t_alive(daemon_pid))
		t_stop(daemon_pid, SIGKILL, 30);
	daemon_pid = 0;
	if (pg2) {
		/* After a failure too: no cluster is left behind. */
		const char *argv[] = {"bash", t_src("scripts/testpg.sh"),
				      "stop", pg2, NULL};
		struct t_run r;
		t_run(&r, 120, NULL, argv);
		t_run_free(&r);
		free(pg2);
		pg2 = NULL;
	}
	return 0;
}

/* The second cluster, with database multidb_b migrated; its conninfo
 * (caller frees). */
static char *
second_cluster(void)
{
	pg2 = xasprintf("%s/pg2", t_tmpdir());
	testpg("start");
	char *path = xasprintf("%s/conninfo", pg2);
	char *server = t_read_file(path);
	free(path);
	server[strcspn(server, "\n")] = '\0';
	PGconn *c = t_connect(server);
	t_exec(c, "create database multidb_b");
	PQfinish(c);
	/* The fixture's conninfo ends with dbname=postgres: the last one
	 * given wins in libpq. */
	char *ci = xasprintf("%s dbname=multidb_b", server);
	free(server);
	t_migrate(ci);
	return ci;
}

/* `pgjob -c cfg ARGS...` (NULL-terminated); the caller frees r. */
static void
pgjob_c(struct t_run *r, const char *cfg, const char *a1, const char *a2,
	const char *a3)
{
	const char *argv[] = {t_bin("pgjob"), "-c", cfg, a1, a2, a3, NULL};
	t_run(r, 60, NULL, argv);
}

/* GET path; the whole response (caller frees). */
static char *
get(int port, const char *path)
{
	char *r = t_http_get(port, path);
	assert_non_null(r);
	return r;
}

/* Waits until GET path answers with text in it (a status code, or a
 * series: a worker counts a job just after its end is written). */
static void
wait_http(int port, const char *path, const char *text, int timeout_s)
{
	for (int i = 0; i < timeout_s * 20; i++) {
		char *r = get(port, path);
		int ok = strstr(r, text) != NULL;
		free(r);
		if (ok)
			return;
		t_sleep_ms(50);
	}
	fail_msg("%s never answered with \"%s\"", path, text);
}

static void
enqueue(PGconn *c, const char *kind, int n)
{
	t_exec(c,
	       "select pgjob.enqueue('%s', '{}') from generate_series(1, %d)",
	       kind, n);
}

static void
test_two_clusters(void **state)
{
	char *ci_a = t_db_migrated("multidb_a");
	char *ci_b = second_cluster();
	int port = t_free_port();
	char *text =
		xasprintf("databases:\n"
			  "  alpha: { conninfo: \"%s\", workers: 2 }\n"
			  "  beta: { conninfo: \"%s\", workers: 1 }\n"
			  "lease: 2s\n"
			  "poll_interval: 100ms\n"
			  "metrics: { listen: \"127.0.0.1:%d\" }\n"
			  "handlers:\n"
			  "  noop: { type: exec, command: [\"/bin/true\"] }\n"
			  "  mark: { type: sql, statement: \"select $1::jsonb, "
			  "$2::bigint\" }\n",
			  ci_a, ci_b, port);
	char *cfg = xasprintf("%s/multidb.yaml", t_tmpdir());
	t_write_file(cfg, text);
	free(text);
	PGconn *a = t_connect(ci_a), *b = t_connect(ci_b);

	/* Each database's workers register there, with slots of their own. */
	daemon_pid = t_daemon(cfg, 0, "multidb");
	t_wait_workers(a, 2, 30);
	t_wait_workers(b, 1, 30);
	t_assert_value(a, "1,2",
		       "select string_agg(slot::text, ',' order by slot) "
		       "from pgjob.workers");
	t_assert_value(b, "1", "select slot::text from pgjob.workers");

	/* Jobs in both run, of an exec and an sql handler. */
	enqueue(a, "noop", 20);
	enqueue(a, "mark", 5);
	enqueue(b, "noop", 10);
	enqueue(b, "mark", 5);
	t_wait_done(a, 25, 60);
	t_wait_done(b, 15, 60);
	wait_http(port, "/healthz", " 200 ", 30);
	char *h = get(port, "/healthz");
	assert_non_null(strstr(h, "database alpha: ok: 2 workers hold slots\n"
				  "database beta: ok: 1 workers hold slots\n"));
	free(h);

	/* /metrics: every series of each database, labelled. */
	wait_http(port, "/metrics",
		  "pgjobd_jobs_done_total{database=\"beta\",kind=\"mark\","
		  "queue=\"default\"} 5\n",
		  30);
	char *m = get(port, "/metrics");
	assert_non_null(strstr(m, "pgjobd_jobs_done_total{database=\"alpha\","
				  "kind=\"noop\",queue=\"default\"} 20\n"));
	assert_non_null(strstr(m, "pgjobd_jobs_done_total{database=\"beta\","
				  "kind=\"noop\",queue=\"default\"} 10\n"));
	assert_non_null(strstr(m, "pgjobd_slots_held{database=\"alpha\"} 2\n"));
	assert_non_null(strstr(m, "pgjobd_slots_held{database=\"beta\"} 1\n"));
	/* One HELP per family, as the text format requires. */
	char *first = strstr(m, "# HELP pgjobd_jobs_done_total ");
	assert_non_null(first);
	assert_null(strstr(first + 1, "# HELP pgjobd_jobs_done_total "));
	free(m);

	/* pgjob status: each database under its name; --database picks one. */
	struct t_run r;
	pgjob_c(&r, cfg, "status", NULL, NULL);
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, "database alpha\n"));
	assert_non_null(strstr(r.out, "database beta\n"));
	t_run_free(&r);
	pgjob_c(&r, cfg, "--database", "beta", "status");
	assert_int_equal(r.status, 0);
	assert_null(strstr(r.out, "database alpha"));
	t_run_free(&r);
	{
		const char *argv[] = {t_bin("pgjob"), "-c",   cfg,
				      "--database",   "beta", "status",
				      "--json",	      NULL};
		t_run(&r, 60, NULL, argv);
		assert_int_equal(r.status, 0);
		assert_non_null(strstr(r.out, "\"live_workers\":1"));
		assert_null(strstr(r.out, "\"databases\""));
		t_run_free(&r);
	}
	pgjob_c(&r, cfg, "status", "--json", NULL);
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, "\"database\":\"alpha\""));
	assert_non_null(strstr(r.out, "\"database\":\"beta\""));
	t_run_free(&r);
	/* Another command needs a pick. */
	pgjob_c(&r, cfg, "jobs", NULL, NULL);
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "names several databases (alpha, "
				      "beta): pick one with --database NAME"));
	t_run_free(&r);

	/* beta's cluster goes down: alpha's jobs keep running. */
	PQfinish(b);
	testpg("crash");
	enqueue(a, "noop", 30);
	t_wait_done(a, 55, 60);
	t_wait_log("multidb", "db=beta", 1, 30);
	wait_http(port, "/healthz", " 503 ", 30);
	h = get(port, "/healthz");
	assert_non_null(strstr(h, "database alpha: ok: "));
	assert_non_null(strstr(h, "database beta: "));
	assert_null(strstr(h, "database beta: ok"));
	/* Its one worker by the number the log gives it (worker=3). */
	assert_non_null(strstr(h, "database beta: worker 3 "));
	free(h);
	/* status still shows alpha, says beta is not reachable, exits 1. */
	pgjob_c(&r, cfg, "status", NULL, NULL);
	assert_int_equal(r.status, 1);
	assert_non_null(strstr(r.out, "database alpha\n"));
	assert_non_null(strstr(r.out, "(not reachable: see the error above)"));
	t_run_free(&r);
	assert_true(t_alive(daemon_pid));

	/* beta is back: its worker reconnects and its jobs run again. */
	testpg("resume");
	b = t_connect(ci_b);
	enqueue(b, "noop", 10);
	t_wait_done(b, 25, 90);
	wait_http(port, "/healthz", " 200 ", 60);
	wait_http(port, "/metrics",
		  "pgjobd_jobs_done_total{database=\"beta\",kind=\"noop\","
		  "queue=\"default\"} 20\n",
		  30);
	t_assert_value(
		b, "0",
		"select count(*) from pgjob.all_jobs where attempts > 1");

	/* A reload applies a database's workers; renaming one is refused,
	 * and the running config stays. */
	text = xasprintf("databases:\n"
			 "  alpha: { conninfo: \"%s\", workers: 2 }\n"
			 "  beta: { conninfo: \"%s\", workers: 2 }\n"
			 "lease: 2s\n"
			 "poll_interval: 100ms\n"
			 "metrics: { listen: \"127.0.0.1:%d\" }\n"
			 "handlers:\n"
			 "  noop: { type: exec, command: [\"/bin/true\"] }\n",
			 ci_a, ci_b, port);
	t_write_file(cfg, text);
	free(text);
	long long old = t_long(b, "select pid from pgjob.workers");
	kill(daemon_pid, SIGHUP);
	t_wait_log("multidb", "reload done: 4 workers start", 1, 30);
	/* beta: two new workers, the old one gone (it retired). */
	t_wait_until(b, 30,
		     "select count(*) = 2 and bool_and(pid <> %lld) from "
		     "pgjob.workers",
		     old);
	text = xasprintf("databases:\n"
			 "  alpha: { conninfo: \"%s\" }\n"
			 "  gamma: { conninfo: \"%s\" }\n",
			 ci_a, ci_b);
	t_write_file(cfg, text);
	free(text);
	kill(daemon_pid, SIGHUP);
	t_wait_log("multidb", "databases: the names changed", 1, 30);
	enqueue(b, "noop", 5);
	t_wait_done(b, 30, 60);
	/* Reloads are the process's: each counted once, with no database=. */
	m = get(port, "/metrics");
	assert_non_null(strstr(
		m, "\npgjobd_config_reloads_total{result=\"success\"} 1\n"));
	assert_non_null(strstr(
		m, "\npgjobd_config_reloads_total{result=\"failure\"} 1\n"));
	assert_non_null(
		strstr(m, "\npgjobd_config_last_reload_successful 0\n"));
	assert_null(strstr(m, "pgjobd_config_reloads_total{database="));
	free(m);
	/* A beta worker killed: its restart line names its database. */
	kill((pid_t)t_long(b, "select min(pid) from pgjob.workers"), SIGKILL);
	t_wait_log("multidb", "restarting db=beta worker=", 1, 30);

	t_stop_clean(daemon_pid);
	daemon_pid = 0;
	/* The supervisor's lines about a worker name its database. */
	assert_true(t_log_count("multidb", "db=beta worker=3 (retired) ") > 0);
	PQfinish(a);
	PQfinish(b);
	free(cfg);
	free(ci_a);
	free(ci_b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_two_clusters, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
