/*
 * Process handlers (docs/handlers.md, "process"): long-running programs
 * that speak protocol 1 on their standard streams, here the Python client
 * (clients/python) running tests/fixtures/process/handlers.py, against the
 * real daemon and database.  Faults kill the program, hang it and make it
 * write garbage; the worker must survive each and the job run again.
 */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "testlib.h"

/* The handler entry for kind: the fixture program, with extra YAML. */
static char *
handler(const char *kind, const char *extra)
{
	return xasprintf("  %s: { type: process, command: [\"python3\", "
			 "\"%s\"], env: [\"PYTHONPATH=%s\", \"MARKS=%s\"]%s%s "
			 "}\n",
			 kind, t_src("tests/fixtures/process/handlers.py"),
			 t_src("clients/python"), t_tmpdir(), extra ? ", " : "",
			 extra ? extra : "");
}

/* A config of one worker with the handlers given (NULL-terminated pairs
 * kind, extra). */
static pid_t
start(const char *name, const char *ci, const char *top, ...)
{
	va_list ap;
	struct buf b = {0};
	const char *kind;
	pid_t p;

	buf_appendf(&b,
		    "workers: 1\n%s"
		    "defaults: { backoff: { base: 100ms, max: 200ms } }\n"
		    "handlers:\n",
		    top ? top : "");
	va_start(ap, top);
	while ((kind = va_arg(ap, const char *))) {
		char *h = handler(kind, va_arg(ap, const char *));
		buf_appendf(&b, "%s", h);
		free(h);
	}
	va_end(ap);
	p = t_start(name, ci, "%s", b.data);
	buf_free(&b);
	return p;
}

static char *
mark_path(const char *name)
{
	return xasprintf("%s/%s", t_tmpdir(), name);
}

static void
unmark(const char *name)
{
	char *p = mark_path(name);
	unlink(p);
	free(p);
}

/* The pid a copy wrote to the mark name (unmarked before it started). */
static pid_t
copy_pid(const char *name)
{
	char *path = mark_path(name);
	pid_t pid = t_pid_in_file(path, 30);

	free(path);
	return pid;
}

/*
 * What every test here starts from, set up and taken down by cmocka
 * (setup() and teardown(), main()): a migrated database of its own, named
 * in main(), a connection to it, and the pgjobd the test starts, which
 * teardown() stops cleanly unless the test did (stop()).
 */
struct ptest {
	char *ci;
	PGconn *c;
	pid_t p; /* 0: none running */
};

static int
setup(void **state)
{
	struct ptest *t = xcalloc(1, sizeof(*t));

	t->ci = t_db_migrated(*state);
	t->c = t_connect(t->ci);
	*state = t;
	return 0;
}

/* SIGTERM to t's pgjobd, which must exit 0. */
static void
stop(struct ptest *t)
{
	pid_t p = t->p;

	t->p = 0;
	t_stop_clean(p);
}

static int
teardown(void **state)
{
	struct ptest *t = *state;

	if (t->p > 0)
		stop(t);
	PQfinish(t->c);
	free(t->ci);
	free(t);
	return 0;
}

static void
test_basics(void **state)
{
	struct ptest *t = *state;
	PGconn *c = t->c;
	long long n = t_long(c, "select pgjob.enqueue('noop', '{\"n\": 7}')");
	long long f = t_long(c, "select pgjob.enqueue('fail', '{\"n\": 3}')");
	long long s = t_long(c, "select pgjob.enqueue('snooze')");
	long long g = t_long(c, "select pgjob.enqueue('progress')");
	long long x = t_long(c, "select pgjob.enqueue('nan')");
	long long u = t_long(c, "select pgjob.enqueue('surrogate')");
	long long i = t_long(c, "select pgjob.enqueue('inline')");
	long long e = t_long(c, "select pgjob.enqueue('sysexit')");
	t->p = start("basics", t->ci, "log: { level: debug }\n", "noop", NULL,
		     "fail", "max_attempts: 1", "snooze", NULL, "progress",
		     NULL, "nan", "max_attempts: 1", "surrogate",
		     "max_attempts: 1", "inline", NULL, "sysexit",
		     "max_attempts: 1", NULL);

	t_wait_state(c, n, "done", 30);
	t_assert_job(c, n, "result->>'n'", "7");
	/* A plain function runs in the client's threads; one registered
	 * inline=True on its loop, the main thread. */
	t_assert_job(c, n, "result->>'main'", "false");
	t_wait_state(c, i, "done", 30);
	t_assert_job(c, i, "result->>'main'", "true");
	/* sys.exit() in a plain function fails its job, not the copy. */
	t_wait_state(c, e, "dead", 30);
	t_assert_job_has(c, e, "last_error", "SystemExit: 3");
	/* An exception: its message first, then the traceback. */
	t_wait_state(c, f, "dead", 30);
	t_assert_job_has(c, f, "last_error", "ValueError: bad input 3",
			 "Traceback (most recent call last)", "handlers.py");
	/* A snooze: back to available, due in ten minutes. */
	t_wait_until(c, 30,
		     "select state = 'available' and run_at > now() + "
		     "interval '9 minutes' from pgjob.all_jobs where id = %lld",
		     s);
	/* Not a failure: the attempt given back, no error written. */
	t_wait_until(
		c, 30,
		"select attempts = 0 and snoozes = 1 and last_error is null"
		" from pgjob.jobs where id = %lld",
		s);
	t_wait_state(c, g, "done", 30);
	/* What JSON cannot carry fails the job, not the program. */
	t_wait_state(c, x, "dead", 30);
	t_assert_job_has(c, x, "last_error", "not JSON compliant");
	t_wait_state(c, u, "dead", 30);
	t_assert_job_has(c, u, "last_error", "ValueError: bad name ?");
	assert_int_equal(t_log_count("basics", "protocol violation"), 0);
	t_wait_log("basics", "progress {\\\"done\\\":1,\\\"of\\\":2}", 1, 10);
	/* stderr (print()) reached the log with the job's context. */
	char *needle = xasprintf("job=%lld kind=fail", f);
	t_wait_log("basics", needle, 1, 10);
	t_wait_log("basics", "about to fail job", 1, 10);
	free(needle);
	/* A drain ends the copies with a shutdown message: they exit by
	 * themselves (the fixture marks a clean end). */
	char *pid = t_job(c, n, "result->>'pid'");
	char *name = xasprintf("shutdown.%s", pid);
	unmark(name);
	stop(t);
	char *path = mark_path(name);
	t_wait_file(path, 10);
	assert_int_equal(t_log_count("basics", "sending SIGTERM"), 0);
	free(path);
	free(name);
	free(pid);
}

static void
test_asyncio_concurrency(void **state)
{
	struct ptest *t = *state;
	PGconn *c = t->c;
	for (int i = 0; i < 4; i++)
		t_exec(c, "select pgjob.enqueue('together', '{\"n\": 4}')");
	t->p = start("together", t->ci, NULL, "together",
		     "copies: 1, concurrency: 4", NULL);
	/* Each job waits until all four are in flight at once, in one copy:
	 * one process. */
	t_wait_done(c, 4, 60);
	t_assert_value(c, "1",
		       "select count(distinct result->>'pid') from "
		       "pgjob.all_jobs");
	stop(t);
}

static void
test_killed_mid_job(void **state)
{
	struct ptest *t = *state;
	PGconn *c = t->c;
	unmark("crashy.pid");
	long long id = t_long(c, "select pgjob.enqueue('crashy')");
	t->p = start("killed", t->ci, NULL, "crashy", NULL, NULL);
	pid_t copy = copy_pid("crashy.pid");
	pid_t worker = t_holder_pid(c, id);
	kill(copy, SIGKILL);
	/* The attempt ends as failed and runs again, in a new copy. */
	t_wait_state(c, id, "done", 30);
	t_assert_job(c, id, "attempts", "2");
	t_assert_value(c, "killed by signal 9",
		       "select substring(error from 'killed by signal 9') "
		       "from pgjob.attempts where job_id = %lld and "
		       "attempt = 1",
		       id);
	char *pid = t_job(c, id, "result->>'pid'");
	assert_int_not_equal(atoi(pid), copy);
	/* The same worker throughout. */
	assert_true(t_alive(worker));
	t_assert_value(c, "1", "select count(*) from pgjob.workers");
	free(pid);
	stop(t);
}

static void
test_timeouts(void **state)
{
	struct ptest *t = *state;
	PGconn *c = t->c;
	unmark("hang_sync.pid");
	unmark("hang_async.pid");
	unmark("hang_async.cancel");
	long long hs = t_long(c, "select pgjob.enqueue('hang_sync')");
	long long ha = t_long(c, "select pgjob.enqueue('hang_async')");
	t->p = start("timeout", t->ci, NULL, "hang_sync", "timeout: 1s",
		     "hang_async", "timeout: 1s", NULL);
	pid_t scopy = copy_pid("hang_sync.pid");
	pid_t acopy = copy_pid("hang_async.pid");
	pid_t worker = t_holder_pid(c, hs);

	/* A coroutine gets the cancel and ends: its copy stays. */
	t_wait_state(c, ha, "done", 30);
	char *cancel = mark_path("hang_async.cancel");
	char *reason = t_read_file(cancel);
	assert_non_null(reason);
	assert_string_equal(reason, "timeout");
	char *pid = t_job(c, ha, "result->>'pid'");
	assert_int_equal(atoi(pid), acopy);
	t_assert_value(c, "t",
		       "select error like 'timed out after 1s%%' from "
		       "pgjob.attempts where job_id = %lld and attempt = 1",
		       ha);
	/* A thread cannot be cancelled: a second later its copy is killed,
	 * and the job runs again in a new one. */
	t_wait_state(c, hs, "done", 30);
	t_assert_value(c, "t",
		       "select error like 'timed out after 1s; its process "
		       "handler was killed%%' from pgjob.attempts where "
		       "job_id = %lld and attempt = 1",
		       hs);
	t_wait_gone(scopy, 10);
	t_wait_log("timeout", "still running 1s after its cancel", 1, 10);
	assert_true(t_alive(worker));
	free(pid);
	free(reason);
	free(cancel);
	stop(t);
}

static void
test_malformed_reply(void **state)
{
	struct ptest *t = *state;
	PGconn *c = t->c;
	unmark("garbage.pid");
	long long id = t_long(c, "select pgjob.enqueue('garbage')");
	t->p = start("garbage", t->ci, NULL, "garbage", NULL, NULL);
	pid_t copy = copy_pid("garbage.pid");
	pid_t worker = t_holder_pid(c, id);

	t_wait_state(c, id, "done", 30);
	t_assert_job(c, id, "attempts", "2");
	t_assert_value(c, "t",
		       "select error like 'process handler ended: protocol "
		       "violation: a line that is not one JSON object%%' "
		       "from pgjob.attempts where job_id = %lld and "
		       "attempt = 1",
		       id);
	t_wait_gone(copy, 10);
	assert_true(t_alive(worker));
	stop(t);
}

static void
test_cancel_reaches_it(void **state)
{
	struct ptest *t = *state;
	PGconn *c = t->c;
	struct t_run r;
	char ids[32];
	unmark("hang_async.pid");
	unmark("hang_async.cancel");
	long long id = t_long(c, "select pgjob.enqueue('hang_async')");
	t->p = start("cancel", t->ci, "lease: 3s\n", "hang_async", NULL, NULL);
	copy_pid("hang_async.pid");
	snprintf(ids, sizeof(ids), "%lld", id);
	t_pgjob(&r, t->ci, "cancel", ids, NULL);
	assert_int_equal(r.status, 0);
	t_run_free(&r);
	/* At its next renewal the worker sees it and tells the copy. */
	char *cancel = mark_path("hang_async.cancel");
	t_wait_file(cancel, 30);
	char *reason = t_read_file(cancel);
	assert_string_equal(reason, "cancelled");
	t_assert_job(c, id, "state", "cancelled");
	free(reason);
	free(cancel);
	stop(t);
}

static void
test_drain_finishes_jobs(void **state)
{
	struct ptest *t = *state;
	PGconn *c = t->c;
	unmark("slow.started");
	long long id = t_long(c, "select pgjob.enqueue('slow', '{\"s\": 1}')");
	t->p = start("drain", t->ci, NULL, "slow", NULL, NULL);
	pid_t copy = copy_pid("slow.started");
	/* SIGTERM while it runs: the job finishes, then the copy is told to
	 * shut down, and pgjobd exits 0. */
	stop(t);
	t_assert_job(c, id, "state", "done");
	t_wait_gone(copy, 5);
	char *name = xasprintf("%s/shutdown.%d", t_tmpdir(), (int)copy);
	char *clean = t_read_file(name);
	assert_non_null(clean);
	free(clean);
	free(name);
}

static void
test_crash_loop(void **state)
{
	struct ptest *t = *state;
	PGconn *c = t->c;
	long long id = t_long(c, "select pgjob.enqueue('broken')");
	int port = t_free_port();
	t->p = t_start(
		"crashloop", t->ci,
		"workers: 1\n"
		"lease: 3s\n"
		"metrics: { listen: \"127.0.0.1:%d\" }\n"
		"defaults: { backoff: { base: 100ms, max: 200ms } }\n"
		"handlers:\n"
		"  broken: { type: process, max_attempts: 3, command: "
		"[\"/bin/sh\", \"-c\", \"echo boom at start >&2; exit 3\"] }\n",
		port);
	/* A program that dies before its hello fails the job waiting for
	 * it, with its stderr, each start later than the one before. */
	t_wait_state(c, id, "dead", 30);
	t_assert_job_has(c, id, "last_error",
			 "process handler could not start: exit status 3: "
			 "boom at start");
	t_wait_log("crashloop", "crash loop: its program ended 3 times", 1, 10);
	/* Counted for /metrics. */
	char *m = t_http_get(port, "/metrics");
	assert_non_null(m);
	assert_non_null(strstr(m, "\npgjobd_process_crashes_total 3\n"));
	free(m);
	/* Seen outside the host: the heartbeat writes the count and the kind
	 * in a crash loop to the worker's row, which `pgjob status`, its
	 * JSON and the console's overview read. */
	t_wait_until(c, 30,
		     "select process_crashes >= 3 and crash_loops = '{broken}'"
		     " from pgjob.workers");
	struct t_run r;
	t_pgjob(&r, t->ci, "status", NULL);
	assert_int_equal(r.status, 0);
	if (!strstr(r.out, "crash loop: worker ") ||
	    !strstr(r.out, ", kind broken ("))
		fail_msg("pgjob status says no crash loop:\n%s", r.out);
	t_run_free(&r);
	t_pgjob(&r, t->ci, "status", "--json", NULL);
	assert_int_equal(r.status, 0);
	if (!strstr(r.out, "\"crash_loops\":[\"broken\"]") &&
	    !strstr(r.out, "\"crash_loops\": [\"broken\"]"))
		fail_msg("pgjob status --json has no crash_loops:\n%s", r.out);
	t_run_free(&r);
	stop(t);
}

static void
test_recycled_after_max_jobs(void **state)
{
	struct ptest *t = *state;
	PGconn *c = t->c;
	for (int i = 0; i < 3; i++)
		t_exec(c, "select pgjob.enqueue('noop')");
	t->p = start("recycle", t->ci, NULL, "noop", "copies: 1, max_jobs: 2",
		     NULL);
	/* One copy at a time, two jobs each: two processes for three
	 * jobs. */
	t_wait_done(c, 3, 30);
	t_assert_value(c, "2",
		       "select count(distinct result->>'pid') from "
		       "pgjob.all_jobs");
	t_wait_log("recycle", "recycled after 2 jobs", 1, 10);
	stop(t);
	/* Past max_memory (a Python's resident set is more than 1 MiB):
	 * a new program for every job. */
	for (int i = 0; i < 2; i++)
		t_exec(c, "select pgjob.enqueue('noop_mem')");
	t->p = start("recycle_mem", t->ci, NULL, "noop_mem",
		     "copies: 1, max_memory: 1MiB", NULL);
	t_wait_until(c, 30,
		     "select count(*) = 2 from pgjob.all_jobs where state = "
		     "'done' and kind = 'noop_mem'");
	t_assert_value(c, "2",
		       "select count(distinct result->>'pid') from "
		       "pgjob.all_jobs where kind = 'noop_mem'");
	t_wait_log("recycle_mem", "over max_memory", 2, 10);
	stop(t);
}

/* The Node and Ruby clients: done, failed with the message, snooze, and a
 * copy killed mid-job.  prog: the interpreter; client: the client file. */
static void
other_language(struct ptest *t, const char *lang, const char *prog,
	       const char *fixture, const char *client)
{
	PGconn *c = t->c;
	char *pidname = xasprintf("%s.crashy.pid", lang);
	char *pidpath = mark_path(pidname);
	struct buf b = {0};
	const char *kinds[] = {"noop", "fail", "snooze", "crashy", "trace"};

	unlink(pidpath);
	long long n = t_long(c, "select pgjob.enqueue('noop', '{\"n\": 5}')");
	long long f = t_long(c, "select pgjob.enqueue('fail', '{\"n\": 2}')");
	long long s = t_long(c, "select pgjob.enqueue('snooze')");
	long long k = t_long(c, "select pgjob.enqueue('crashy')");
	/* The job object's traceparent: the job's trace, the attempt's span
	 * (docs/tracing.md). */
	long long tr = t_long(c, "select pgjob.enqueue('trace', traceparent =>"
				 " '00-0af7651916cd43dd8448eb211c80319c-"
				 "b7ad6b7169203331-01')");
	buf_appendf(&b, "workers: 1\n"
			"defaults: { backoff: { base: 100ms, max: 200ms } }\n"
			"handlers:\n");
	for (size_t i = 0; i < 5; i++)
		buf_appendf(&b,
			    "  %s: { type: process, command: [\"%s\", \"%s\"],"
			    " env: [\"CLIENT=%s\", \"MARKS=%s\"]%s }\n",
			    kinds[i], prog, t_src(fixture), t_src(client),
			    t_tmpdir(), i == 1 ? ", max_attempts: 1" : "");
	/* Ruby: an Exception that is not a StandardError. */
	bool ruby = strcmp(lang, "ruby") == 0;
	long long e = 0;
	if (ruby) {
		e = t_long(c, "select pgjob.enqueue('exception')");
		buf_appendf(&b,
			    "  exception: { type: process, command: [\"%s\","
			    " \"%s\"], env: [\"CLIENT=%s\"], max_attempts: 1,"
			    " concurrency: 1 }\n",
			    prog, t_src(fixture), t_src(client));
	}
	t->p = t_start(lang, t->ci, "%s", b.data);

	t_wait_state(c, n, "done", 30);
	t_assert_job(c, n, "result->>'n'", "5");
	t_wait_state(c, tr, "done", 30);
	t_assert_job(c, tr,
		     "result->>'traceparent' ~ "
		     "'^00-0af7651916cd43dd8448eb211c80319c-"
		     "[0-9a-f]{16}-01$' and result->>'traceparent' !~ "
		     "'b7ad6b7169203331'",
		     "t");
	if (ruby) {
		t_wait_state(c, e, "dead", 30);
		t_assert_job_has(c, e, "last_error", "plain exception");
	}
	t_wait_state(c, f, "dead", 30);
	t_assert_job_has(c, f, "last_error", "bad input 2");
	t_wait_until(c, 30,
		     "select state = 'available' and run_at > now() + "
		     "interval '9 minutes' from pgjob.all_jobs where id = %lld",
		     s);
	t_wait_until(c, 30,
		     "select attempts = 0 and snoozes = 1 from pgjob.jobs"
		     " where id = %lld",
		     s);
	pid_t copy = t_pid_in_file(pidpath, 30);
	kill(copy, SIGKILL);
	t_wait_state(c, k, "done", 30);
	t_assert_job(c, k, "attempts", "2");
	t_assert_value(c, "killed by signal 9",
		       "select substring(error from 'killed by signal 9') "
		       "from pgjob.attempts where job_id = %lld and "
		       "attempt = 1",
		       k);
	t_wait_log(lang, "about to fail job", 1, 10);
	stop(t);
	buf_free(&b);
	free(pidpath);
	free(pidname);
}

static void
test_node_client(void **state)
{
	other_language(*state, "node", "node",
		       "tests/fixtures/process/handlers.js",
		       "clients/node/pgjobd-handler.js");
}

static void
test_ruby_client(void **state)
{
	other_language(*state, "ruby", "ruby",
		       "tests/fixtures/process/handlers.rb",
		       "clients/ruby/pgjobd_handler.rb");
}

/* What a copy writes is checked: each violation ends that copy only, and
 * the job's attempt says which.  A place for every job at once: copies
 * that keep ending without an answer are restarted ever later. */
static void
test_protocol_violations(void **state)
{
	static const struct {
		const char *line, *error;
	} cases[] = {
		{"{\"type\":\"done\",\"id\":{id},\"result\":{\"ok\":true}}",
		 NULL},
		{"{\"type\":\"done\",\"id\":999999}",
		 "id 999999 is not a job this copy holds"},
		{"{\"type\":\"done\"}", "done without a numeric id"},
		{"{\"type\":\"failed\",\"id\":{id}}",
		 "failed without an error string"},
		{"{\"type\":\"failed\",\"id\":{id},\"error\":\"x\","
		 "\"retry_in\":\"soon\"}",
		 "retry_in is not seconds or a duration"},
		{"{\"type\":\"snooze\",\"id\":{id},\"in\":-1}",
		 "snooze without \"in\" as seconds or a duration"},
		{"{\"type\":\"bogus\",\"id\":{id}}",
		 "unknown message type bogus"},
		{"{\"id\":{id}}", "a message without a type"},
		{"[1, 2]", "a line that is not one JSON object"},
		{"{\"type\":\"done\",\"id\":{id}} {}",
		 "a line that is not one JSON object"},
		{"{\"type\":\"hello\",\"protocol\":1,\"kinds\":[\"raw\"]}",
		 "a second hello"},
	};
	size_t n = sizeof(cases) / sizeof(cases[0]);
	long long ids[16], lg, bin, h2, hk, nh;
	struct ptest *t = *state;
	PGconn *c = t->c;
	const char *raw = t_src("tests/fixtures/process/raw.py");

	for (size_t i = 0; i < n; i++) {
		PGresult *r;
		const char *v[1] = {cases[i].line};
		r = PQexecParams(c,
				 "select pgjob.enqueue('raw', "
				 "jsonb_build_object('line', $1::text))",
				 1, NULL, v, NULL, NULL, 0);
		assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
		ids[i] = atoll(PQgetvalue(r, 0, 0));
		PQclear(r);
	}
	lg = t_long(c, "select pgjob.enqueue('raw', '{\"long\": 5000}')");
	bin = t_long(c, "select pgjob.enqueue('raw', '{\"binary\": 1}')");
	h2 = t_long(c, "select pgjob.enqueue('hello2')");
	hk = t_long(c, "select pgjob.enqueue('hellokind')");
	nh = t_long(c, "select pgjob.enqueue('nohello')");
	t->p = t_start(
		"protocol", t->ci,
		"workers: 1\n"
		"queues: { default: { concurrency: 16 } }\n"
		"handlers:\n"
		"  raw: { type: process, command: [python3, \"%s\"],"
		" max_line_bytes: 1024, max_attempts: 1, copies: 16 }\n"
		"  hello2: { type: process, max_attempts: 1, command: [python3,"
		" \"%s\", '{\"type\":\"hello\",\"protocol\":2,\"kinds\":"
		"[\"hello2\"]}'] }\n"
		"  hellokind: { type: process, max_attempts: 1, command: "
		"[python3, \"%s\", '{\"type\":\"hello\",\"protocol\":1,"
		"\"kinds\":[\"other\"]}'] }\n"
		"  nohello: { type: process, max_attempts: 1, command: "
		"[python3,"
		" \"%s\", '{\"type\":\"done\",\"id\":1}'] }\n",
		raw, raw, raw, raw);

	t_wait_state(c, ids[0], "done", 30);
	t_assert_job(c, ids[0], "result::text", "{\"ok\": true}");
	for (size_t i = 1; i < n; i++) {
		char *want = xasprintf("process handler ended: protocol "
				       "violation: %s",
				       cases[i].error);
		t_wait_state(c, ids[i], "dead", 30);
		t_assert_job_has(c, ids[i], "last_error", want);
		free(want);
	}
	t_wait_state(c, lg, "dead", 30);
	t_assert_job_has(c, lg, "last_error",
			 "protocol violation: a line longer than "
			 "max_line_bytes (1024)");
	/* Quoted in the error as text PostgreSQL takes. */
	t_wait_state(c, bin, "dead", 30);
	t_assert_job_has(c, bin, "last_error",
			 "protocol violation: a line that is not one JSON "
			 "object");
	t_wait_state(c, h2, "dead", 30);
	t_assert_job_has(c, h2, "last_error",
			 "process handler could not start: protocol "
			 "violation: protocol 2 is not one this pgjobd speaks "
			 "(1)");
	t_wait_state(c, hk, "dead", 30);
	t_assert_job_has(c, hk, "last_error",
			 "the program does not handle kind hellokind");
	t_wait_state(c, nh, "dead", 30);
	t_assert_job_has(c, nh, "last_error", "done before hello");
	/* One worker throughout. */
	t_assert_value(c, "0",
		       "select count(*) from pgjob.attempts where outcome = "
		       "'lost'");
	assert_int_equal(t_log_count("protocol", "exited with status"), 0);
	stop(t);
}

/* A second stop signal: the copy gets the cancel, does not end the job,
 * is killed after the grace, and the job goes back to the queue with its
 * attempt given back. */
static void
test_stop_now(void **state)
{
	struct ptest *t = *state;
	PGconn *c = t->c;
	unmark("hang_sync.pid");
	long long id = t_long(c, "select pgjob.enqueue('hang_sync')");
	t->p = start("stopnow", t->ci, NULL, "hang_sync", "timeout: 60s", NULL);
	pid_t copy = copy_pid("hang_sync.pid");

	kill(t->p, SIGTERM);
	t_wait_log("stopnow", "draining: 1 jobs held", 1, 10);
	kill(t->p, SIGTERM);
	assert_int_equal(t_wait(t->p, 30), 0);
	t->p = 0;
	t_wait_gone(copy, 5);
	t_assert_job(c, id, "state || '|' || attempts", "available|0");
	t_wait_log("stopnow", "still running 5s after its cancel", 1, 1);
}

/* A program that never says hello is killed at startup_timeout, and the
 * job waiting for it fails with that. */
static void
test_startup_timeout(void **state)
{
	struct ptest *t = *state;
	PGconn *c = t->c;
	long long id = t_long(c, "select pgjob.enqueue('mute')");
	t->p = t_start("startup", t->ci,
		       "workers: 1\n"
		       "handlers:\n"
		       "  mute: { type: process, max_attempts: 1,"
		       " startup_timeout: 1s, command: [/bin/sleep, 60] }\n");
	t_wait_state(c, id, "dead", 30);
	t_assert_job_has(c, id, "last_error",
			 "process handler could not start: no hello within "
			 "startup_timeout (1s)");
	stop(t);
}

/* A reload retires the old worker: once it holds no job, its copies get
 * the shutdown message and exit by themselves; the new worker starts its
 * own. */
static void
test_reload(void **state)
{
	struct ptest *t = *state;
	PGconn *c = t->c;
	long long a = t_long(c, "select pgjob.enqueue('noop')");
	t->p = start("reload", t->ci, NULL, "noop", NULL, NULL);

	t_wait_state(c, a, "done", 30);
	char *pid = t_job(c, a, "result->>'pid'");
	char *name = xasprintf("shutdown.%s", pid);
	char *path = mark_path(name);
	unlink(path);
	kill(t->p, SIGHUP);
	t_wait_file(path, 30);
	long long b = t_long(c, "select pgjob.enqueue('noop')");
	t_wait_state(c, b, "done", 30);
	char *pid2 = t_job(c, b, "result->>'pid'");
	assert_string_not_equal(pid, pid2);
	stop(t);
	free(pid2);
	free(path);
	free(name);
	free(pid);
}

/* A job in a copy is held as any: its lease is renewed while it runs
 * longer than the lease. */
static void
test_lease_renewed(void **state)
{
	struct ptest *t = *state;
	PGconn *c = t->c;
	long long id = t_long(c, "select pgjob.enqueue('slow', '{\"s\": 3}')");
	t->p = start("lease", t->ci, "lease: 1s\n", "slow", NULL, NULL);

	t_wait_state(c, id, "done", 30);
	t_assert_job(c, id, "attempts || '|' || lease_token", "1|1");
	assert_int_equal(t_log_count("lease", "lease lost"), 0);
	stop(t);
}

/* A test and the database setup() makes for it. */
#define T(f, db)                                                               \
	cmocka_unit_test_prestate_setup_teardown(f, setup, teardown, db)

int
main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_basics, "t_process_basics"),
		T(test_asyncio_concurrency, "t_process_together"),
		T(test_killed_mid_job, "t_process_killed"),
		T(test_timeouts, "t_process_timeout"),
		T(test_malformed_reply, "t_process_garbage"),
		T(test_cancel_reaches_it, "t_process_cancel"),
		T(test_drain_finishes_jobs, "t_process_drain"),
		T(test_stop_now, "t_process_stopnow"),
		T(test_startup_timeout, "t_process_startup"),
		T(test_reload, "t_process_reload"),
		T(test_lease_renewed, "t_process_lease"),
		T(test_crash_loop, "t_process_crashloop"),
		T(test_recycled_after_max_jobs, "t_process_recycle"),
		T(test_protocol_violations, "t_process_protocol"),
		T(test_node_client, "t_process_node"),
		T(test_ruby_client, "t_process_ruby"),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
