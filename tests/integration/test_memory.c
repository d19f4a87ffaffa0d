/*
 * A long-running worker's memory stays flat: 2,000 no-op jobs, then 10,000
 * more, and the worker's resident set may grow by a little only (not per
 * job).  Not run under the sanitizers, whose quarantine grows on purpose
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

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_worker_memory_flat),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
