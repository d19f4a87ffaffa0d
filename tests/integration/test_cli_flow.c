/*
 * Integration: the flow control commands of pgjob (pause, resume, limits),
 * the flow column of status and enqueue's --limit-key and --cost, against
 * a migrated database whose rows each test builds with SQL.  What the
 * commands did is read back from pgjob.limits and the other tables, not
 * only from what they print.
 */
#include "testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *ci;

static int
setup(void **state)
{
	setenv("PGTZ", "UTC", 1);
	ci = t_db_migrated("t_cli_flow");
	return 0;
}

static int
teardown(void **state)
{
	free(ci);
	return 0;
}

/* Every test starts from empty tables and one known queue, exports. */
static int
empty(void **state)
{
	PGconn *c = t_connect(ci);
	t_exec(c, "truncate pgjob.jobs, pgjob.limits, pgjob.queues,"
		  " pgjob.limit_weights, pgjob.limit_keys restart identity");
	t_exec(c, "insert into pgjob.queues (name) values ('exports')");
	PQfinish(c);
	return 0;
}

/* Runs `pgjob --database ci ARGS...` (args NULL-terminated); the command
 * must succeed with nothing on stderr. */
static void
pgjob_ok(struct t_run *r, const char *const *args)
{
	t_pgjobv(r, ci, args);
	if (r->status != 0 || *r->err)
		fail_msg("pgjob %s: exit %d: %s", args[0], r->status, r->err);
}

/* Runs pgjob ARGS...; asserts its exit status, stdout and stderr. */
static void
expect(int status, const char *out, const char *err, const char *const *args)
{
	struct t_run r;
	t_pgjobv(&r, ci, args);
	if (r.status != status || strcmp(r.out, out) || strcmp(r.err, err))
		fail_msg("pgjob %s: exit %d\nstdout: %s\nstderr: %s\n"
			 "wanted exit %d\nstdout: %s\nstderr: %s",
			 args[0], r.status, r.out, r.err, status, out, err);
	t_run_free(&r);
}

static void
test_pause_resume(void **state)
{
	PGconn *c = t_connect(ci);
	const char *pause[] = {"pause", "exports", NULL};
	expect(0, "paused queue exports\n", "", pause);
	t_assert_value(c, "true|{}",
		       "select paused || '|' || paused_kinds::text"
		       " from pgjob.limits where queue = 'exports'");

	const char *kind[] = {"pause", "exports", "--kind", "report", NULL};
	expect(0, "paused kind report of queue exports\n", "", kind);
	t_assert_value(c, "true|{report}",
		       "select paused || '|' || paused_kinds::text"
		       " from pgjob.limits where queue = 'exports'");

	const char *resume_kind[] = {"resume", "exports", "--kind", "report",
				     NULL};
	expect(0, "resumed kind report of queue exports\n", "", resume_kind);
	t_assert_value(c, "true|{}",
		       "select paused || '|' || paused_kinds::text"
		       " from pgjob.limits where queue = 'exports'");

	/* A kind alone, then the queue's resume resumes it too. */
	const char *resume[] = {"resume", "exports", NULL};
	expect(0, "resumed queue exports\n", "", resume);
	expect(0, "paused kind report of queue exports\n", "", kind);
	t_assert_value(c, "false|{report}",
		       "select paused || '|' || paused_kinds::text"
		       " from pgjob.limits where queue = 'exports'");
	expect(0, "resumed queue exports\n", "", resume);
	/* Nothing left to limit: the row is gone. */
	assert_int_equal(t_long(c, "select count(*) from pgjob.limits"), 0);
	PQfinish(c);
}

/* A queue that no config defines and no job uses is refused, with the
 * known queues as the hint; a bad kind with the function's message. */
static void
test_pause_refused(void **state)
{
	const char *unknown[] = {"pause", "exprots", NULL};
	expect(1, "",
	       "pgjob: pause: 42704: unknown queue 'exprots'\n"
	       "pgjob: hint: Known queues: 'exports'.  A queue is known once "
	       "a worker whose config defines it has connected, or a job "
	       "uses it.\n",
	       unknown);
	const char *resume[] = {"resume", "exprots", "--kind", "k", NULL};
	struct t_run r;
	t_pgjobv(&r, ci, resume);
	assert_int_equal(r.status, 1);
	assert_non_null(strstr(r.err, "pgjob: resume: 42704: unknown queue "
				      "'exprots'\npgjob: hint: Known queues: "
				      "'exports'."));
	t_run_free(&r);
	const char *empty_kind[] = {"pause", "exports", "--kind", "", NULL};
	expect(1, "",
	       "pgjob: pause: 22023: pgjob.pause: the kind must not be "
	       "empty\n",
	       empty_kind);

	PGconn *c = t_connect(ci);
	assert_int_equal(t_long(c, "select count(*) from pgjob.limits"), 0);
	PQfinish(c);
}

/* A job of queue exports that runs under a lease of an hour; its id. */
static long long
running_job(PGconn *c, const char *kind)
{
	return t_long(c,
		      "insert into pgjob.jobs (queue, kind, state, attempts,"
		      " locked_by, locked_until, lease_token) values"
		      " ('exports', '%s', 'running', 1, 'vm:1',"
		      "  now() + interval '1 hour', 1) returning id",
		      kind);
}

/*
 * pause --wait returns once the running job has finished, having said
 * how many still ran; jobs of other kinds, and jobs whose lease has
 * expired (their worker is gone), are not waited for.
 */
static void
test_pause_wait(void **state)
{
	PGconn *c = t_connect(ci);
	long long id = running_job(c, "report");
	running_job(c, "other");
	t_exec(c, "insert into pgjob.jobs (queue, kind, state, locked_until)"
		  " values ('exports', 'report', 'running',"
		  "  now() - interval '1 minute')");
	const char *argv[] = {t_bin("pgjob"), "--database", ci,
			      "pause",	      "exports",    "--kind",
			      "report",	      "--wait",	    NULL};
	pid_t pid = t_spawn(t_log("wait"), NULL, argv);
	t_wait_log("wait",
		   "1 job of kind report of queue exports still "
		   "running",
		   1, 10);
	t_sleep_ms(300);
	assert_true(t_alive(pid));
	t_exec(c,
	       "update pgjob.jobs set state = 'done', finished_at = now(),"
	       " locked_by = null, locked_until = null where id = %lld",
	       id);
	assert_int_equal(t_wait(pid, 10), 0);
	char *log = t_read_file(t_log("wait"));
	assert_non_null(strstr(log, "paused kind report of queue exports\n"));
	assert_non_null(strstr(log, "no job of kind report of queue exports "
				    "is running\n"));
	assert_null(strstr(log, "pgjob:"));
	free(log);
	PQfinish(c);
}

/* With --timeout, a job that does not end makes pause --wait fail; the
 * queue stays paused. */
static void
test_pause_wait_timeout(void **state)
{
	PGconn *c = t_connect(ci);
	running_job(c, "report");
	struct t_run r;
	const char *args[] = {"pause",	   "exports", "--wait",
			      "--timeout", "1s",      NULL};
	t_pgjobv(&r, ci, args);
	assert_int_equal(r.status, 1);
	assert_non_null(strstr(r.out, "paused queue exports\n"
				      "1 job of queue exports still "
				      "running\n"));
	assert_string_equal(r.err, "pgjob: pause: 1 job of queue exports "
				   "still running after 1s (it stays paused: "
				   "`pgjob resume` undoes that)\n");
	t_run_free(&r);
	t_assert_value(c, "t", "select paused from pgjob.limits");

	/* Nothing running: it returns at once. */
	t_exec(c, "update pgjob.jobs set state = 'done'");
	const char *none[] = {"pause",	   "exports", "--wait",
			      "--timeout", "0s",      NULL};
	pgjob_ok(&r, none);
	assert_string_equal(r.out, "paused queue exports\n"
				   "no job of queue exports is running\n");
	t_run_free(&r);
	PQfinish(c);
}

static void
test_usage(void **state)
{
	static const struct {
		const char *args[8];
		const char *err;
	} cases[] = {
		{{"pause"}, "pause: missing QUEUE\n"},
		{{"resume"}, "resume: missing QUEUE\n"},
		{{"pause", "a", "b"}, "pause: unexpected argument \"b\"\n"},
		{{"pause", "a", "--timeout", "5s"},
		 "pause: --timeout goes with --wait\n"},
		{{"pause", "a", "--wait", "--timeout", "soon"},
		 "pause: bad --timeout \"soon\" (not a number; use 30s, 5m, "
		 "2h)\n"},
		{{"pause", "a", "--kind"},
		 "pause: option \"--kind\" needs a value\n"},
		{{"resume", "a", "--wait"},
		 "resume: unknown option \"--wait\"\n"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char err[256];
		snprintf(err, sizeof(err), "pgjob: %s", cases[i].err);
		expect(2, "", err, cases[i].args);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_pause_resume, empty),
		cmocka_unit_test_setup(test_pause_refused, empty),
		cmocka_unit_test_setup(test_pause_wait, empty),
		cmocka_unit_test_setup(test_pause_wait_timeout, empty),
		cmocka_unit_test(test_usage),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
