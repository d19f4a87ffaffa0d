/*
 * Integration: an exec handler's limits and the figures of each attempt.
 * Real pgjobd processes run real commands (coreutils, with argv, and a
 * fixture script) under limits: a CPU burner past cpu, a writer past
 * file_size, a reader of more files than open_files, an allocation past
 * memory; each fails as a limit says, while the other jobs run.  A job's
 * row keeps what its last attempt used (last_wall_ms, last_cpu_ms,
 * last_max_rss_kb), `pgjob show` prints them, and /metrics counts CPU time and
 * peak RSS per kind.
 */
#include "testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The value of the series that starts with prefix in m, or -1. */
static double
series(const char *m, const char *prefix)
{
	const char *p = m ? strstr(m, prefix) : NULL;
	return p ? strtod(p + strlen(prefix), NULL) : -1;
}

/*
 * A job burning CPU past cpu: 1s dies of SIGXCPU, and its error names the
 * limit; it is retried by its policy like any failure, then dead (one
 * that ignores SIGXCPU dies of SIGKILL a second later, named too).  The
 * jobs around it run, its row has its figures, `pgjob show` prints them,
 * and /metrics counts its CPU time.
 */
static void
test_cpu_limit(void **state)
{
	char *ci = t_db_migrated("t_limits_cpu");
	PGconn *c = t_connect(ci);
	int port = t_free_port();
	long long burn = t_long(c, "select pgjob.enqueue('burn')");
	long long stubborn = t_long(c, "select pgjob.enqueue('stubborn')");
	t_exec(c, "select pgjob.enqueue('ok') from generate_series(1, 5)");
	pid_t p = t_start("limits_cpu", ci,
			  "workers: 1\n"
			  "metrics: { listen: \"127.0.0.1:%d\" }\n"
			  "handlers:\n"
			  "  burn:\n"
			  "    type: exec\n"
			  "    command: [sha256sum, /dev/zero]\n"
			  "    max_attempts: 2\n"
			  "    backoff: { base: 100ms, max: 100ms }\n"
			  "    limits: { cpu: 1s }\n"
			  "  stubborn: { type: exec, command: [\"%s\"],"
			  " max_attempts: 1, limits: { cpu: 1s } }\n"
			  "  ok: { type: exec, command: [\"true\"] }\n",
			  port, t_src("tests/fixtures/daemon/stubborn.sh"));
	t_wait_state(c, burn, "dead", 60);
	t_assert_job_has(c, burn, "attempts || '|' || last_error", "2|",
			 "cpu limit 1s reached (SIGXCPU)", NULL);
	t_assert_value(c, "5",
		       "select count(*) from pgjob.all_jobs where kind = 'ok'"
		       " and state = 'done'");
	/* One that ignores SIGXCPU meets the hard limit, a second later. */
	t_wait_state(c, stubborn, "dead", 60);
	t_assert_job_has(c, stubborn, "last_error",
			 "cpu limit 1s reached (SIGKILL)", NULL);
	/* A job enqueued after them still runs. */
	long long after = t_long(c, "select pgjob.enqueue('ok')");
	t_wait_state(c, after, "done", 30);
	/* Its last attempt's figures (the kernel counts CPU time for the
	 * limit more finely than rusage reports it: a little under 1s may
	 * show) and memory; one thread's CPU time is no more than its wall
	 * time. */
	t_assert_job(c, burn,
		     "last_cpu_ms > 0 and last_wall_ms >= last_cpu_ms"
		     " and last_max_rss_kb > 0",
		     "t");
	long long last_cpu = t_long(c,
				    "select last_cpu_ms"
				    " from pgjob.all_jobs where id = %lld",
				    burn);
	char id[24];
	snprintf(id, sizeof(id), "%lld", burn);
	struct t_run r;
	t_pgjob(&r, ci, "show", id, NULL);
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, "last_wall_ms"));
	assert_non_null(strstr(r.out, "last_cpu_ms"));
	assert_non_null(strstr(r.out, "last_max_rss_kb"));
	t_run_free(&r);
	t_pgjob(&r, ci, "show", id, "--json", NULL);
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, "\"last_cpu_ms\""));
	assert_non_null(strstr(r.out, "\"last_max_rss_kb\""));
	t_run_free(&r);
	/* Both attempts' CPU time: more than the last one's. */
	char *m = t_http_get(port, "/metrics");
	assert_non_null(m);
	assert_true(series(m, "pgjobd_handler_cpu_seconds_total{kind=\"burn\","
			      "queue=\"default\"} ") > last_cpu / 1000.);
	assert_true(series(m, "pgjobd_handler_cpu_seconds_total{kind=\"ok\","
			      "queue=\"default\"} ") >= 0);
	assert_true(series(m, "pgjobd_handler_max_rss_bytes_count{kind="
			      "\"burn\",queue=\"default\"} ") == 2);
	assert_true(series(m, "pgjobd_handler_max_rss_bytes_count{kind="
			      "\"ok\",queue=\"default\"} ") == 6);
	free(m);
	t_stop_clean(p);
	PQfinish(c);
	free(ci);
}

/*
 * The other limits: file_size (SIGXFSZ, named), open_files and memory
 * (the command's own error: EMFILE, ENOMEM), all five as the command sees
 * them (soft and hard; cpu's hard a second later), and a command inside
 * its limits that runs as it would without.
 */
static void
test_other_limits(void **state)
{
	char *ci = t_db_migrated("t_limits_other");
	PGconn *c = t_connect(ci);
	const char *tmp = t_tmpdir();
	char files[20 * 4200] = "", path[4200], out[4200];
	size_t len = 0;

	/* twenty files for paste, which opens them all at once */
	for (int i = 0; i < 20; i++) {
		snprintf(path, sizeof(path), "%s/limits_f%d", tmp, i);
		t_write_file(path, "x\n");
		len += (size_t)snprintf(files + len, sizeof(files) - len,
					"%s\"%s\"", i ? ", " : "", path);
	}
	snprintf(out, sizeof(out), "%s/limits_big.out", tmp);
	unlink(out);
	long long fsize = t_long(c, "select pgjob.enqueue('fsize')");
	long long nofile = t_long(c, "select pgjob.enqueue('nofile')");
	long long mem = t_long(c, "select pgjob.enqueue('mem_big')");
	long long small = t_long(c, "select pgjob.enqueue('mem_small')");
	long long shown = t_long(c, "select pgjob.enqueue('shown')");
	long long busy = t_long(c, "select pgjob.enqueue('busy')");
	pid_t p = t_start(
		"limits_other", ci,
		"workers: 1\n"
		"defaults: { max_attempts: 1 }\n"
		"handlers:\n"
		"  fsize: { type: exec, limits: { file_size: 1MiB },"
		" command: [dd, if=/dev/zero, \"of=%s\", bs=64k, count=64] }\n"
		"  nofile: { type: exec, limits: { open_files: 10 },"
		" command: [paste, %s] }\n"
		"  mem_big: { type: exec, limits: { memory: 256MiB },"
		" command: [dd, if=/dev/zero, of=/dev/null, bs=600M, count=1] "
		"}\n"
		"  mem_small: { type: exec, limits: { memory: 256MiB },"
		" command: [dd, if=/dev/zero, of=/dev/null, bs=1M, count=1] }\n"
		"  shown:\n"
		"    type: exec\n"
		"    command: [\"%s\"]\n"
		"    limits: { cpu: 7s, memory: 1GiB, open_files: 77,"
		" processes: 33, file_size: 5MiB }\n"
		"  busy: { type: exec,"
		" command: [dd, if=/dev/zero, of=/dev/null, bs=1M, count=2000] "
		"}\n",
		out, files, t_src("tests/fixtures/daemon/limits.sh"));

	t_wait_state(c, fsize, "dead", 30);
	t_assert_job_has(c, fsize, "last_error",
			 "file_size limit 1MiB reached (SIGXFSZ)", NULL);
	t_wait_state(c, nofile, "dead", 30);
	t_assert_job_has(c, nofile, "last_error", "exit status 1",
			 "Too many open files", NULL);
	t_wait_state(c, mem, "dead", 30);
	t_assert_job_has(c, mem, "last_error", "exit status 1",
			 "memory exhausted", NULL);
	t_wait_state(c, small, "done", 30);
	t_wait_state(c, shown, "done", 30);
	t_assert_job(
		c, shown,
		"result ->> 'cpu' || ' ' || (result ->> 'memory') || ' ' ||"
		" (result ->> 'open_files') || ' ' ||"
		" (result ->> 'processes') || ' ' ||"
		" (result ->> 'file_size')",
		"7/8 1073741824/1073741824 77/77 33/33 5242880/5242880");
	/* A finished job's figures: a copy of 2 GiB takes CPU time, and
	 * one thread's CPU time is no more than its wall time. */
	t_wait_state(c, busy, "done", 60);
	t_assert_job(c, busy,
		     "last_cpu_ms > 0 and last_wall_ms >= last_cpu_ms"
		     " and last_max_rss_kb > 0",
		     "t");
	t_stop_clean(p);
	PQfinish(c);
	free(ci);
}

/*
 * The figures of the handlers that run inside their worker: a plugin's
 * call has its CPU time but no RSS of its own, an sql handler's
 * transaction and an http request their wall time only; a failed sql
 * attempt too, through the worker's end.
 */
static void
test_in_process_figures(void **state)
{
	char *ci = t_db_migrated("t_limits_inproc");
	PGconn *c = t_connect(ci);
	int in_fd;
	pid_t httpd;
	int port = t_httpd_start(&in_fd, &httpd);
	long long pl = t_long(c, "select pgjob.enqueue('pl')");
	long long sq = t_long(c, "select pgjob.enqueue('sq')");
	long long bad = t_long(c, "select pgjob.enqueue('sq_bad')");
	long long web = t_long(c, "select pgjob.enqueue('web')");
	pid_t p = t_start(
		"limits_inproc", ci,
		"workers: 1\n"
		"defaults: { max_attempts: 1 }\n"
		"handlers:\n"
		"  pl: { type: plugin, library: \"%s\","
		" symbol: pgjobd_example }\n"
		"  sq: { type: sql, statement: \"select pg_sleep(0)\" }\n"
		"  sq_bad: { type: sql, statement: \"select 1/0\" }\n"
		"  web: { type: http, url: \"http://127.0.0.1:%d/ok\" }\n",
		t_bin("pgjobd_example.so"), port);
	/* The figures measured: the columns that are not null. */
	const char *expr =
		"concat_ws(',', case when last_cpu_ms is not null"
		" then 'cpu_ms' end, case when last_max_rss_kb is not null"
		" then 'max_rss_kb' end, case when last_wall_ms is not null"
		" then 'wall_ms' end)";
	t_wait_state(c, pl, "done", 30);
	t_assert_job(c, pl, expr, "cpu_ms,wall_ms");
	t_wait_state(c, sq, "done", 30);
	t_assert_job(c, sq, expr, "wall_ms");
	t_wait_state(c, bad, "dead", 30);
	t_assert_job(c, bad, expr, "wall_ms");
	t_wait_state(c, web, "done", 30);
	t_assert_job(c, web, expr, "wall_ms");
	t_stop_clean(p);
	t_httpd_stop(in_fd, httpd);
	PQfinish(c);
	free(ci);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cpu_limit),
		cmocka_unit_test(test_other_limits),
		cmocka_unit_test(test_in_process_figures),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
