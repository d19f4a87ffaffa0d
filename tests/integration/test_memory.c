/*
 * A long-running worker's memory stays flat: 2,000 no-op jobs, then 10,000
 * more, and the worker's resident set may grow by a little only (not per
 * job).  And an instance at rest stays within its bounds: the supervisor
 * and each worker under 8 MiB (VmRSS; docs/daemon.md).  Not run under
 * the sanitizers, whose shadow memory and quarantine would distort both
 * (.ci/run excludes it there).
 */
#include "testlib.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* VmRSS of pid in KiB, or -1. */
static long
rss_kib(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	char *s = t_read_file(path);
	char *p = s ? strstr(s, "VmRSS:") : NULL;
	long v = p ? strtol(p + 6, NULL, 10) : -1;
	free(s);
	return v;
}

static void
test_worker_memory_flat(void **state)
{
	char *ci = t_db_migrated("t_memory");
	PGconn *c = t_connect(ci);
	char body[1024];
	snprintf(body, sizeof(body),
		 "workers: 1\nlog: { level: warn }\n"
		 "queues: { default: { concurrency: 50 } }\n"
		 "handlers:\n"
		 "  noop: { type: plugin, library: \"%s\","
		 " symbol: pgjobd_example }\n"
		 "  tick: { type: exec, command: [\"/bin/true\"] }\n",
		 t_bin("pgjobd_example.so"));
	const char *cfg = t_config("memory", ci, body);
	pid_t p = t_daemon(cfg, 0, "memory");
	t_exec(c,
	       "insert into pgjob.jobs (kind) select case when i %% 20 = 0 "
	       "then 'tick' else 'noop' end from generate_series(1, 2000) i");
	assert_int_equal(t_poll(c, 120,
				"select count(*) = 2000 from "
				"pgjob.jobs where state = 'done'"),
			 0);
	pid_t w = (pid_t)t_long(c, "select pid from pgjob.workers");
	long before = rss_kib(w);
	t_exec(c, "insert into pgjob.jobs (kind) select case when i %% 20 = 0 "
		  "then 'tick' else 'noop' end from generate_series(1, 10000) "
		  "i");
	assert_int_equal(t_poll(c, 300,
				"select count(*) = 12000 from "
				"pgjob.jobs where state = 'done'"),
			 0);
	long after = rss_kib(w);
	print_message("worker VmRSS after 2,000 jobs: %ld KiB, after 12,000: "
		      "%ld KiB\n",
		      before, after);
	assert_true(before > 0 && after > 0);
	/* Five times the jobs; a leak of even 100 bytes a job would show. */
	assert_true(after - before < 1024);
	assert_int_equal(t_stop(p, SIGTERM, 30), 0);
	PQfinish(c);
	free(ci);
}

/* Issue 6's bounds, VmRSS at rest. */
#define SUPERVISOR_MAX_KIB 8192
#define WORKER_MAX_KIB	   8192

/*
 * Starts 2 workers with handlers, waits for READY and a few heartbeats,
 * prints the VmRSS of the supervisor and its workers and returns the
 * largest worker's; *sup is the supervisor's.
 */
static long
rss_at_rest(const char *ci, PGconn *c, const char *name, const char *handlers,
	    long *sup)
{
	char body[1024];
	snprintf(body, sizeof(body),
		 "workers: 2\nlog: { level: info }\nhandlers:\n%s", handlers);
	const char *cfg = t_config(name, ci, body);
	pid_t p = t_daemon(cfg, 0, name);
	for (int i = 0; i < 600 && t_count_in_file(t_log(name), "ready: ") == 0;
	     i++)
		t_sleep_ms(50);
	assert_int_equal(t_count_in_file(t_log(name), "ready: "), 1);
	assert_int_equal(
		t_poll(c, 30, "select count(*) = 2 from pgjob.workers"), 0);
	t_sleep_ms(1500); /* at rest: past the first heartbeats */
	*sup = rss_kib(p);
	long worst = 0;
	for (int i = 0; i < 2; i++) {
		pid_t w = (pid_t)t_long(c,
					"select pid from pgjob.workers "
					"order by slot offset %d",
					i);
		long r = rss_kib(w);
		assert_true(r > 0);
		if (r > worst)
			worst = r;
		print_message("%s: worker %d VmRSS %ld KiB\n", name, i + 1, r);
	}
	print_message("%s: supervisor VmRSS %ld KiB\n", name, *sup);
	assert_true(*sup > 0);
	assert_int_equal(t_stop(p, SIGTERM, 30), 0);
	return worst;
}

static void
test_rss_at_rest(void **state)
{
	char *ci = t_db_migrated("t_memory_rest");
	PGconn *c = t_connect(ci);
	char plugin[512];
	snprintf(plugin, sizeof(plugin),
		 "  noop: { type: plugin, library: \"%s\","
		 " symbol: pgjobd_example }\n",
		 t_bin("pgjobd_example.so"));
	long sup, worker = rss_at_rest(ci, c, "rest_plugin", plugin, &sup);
	assert_true(sup <= SUPERVISOR_MAX_KIB);
	assert_true(worker <= WORKER_MAX_KIB);
	/* An http handler loads libcurl into the workers (not the
	 * supervisor): reported, and the supervisor's bound still holds. */
	char http[1024];
	snprintf(http, sizeof(http),
		 "%s  hook: { type: http, url: \"http://127.0.0.1:9/\" }\n",
		 plugin);
	rss_at_rest(ci, c, "rest_http", http, &sup);
	assert_true(sup <= SUPERVISOR_MAX_KIB);
	PQfinish(c);
	free(ci);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rss_at_rest),
		cmocka_unit_test(test_worker_memory_flat),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
