/*
 * test_handler_plugin: plugin handlers, loaded for real with dlopen(): the
 * example plugin (pgjobd_example.so) and the misbehaving ones of
 * tests/fixtures/handlers/test_plugins.c (pgjobd_test_plugins.so), both in
 * the build root ($PGJOBD_TEST_BIN).
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <ev.h>

#include "common/config.h"
#include "handlers/handler.h"
#include "common/log.h"
#include "common/util.h"

static char example_so[4096];
static char test_so[4096];

/* The handlers of the test config, by index. */
enum {
	H_EXAMPLE,
	H_ECHO_CONFIG,
	H_ECHO_JOB,
	H_BAD_RESULT,
	H_WEIRD,
	H_BAD_ABI,
	H_NO_LIBRARY,
	H_NO_SYMBOL,
	H_INIT_FAILS,
	H_NO_RUN,
	H_SPIN,
	H_CATCH_ALARM,
	H_COUNT
};

static struct handler_conf handlers[H_COUNT];
static struct config cfg = {.handlers = handlers, .nhandlers = H_COUNT};

struct outcome {
	struct ev_loop *loop;
	int calls;
	struct handler_result res;
};

static void
plugin_conf(int i, const char *kind, const char *lib, const char *sym)
{
	handlers[i] = (struct handler_conf){
		.kind = (char *)kind,
		.type = HANDLER_PLUGIN,
		.queue = "default",
		.timeout_ms = 5000,
		.library = (char *)lib,
		.symbol = (char *)sym,
		.plugin_config = "{}",
	};
}

static int
setup(void **state)
{
	plugin_conf(H_EXAMPLE, "example", example_so, "pgjobd_example");
	plugin_conf(H_ECHO_CONFIG, "echo_config", test_so, "echo_config");
	handlers[H_ECHO_CONFIG].plugin_config = "{\"quality\": 80}";
	plugin_conf(H_ECHO_JOB, "echo_job", test_so, "echo_job");
	plugin_conf(H_BAD_RESULT, "bad_result", test_so, "bad_result");
	plugin_conf(H_WEIRD, "weird", test_so, "weird_outcome");
	plugin_conf(H_BAD_ABI, "bad_abi", test_so, "bad_abi");
	plugin_conf(H_NO_LIBRARY, "no_library", "/nonexistent/lib.so",
		    "pgjobd_example");
	plugin_conf(H_NO_SYMBOL, "no_symbol", example_so, "no_such_symbol");
	plugin_conf(H_INIT_FAILS, "init_fails", test_so, "init_fails");
	plugin_conf(H_NO_RUN, "no_run", test_so, "no_run");
	plugin_conf(H_SPIN, "spin", test_so, "spin");
	plugin_conf(H_CATCH_ALARM, "catch_alarm", test_so, "catch_alarm");
	/* Some plugins are unusable: -1, but the others work. */
	assert_int_equal(handler_init(&cfg), -1);
	return 0;
}

static int
teardown(void **state)
{
	handler_fini();
	return 0;
}

static void
done_cb(void *arg, struct handler_result *res)
{
	struct outcome *o = arg;

	o->calls++;
	o->res = *res;
	res->result = res->error = NULL;
	ev_break(o->loop, EVBREAK_ALL);
}

/* Runs one job through handlers[h]; stop: handler_stop() at once. */
static void
run_job(int h, const char *payload, bool stop, struct outcome *o)
{
	struct job job = {
		.id = 42,
		.kind = handlers[h].kind,
		.queue = "default",
		.payload = (char *)payload,
		.attempt = 3,
		.max_attempts = 5,
		.lease_token = 777,
		.handler = &handlers[h],
	};
	struct handler_run *run;

	o->loop = ev_loop_new(EVFLAG_AUTO);
	o->calls = 0;
	o->res = (struct handler_result){.outcome = OUTCOME_DONE,
					 .retry_in_ms = -2};
	run = handler_start(o->loop, &job, 4, done_cb, o);
	assert_int_equal(o->calls, 0); /* never from inside handler_start */
	if (stop)
		handler_stop(run, "shutdown");
	assert_int_equal(o->calls, 0);
	ev_run(o->loop, 0);
	ev_loop_destroy(o->loop);
	assert_int_equal(o->calls, 1);
}

static void
test_example_done(void **state)
{
	struct outcome o;

	run_job(H_EXAMPLE, "{}", false, &o);
	assert_int_equal(o.res.outcome, OUTCOME_DONE);
	assert_string_equal(o.res.result, "{\"ok\":true}");
	assert_null(o.res.error);
	assert_int_equal(o.res.retry_in_ms, -1);
	handler_result_clear(&o.res);
}

static void
test_example_retry(void **state)
{
	struct outcome o;

	run_job(H_EXAMPLE, "{\"fail\": \"retry\"}", false, &o);
	assert_int_equal(o.res.outcome, OUTCOME_RETRY);
	assert_string_equal(o.res.error, "example: asked to retry");
	assert_null(o.res.result);
	assert_int_equal(o.res.retry_in_ms, -1);
	handler_result_clear(&o.res);

	run_job(H_EXAMPLE, "{\"retry_in\": 7}", false, &o);
	assert_int_equal(o.res.outcome, OUTCOME_RETRY);
	assert_int_equal(o.res.retry_in_ms, 7000);
	handler_result_clear(&o.res);
}

static void
test_example_dead(void **state)
{
	struct outcome o;

	run_job(H_EXAMPLE, "{\"fail\":\"dead\"}", false, &o);
	assert_int_equal(o.res.outcome, OUTCOME_DEAD);
	assert_string_equal(o.res.error, "example: asked to fail");
	handler_result_clear(&o.res);
}

/* A slow run within its timeout: the hard timer is disarmed after it. */
static void
test_example_slow(void **state)
{
	struct outcome o;

	handlers[H_EXAMPLE].timeout_ms = 300;
	run_job(H_EXAMPLE, "{\"sleep_ms\": 50}", false, &o);
	handlers[H_EXAMPLE].timeout_ms = 5000;
	assert_int_equal(o.res.outcome, OUTCOME_DONE);
	handler_result_clear(&o.res);
	usleep(400 * 1000); /* a SIGALRM left armed would kill us now */
}

/*
 * A worker's lines wait for its loop's turn to end (log_set_buffered());
 * a run that holds the loop longer than the watchdog's tick does not hold
 * them: the watchdog writes them while the run goes on.
 */
static void
test_long_run_writes_waiting_lines(void **state)
{
	struct outcome o;
	int p[2], saved = dup(2);
	char out[8192] = "";

	assert_int_equal(pipe(p), 0);
	dup2(p[1], 2);
	close(p[1]);
	log_set_buffered(1);
	log_info("a line before the run");
	run_job(H_EXAMPLE, "{\"sleep_ms\": 300}", false, &o);
	assert_int_equal(o.res.outcome, OUTCOME_DONE);
	/* Read before anything flushes: what is there, the watchdog wrote
	 * during the run (the run's own line waits, as the loop's would). */
	dup2(saved, 2);
	close(saved);
	ssize_t n = read(p[0], out, sizeof(out) - 1);
	assert_true(n > 0);
	assert_non_null(strstr(out, "a line before the run"));
	handler_result_clear(&o.res);
	log_set_buffered(0);
	close(p[0]);
}

static void
test_job_fields(void **state)
{
	struct outcome o;

	run_job(H_ECHO_JOB, "{\"x\": 1}", false, &o);
	assert_int_equal(o.res.outcome, OUTCOME_RETRY);
	assert_string_equal(o.res.error,
			    "id=42 kind=echo_job queue=default attempt=3 "
			    "token=777 slot=4 len=8 payload={\"x\": 1}");
	assert_int_equal(o.res.retry_in_ms, 1500);
	/* A delay with an error: a failure that chose it, not a snooze. */
	assert_false(o.res.snooze);
	handler_result_clear(&o.res);
}

static void
test_init_gets_config(void **state)
{
	struct outcome o;

	run_job(H_ECHO_CONFIG, "{}", false, &o);
	assert_int_equal(o.res.outcome, OUTCOME_DONE);
	assert_string_equal(o.res.result, "{\"quality\": 80}");
	handler_result_clear(&o.res);
}

static void
test_bad_answers(void **state)
{
	struct outcome o;

	run_job(H_BAD_RESULT, "{}", false, &o);
	assert_int_equal(o.res.outcome, OUTCOME_DONE);
	assert_null(o.res.result); /* not JSON: dropped */
	handler_result_clear(&o.res);

	run_job(H_WEIRD, "{}", false, &o);
	assert_int_equal(o.res.outcome, OUTCOME_RETRY);
	assert_string_equal(o.res.error,
			    "plugin weird_outcome returned an unknown "
			    "outcome 42");
	handler_result_clear(&o.res);
}

static void
check_unusable(int h, const char *want)
{
	struct outcome o;

	run_job(h, "{}", false, &o);
	assert_int_equal(o.res.outcome, OUTCOME_RETRY);
	assert_int_equal(o.res.retry_in_ms, -1);
	if (strncmp(o.res.error, want, strlen(want)) != 0)
		fail_msg("error \"%s\" does not start with \"%s\"", o.res.error,
			 want);
	handler_result_clear(&o.res);
}

static void
test_unusable(void **state)
{
	char want[8192];

	snprintf(want, sizeof(want),
		 "plugin bad_abi: ABI version 99, this pgjobd takes 1 to 2 "
		 "(library %s)",
		 test_so);
	check_unusable(H_BAD_ABI, want);
	check_unusable(H_NO_LIBRARY, "plugin pgjobd_example: cannot load "
				     "library: /nonexistent/lib.so: ");
	snprintf(want, sizeof(want),
		 "plugin no_such_symbol: symbol not found in %s", example_so);
	check_unusable(H_NO_SYMBOL, want);
	check_unusable(H_INIT_FAILS, "plugin init_fails: init failed (7)");
	check_unusable(H_NO_RUN, "plugin no_run: no run function");
}

static void
test_stop_before_run(void **state)
{
	struct outcome o;

	run_job(H_EXAMPLE, "{}", true, &o);
	assert_int_equal(o.res.outcome, OUTCOME_RETRY);
	assert_string_equal(o.res.error, "stopped: shutdown");
	handler_result_clear(&o.res);
}

/* Runs a job of handlers[h] with a 200 ms timeout in a child, as a worker
 * would, and checks that SIGALRM ended the child.  The child has no
 * watchdog thread of its parent's (fork() keeps one thread): its first
 * armed run starts one. */
static void
expect_alarm(int h, const char *payload)
{
	int status = 0;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		struct outcome o;
		handlers[h].timeout_ms = 200;
		run_job(h, payload, false, &o);
		_exit(0); /* not reached */
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGALRM);
}

/* A plugin that outlives its timeout takes its worker down with SIGALRM. */
static void
test_timeout_kills_worker(void **state)
{
	expect_alarm(H_EXAMPLE, "{\"sleep_ms\": 5000}");
}

/* Even a plugin that catches SIGALRM against the rules is stopped: the
 * watchdog sets its default action back before it sends it. */
static void
test_timeout_despite_handler(void **state)
{
	expect_alarm(H_CATCH_ALARM, "{\"ms\": 5000}");
}

/* The CPU time of a run: what the plugin burnt on the worker's thread,
 * and 0 for a run shorter than a millisecond (which skips its second
 * getrusage()). */
static void
test_cpu_time(void **state)
{
	struct outcome o;

	run_job(H_SPIN, "{\"ms\": 30}", false, &o);
	assert_int_equal(o.res.outcome, OUTCOME_DONE);
	assert_true(o.res.measured);
	if (o.res.cpu_ms < 29)
		fail_msg("a run that burnt 30 ms of CPU measured %lld ms",
			 (long long)o.res.cpu_ms);
	handler_result_clear(&o.res);

	run_job(H_SPIN, "{\"ms\": 0}", false, &o);
	assert_int_equal(o.res.outcome, OUTCOME_DONE);
	assert_true(o.res.measured);
	assert_int_equal(o.res.cpu_ms, 0);
	handler_result_clear(&o.res);
}

static void
test_not_loaded(void **state)
{
	struct outcome o;

	handler_fini();
	run_job(H_EXAMPLE, "{}", false, &o);
	assert_int_equal(o.res.outcome, OUTCOME_RETRY);
	assert_string_equal(o.res.error,
			    "plugin handler example is not loaded");
	handler_result_clear(&o.res);
	assert_int_equal(handler_init(&cfg), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_example_done),
		cmocka_unit_test(test_example_retry),
		cmocka_unit_test(test_example_dead),
		cmocka_unit_test(test_example_slow),
		cmocka_unit_test(test_long_run_writes_waiting_lines),
		cmocka_unit_test(test_job_fields),
		cmocka_unit_test(test_init_gets_config),
		cmocka_unit_test(test_bad_answers),
		cmocka_unit_test(test_unusable),
		cmocka_unit_test(test_stop_before_run),
		cmocka_unit_test(test_timeout_kills_worker),
		cmocka_unit_test(test_timeout_despite_handler),
		cmocka_unit_test(test_cpu_time),
		cmocka_unit_test(test_not_loaded),
	};
	const char *bin = getenv("PGJOBD_TEST_BIN");

	if (!bin) {
		fprintf(stderr, "PGJOBD_TEST_BIN is not set: run through "
				"ctest\n");
		return 1;
	}
	snprintf(example_so, sizeof(example_so), "%s/pgjobd_example.so", bin);
	snprintf(test_so, sizeof(test_so), "%s/pgjobd_test_plugins.so", bin);
	log_init("test", LOG_DEBUG, 0);
	return cmocka_run_group_tests(tests, setup, teardown);
}
