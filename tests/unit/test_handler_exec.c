/*
 * test_handler_exec: the exec handler with real child processes (no
 * database): outcomes, stdin/stdout/stderr, environment, descriptors,
 * timeouts, process groups and handler_stop(); and the registry's helpers
 * (durations, UTF-8, JSON checks).
 *
 * The test process makes itself a child subreaper, so the grandchildren
 * that fixture scripts leave behind are reparented to it and it can check
 * how they died.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <ev.h>

#include "common/config.h"
#include "common/pgtext.h"
#include "common/duration.h"
#include "handlers/handler.h"
#include "common/log.h"
#include "common/util.h"

struct outcome {
	struct ev_loop *loop;
	int calls;
	struct handler_result res;
	struct handler_run *run;
	const char *stop_why; /* handler_stop() after stop_after seconds */
	double stop_after;
	bool stop_now; /* handler_stop() right after handler_start() */
};

static char script[4096];

static void
done_cb(void *arg, struct handler_result *res)
{
	struct outcome *o = arg;

	o->calls++;
	o->res = *res; /* take the strings */
	res->result = res->error = NULL;
	/* A stop from inside done does nothing. */
	handler_stop(o->run, "from done");
	ev_break(o->loop, EVBREAK_ALL);
}

static void
guard_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	fail_msg("the run did not complete within 30 s");
}

static void
stop_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct outcome *o = w->data;

	if (o->calls > 0)
		return; /* done ran in this loop iteration: o->run is gone */
	handler_stop(o->run, o->stop_why);
	handler_stop(o->run, "second stop is ignored");
	assert_int_equal(o->calls, 0);
}

/* A config for command (a NULL-terminated argv); env may be NULL. */
static struct handler_conf
conf_for(char **argv, char **env, int64_t timeout_ms)
{
	struct handler_conf h = {0};

	h.kind = "test";
	h.type = HANDLER_EXEC;
	h.queue = "q1";
	h.timeout_ms = timeout_ms;
	h.command.v = argv;
	while (argv[h.command.n])
		h.command.n++;
	if (env) {
		h.env.v = env;
		while (env[h.env.n])
			h.env.n++;
	}
	return h;
}

static void run_it(struct job *job, const struct task_conf *task,
		   struct outcome *o);

/* Runs one job with handler h to completion; o receives the result. */
static void
run_job(const struct handler_conf *h, const char *payload, struct outcome *o)
{
	struct job job = {
		.id = 42,
		.kind = "test",
		.queue = "q1",
		.payload = (char *)payload,
		.attempt = 2,
		.max_attempts = 5,
		.lease_token = 777,
		.handler = h,
	};

	run_it(&job, NULL, o);
}

/* Runs job, or partition 2 of task (fencing token 9), to completion; o
 * receives the result. */
static void
run_it(struct job *job, const struct task_conf *task, struct outcome *o)
{
	ev_timer guard, stop;

	o->loop = ev_loop_new(EVFLAG_AUTO);
	o->calls = 0;
	o->res = (struct handler_result){.outcome = OUTCOME_DONE,
					 .retry_in_ms = -2};
	o->run = task ? handler_start_task(o->loop, task, 2, 9, 3, done_cb, o)
		      : handler_start(o->loop, job, 3, done_cb, o);
	assert_non_null(o->run);
	assert_int_equal(o->calls, 0); /* never from inside handler_start */
	if (o->stop_now) {
		handler_stop(o->run, o->stop_why);
		assert_int_equal(o->calls, 0); /* nor handler_stop */
	}
	ev_timer_init(&guard, guard_cb, 30., 0.);
	ev_timer_start(o->loop, &guard);
	ev_timer_init(&stop, stop_cb, o->stop_after, 0.);
	stop.data = o;
	if (o->stop_why && !o->stop_now)
		ev_timer_start(o->loop, &stop);
	ev_run(o->loop, 0);
	ev_timer_stop(o->loop, &guard);
	ev_timer_stop(o->loop, &stop);
	ev_loop_destroy(o->loop);
	assert_int_equal(o->calls, 1);
}

/* Runs behave.sh mode [arg]. */
static void
run_mode(const char *mode, const char *arg, int64_t timeout_ms,
	 struct outcome *o)
{
	char *argv[] = {"/bin/sh", script, (char *)mode, (char *)arg, NULL};
	struct handler_conf h = conf_for(argv, NULL, timeout_ms);

	run_job(&h, "{}", o);
}

static void
test_json_stdout(void **state)
{
	struct outcome o = {0};

	run_mode("json", NULL, 10000, &o);
	assert_int_equal(o.res.outcome, OUTCOME_DONE);
	assert_int_equal(o.res.timed_out, 0);
	assert_string_equal(o.res.result, "{\"a\": 1, \"b\": [true, null]}");
	assert_null(o.res.error);
	assert_int_equal(o.res.retry_in_ms, -1);
	handler_result_clear(&o.res);
}

static void
test_text_stdout(void **state)
{
	struct outcome o = {0};

	run_mode("text", NULL, 10000, &o);
	assert_int_equal(o.res.outcome, OUTCOME_DONE);
	assert_null(o.res.result);
	assert_null(o.res.error);
	handler_result_clear(&o.res);
}

/* What jsonb refuses is no result, and the job is still done. */
static void
test_stdout_jsonb_refuses(void **state)
{
	struct outcome o = {0};

	run_mode("tabjson", NULL, 10000, &o);
	assert_int_equal(o.res.outcome, OUTCOME_DONE);
	assert_null(o.res.result);
	assert_null(o.res.error);
	handler_result_clear(&o.res);
}

static void
test_exit_65_dead(void **state)
{
	struct outcome o = {0};

	run_mode("dead", NULL, 10000, &o);
	assert_int_equal(o.res.outcome, OUTCOME_DEAD);
	assert_string_equal(o.res.error, "exit status 65: bad payload");
	handler_result_clear(&o.res);
}

static void
check_retry_in(const char *value, int64_t want)
{
	struct outcome o = {0};

	run_mode("retry_in", value, 10000, &o);
	assert_int_equal(o.res.outcome, OUTCOME_RETRY);
	assert_int_equal(o.res.retry_in_ms, want);
	/* A readable retry_in is a snooze; without one, a failure. */
	assert_int_equal(o.res.snooze, want >= 0);
	assert_string_equal(o.res.error, "exit status 75");
	assert_null(o.res.result);
	handler_result_clear(&o.res);
}

static void
test_exit_75_retry_in(void **state)
{
	check_retry_in("10", 10000);
	check_retry_in("0.25", 250);
	check_retry_in("\"30s\"", 30000);
	check_retry_in("\"1.5m\"", 90000);
	check_retry_in("\"500ms\"", 500);
	check_retry_in("\"soon\"", -1);
	check_retry_in("-5", -1);
}

static void
test_exit_3_stderr(void **state)
{
	struct outcome o = {0};

	run_mode("fail3", NULL, 10000, &o);
	assert_int_equal(o.res.outcome, OUTCOME_RETRY);
	assert_int_equal(o.res.retry_in_ms, -1);
	assert_string_equal(o.res.error,
			    "exit status 3: something broke\ndetails here");
	handler_result_clear(&o.res);
}

static void
test_stderr_tail(void **state)
{
	struct outcome o = {0};
	const char *prefix = "exit status 3: ...";
	size_t len;

	run_mode("bigerr", NULL, 10000, &o);
	assert_int_equal(o.res.outcome, OUTCOME_RETRY);
	len = strlen(o.res.error);
	assert_memory_equal(o.res.error, prefix, strlen(prefix));
	assert_true(len <= strlen(prefix) + 4096);
	assert_true(len > 4000);
	assert_string_equal(o.res.error + len - 11, "\nlast words");
	assert_null(strstr(o.res.error, "noise line 1\n"));
	assert_non_null(strstr(o.res.error, "noise line 1999\n"));
	handler_result_clear(&o.res);
}

static void
test_signal(void **state)
{
	struct outcome o = {0};

	run_mode("signal", NULL, 10000, &o);
	assert_int_equal(o.res.outcome, OUTCOME_RETRY);
	assert_string_equal(o.res.error, "killed by signal 9");
	handler_result_clear(&o.res);
}

/* 200 KiB through cat: stdin and stdout both need the loop. */
static void
test_stdin_payload(void **state)
{
	char *argv[] = {"/bin/cat", NULL};
	struct handler_conf h = conf_for(argv, NULL, 10000);
	struct outcome o = {0};
	struct buf payload = {0};

	buf_append(&payload, "{\"x\": \"", 7);
	for (int i = 0; i < 200 * 1024; i++)
		buf_append(&payload, "abcdefghijklmnopqrstuvwxyz" + i % 26, 1);
	buf_append(&payload, "\"}", 2);
	run_job(&h, payload.data, &o);
	assert_int_equal(o.res.outcome, OUTCOME_DONE);
	assert_non_null(o.res.result);
	assert_string_equal(o.res.result, payload.data);
	handler_result_clear(&o.res);
	buf_free(&payload);
}

/* A child that does not read its stdin: EPIPE is ignored. */
static void
test_stdin_not_read(void **state)
{
	char *argv[] = {"/bin/true", NULL};
	struct handler_conf h = conf_for(argv, NULL, 10000);
	struct outcome o = {0};
	char *big = xmalloc(1024 * 1024 + 1);

	memset(big, ' ', 1024 * 1024);
	big[1024 * 1024] = '\0';
	run_job(&h, big, &o);
	assert_int_equal(o.res.outcome, OUTCOME_DONE);
	handler_result_clear(&o.res);
	free(big);
}

static int
cmpstr(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void
test_clean_env(void **state)
{
	char *argv[] = {"/bin/sh", "-c", "/usr/bin/env >&2; exit 3", NULL};
	char *env[] = {"FOO=bar baz", "PATH=/opt/x:/usr/bin", "PGJOB_SLOT=99",
		       NULL};
	struct handler_conf h = conf_for(argv, env, 10000);
	struct outcome o = {0};
	const char *want[] = {
		"FOO=bar baz",	   "PATH=/opt/x:/usr/bin",
		"PGJOB_ATTEMPT=2", "PGJOB_JOB_ID=42",
		"PGJOB_KIND=test", "PGJOB_LEASE_TOKEN=777",
		"PGJOB_QUEUE=q1",  "PGJOB_SLOT=3",
	};
	char *lines[32], *save = NULL;
	size_t n = 0;

	/* env's stdout is not JSON and so not kept: have it write to stderr,
	 * which becomes the error text. */
	setenv("PGJOBD_TEST_LEAK", "must not be seen", 1);
	run_job(&h, "{}", &o);
	unsetenv("PGJOBD_TEST_LEAK");
	assert_int_equal(o.res.outcome, OUTCOME_RETRY);
	char *text = o.res.error + strlen("exit status 3: ");
	for (char *l = strtok_r(text, "\n", &save); l && n < 32;
	     l = strtok_r(NULL, "\n", &save))
		lines[n++] = l;
	qsort(lines, n, sizeof(lines[0]), cmpstr);
	/* sh may add PWD; nothing else. */
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (strncmp(lines[i], "PWD=", 4) == 0)
			continue;
		assert_true(k < sizeof(want) / sizeof(want[0]));
		assert_string_equal(lines[i], want[k]);
		k++;
	}
	assert_int_equal(k, sizeof(want) / sizeof(want[0]));
	handler_result_clear(&o.res);
}

static void
test_path_lookup(void **state)
{
	char *argv[] = {"true", NULL};
	struct handler_conf h = conf_for(argv, NULL, 10000);
	struct outcome o = {0};

	run_job(&h, "{}", &o);
	assert_int_equal(o.res.outcome, OUTCOME_DONE);
	handler_result_clear(&o.res);
}

static void
test_missing_executable(void **state)
{
	char *argv[] = {"/nonexistent/prog", "x", NULL};
	char *argv2[] = {"no-such-program-here", NULL};
	char path[4200];
	char *argv3[] = {path, NULL};
	struct handler_conf h = conf_for(argv, NULL, 10000);
	struct outcome o = {0};

	run_job(&h, "{}", &o);
	assert_int_equal(o.res.outcome, OUTCOME_RETRY);
	assert_string_equal(o.res.error, "could not start /nonexistent/prog: "
					 "No such file or directory");
	handler_result_clear(&o.res);

	h = conf_for(argv2, NULL, 10000);
	run_job(&h, "{}", &o);
	assert_int_equal(o.res.outcome, OUTCOME_RETRY);
	assert_string_equal(o.res.error,
			    "could not start no-such-program-here: "
			    "No such file or directory");
	handler_result_clear(&o.res);

	/* A file that is not executable: the exec itself fails. */
	snprintf(path, sizeof(path), "%s/handlers/test_plugins.c",
		 getenv("PGJOBD_FIXTURES"));
	h = conf_for(argv3, NULL, 10000);
	run_job(&h, "{}", &o);
	assert_int_equal(o.res.outcome, OUTCOME_RETRY);
	assert_non_null(strstr(o.res.error, "Permission denied"));
	assert_memory_equal(o.res.error, "could not start /", 17);
	handler_result_clear(&o.res);
}

/*
 * Limits: one the kernel refuses fails the start, naming it; one that ends
 * the run is named in the error; every run reports its child's figures.
 */
static void
test_limits(void **state)
{
	char *argv[] = {"/bin/true", NULL};
	char out[] = "/tmp/pgjobd-test-fsXXXXXX", of[64];
	char *argv2[] = {"/bin/dd", "if=/dev/zero", of,
			 "bs=4096", "count=4",	    NULL};
	struct handler_conf h = conf_for(argv, NULL, 10000);
	struct outcome o = {0};

	/* More descriptors than the kernel allows anyone (fs.nr_open). */
	h.limits.open_files = INT_MAX;
	run_job(&h, "{}", &o);
	assert_int_equal(o.res.outcome, OUTCOME_RETRY);
	assert_string_equal(o.res.error,
			    "could not start /bin/true: limits.open_files: "
			    "setrlimit: Operation not permitted");
	assert_false(o.res.measured);
	handler_result_clear(&o.res);

	/* Within its limits: done, and measured. */
	h.limits = (struct exec_limits){.cpu_ms = 5000,
					.memory = 1LL << 30,
					.open_files = 64,
					.processes = 1000,
					.file_size = 1 << 20};
	run_job(&h, "{}", &o);
	assert_int_equal(o.res.outcome, OUTCOME_DONE);
	assert_true(o.res.measured);
	assert_true(o.res.cpu_ms >= 0);
	assert_true(o.res.max_rss_kb > 0);
	handler_result_clear(&o.res);

	/* A write past file_size: SIGXFSZ, named. */
	int fd = mkstemp(out);
	assert_true(fd >= 0);
	close(fd);
	snprintf(of, sizeof(of), "of=%s", out);
	h = conf_for(argv2, NULL, 10000);
	h.limits.file_size = 4096;
	run_job(&h, "{}", &o);
	unlink(out);
	assert_int_equal(o.res.outcome, OUTCOME_RETRY);
	assert_string_equal(o.res.error,
			    "file_size limit 4KiB reached (SIGXFSZ)");
	assert_true(o.res.measured);
	handler_result_clear(&o.res);
}

static void
test_big_stdout(void **state)
{
	struct outcome o = {0};

	run_mode("bigout", NULL, 20000, &o);
	assert_int_equal(o.res.outcome, OUTCOME_DONE);
	assert_null(o.res.result);
	handler_result_clear(&o.res);
}

static void
test_fds_closed(void **state)
{
	/* ls's stdout is not JSON: send the listing to stderr. */
	char *argv[] = {"/bin/sh", "-c", "/bin/ls /proc/self/fd >&2; exit 3",
			NULL};
	struct handler_conf h = conf_for(argv, NULL, 10000);
	struct outcome o = {0};
	int fd = open("/dev/null", O_RDONLY); /* not close-on-exec */
	char *save = NULL;
	int seen = 0;

	assert_true(fd >= 0);
	assert_int_equal(dup2(fd, 57), 57);
	run_job(&h, "{}", &o);
	close(57);
	close(fd);
	assert_int_equal(o.res.outcome, OUTCOME_RETRY);
	/* ls lists 0, 1, 2 and the descriptor it reads the directory with. */
	for (char *l = strtok_r(o.res.error + strlen("exit status 3: "), "\n",
				&save);
	     l; l = strtok_r(NULL, "\n", &save)) {
		int n = atoi(l);
		assert_true(n >= 0 && n <= 3);
		seen++;
	}
	assert_int_equal(seen, 4);
	handler_result_clear(&o.res);
}

static pid_t
read_pid(const char *file)
{
	FILE *f = fopen(file, "r");
	int pid = 0;

	assert_non_null(f);
	assert_int_equal(fscanf(f, "%d", &pid), 1);
	fclose(f);
	unlink(file);
	return pid;
}

/*
 * The grandchild must die of SIGKILL within a few seconds.  Its parent, the
 * script, was killed or has exited, so it was reparented to us (subreaper)
 * and we reap it here, unless the script reaped it first (when SIGKILL
 * reaches the grandchild before the script): then it is simply gone.
 */
static void
check_killed(pid_t pid)
{
	int status = 0;
	pid_t r = 0;

	for (int i = 0; i < 500 && r == 0; i++) {
		r = waitpid(pid, &status, WNOHANG);
		if (r == 0)
			usleep(10000);
	}
	if (r < 0) {
		assert_int_equal(errno, ECHILD);
	} else {
		assert_int_equal(r, pid);
		assert_true(WIFSIGNALED(status));
		assert_int_equal(WTERMSIG(status), SIGKILL);
	}
	assert_int_equal(kill(pid, 0), -1);
	assert_int_equal(errno, ESRCH);
}

static void
test_grandchild_killed_on_exit(void **state)
{
	char file[] = "/tmp/pgjobd-test-gcXXXXXX";
	struct outcome o = {0};
	int fd = mkstemp(file);

	assert_true(fd >= 0);
	close(fd);
	run_mode("grandchild", file, 10000, &o);
	assert_int_equal(o.res.outcome, OUTCOME_DONE);
	assert_string_equal(o.res.result, "{}");
	/* It ended without waiting for the grandchild (sleep 1000) that
	 * held its pipes: else run_it()'s 30 s guard fails the test. */
	check_killed(read_pid(file));
	handler_result_clear(&o.res);
}

static char *capture_stderr(void (*fn)(void));

/* The run of a script that ignores SIGTERM (hang_run()), its log lines
 * captured. */
static struct outcome hang_o;
static char hang_file[32];
static int64_t hang_timeout_ms;

static void
hang_run(void)
{
	run_mode("hang", hang_file, hang_timeout_ms, &hang_o);
}

/* Runs behave.sh hang with o's stop and timeout_ms; returns its log. */
static char *
run_hang(struct outcome o, int64_t timeout_ms)
{
	int fd;

	snprintf(hang_file, sizeof(hang_file), "/tmp/pgjobd-test-hgXXXXXX");
	fd = mkstemp(hang_file);
	assert_true(fd >= 0);
	close(fd);
	hang_o = o;
	hang_timeout_ms = timeout_ms;
	return capture_stderr(hang_run);
}

/* first, then later in the log, then. */
static void
assert_log_order(const char *log, const char *first, const char *then)
{
	const char *a = strstr(log, first);

	if (!a || !strstr(a + strlen(first), then))
		fail_msg("no \"%s\" followed by \"%s\" in:\n%s", first, then,
			 log);
}

static void
test_timeout(void **state)
{
	/* The script ignores SIGTERM: the SIGKILL sent when the grace (here
	 * min(5 s, 300 ms)) is over ends it and its grandchild.  The log
	 * says the SIGKILL came from the grace's timer, after the SIGTERM:
	 * no clock read here, which a loaded machine would stretch. */
	char *log = run_hang((struct outcome){0}, 300);

	assert_int_equal(hang_o.res.outcome, OUTCOME_RETRY);
	assert_string_equal(hang_o.res.error,
			    "timed out after 300ms (killed by signal 9)");
	assert_int_equal(hang_o.res.timed_out, 1); /* counted apart */
	assert_log_order(log, "timed out after 300ms; sending SIGTERM",
			 "still running after SIGTERM; sending SIGKILL");
	check_killed(read_pid(hang_file));
	handler_result_clear(&hang_o.res);
	free(log);
}

static void
test_stop(void **state)
{
	char *argv[] = {"sleep", "1000", NULL};
	struct handler_conf h = conf_for(argv, NULL, 60000);
	struct outcome o = {.stop_why = "lease lost", .stop_after = 0.1};

	/* SIGTERM ends it (signal 15, not the SIGKILL of the grace), long
	 * before its sleep would: else run_it()'s 30 s guard fails. */
	run_job(&h, "{}", &o);
	assert_int_equal(o.res.outcome, OUTCOME_RETRY);
	assert_string_equal(o.res.error,
			    "stopped: lease lost (killed by signal 15)");
	handler_result_clear(&o.res);
}

static void
test_stop_escalates(void **state)
{
	char *log = run_hang(
		(struct outcome){.stop_why = "shutdown", .stop_after = 0.2},
		400);

	assert_int_equal(hang_o.res.outcome, OUTCOME_RETRY);
	assert_string_equal(hang_o.res.error,
			    "stopped: shutdown (killed by signal 9)");
	/* SIGTERM at the stop, SIGKILL when its grace was over. */
	assert_log_order(log, "stopping: shutdown",
			 "still running after SIGTERM; sending SIGKILL");
	check_killed(read_pid(hang_file));
	handler_result_clear(&hang_o.res);
	free(log);
}

/* Runs fn with stderr going to a file; returns what was written. */
static char *
capture_stderr(void (*fn)(void))
{
	char path[] = "/tmp/test_handler_exec.XXXXXX";
	int fd = mkstemp(path), saved = dup(2);
	struct buf b = {0};
	char chunk[4096];
	ssize_t n;

	assert_true(fd >= 0 && saved >= 0);
	unlink(path);
	fflush(stderr);
	dup2(fd, 2);
	fn();
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	lseek(fd, 0, SEEK_SET);
	while ((n = read(fd, chunk, sizeof(chunk))) > 0)
		buf_append(&b, chunk, (size_t)n);
	close(fd);
	return b.data ? b.data : xstrdup("");
}

static void
cancel_run(void)
{
	char *argv[] = {"sleep", "1000", NULL};
	struct handler_conf h = conf_for(argv, NULL, 60000);
	struct outcome o = {.stop_why = "cancelled", .stop_after = 0.1};

	run_job(&h, "{}", &o);
	assert_string_equal(o.res.error,
			    "stopped: cancelled (killed by signal 15)");
	handler_result_clear(&o.res);
}

/* A stopped run's line says what happened, and no outcome: the worker
 * decides that (a cancelled job is not retried). */
static void
test_stop_log_line(void **state)
{
	char *log = capture_stderr(cancel_run);

	printf("%s", log);
	assert_non_null(strstr(log, "job=42 kind=test attempt=2 msg=\"stopped: "
				    "cancelled (killed by signal 15), wall "));
	assert_null(strstr(log, "-> retry"));
	free(log);
}

static void
task_runs(void)
{
	char *argv[] = {"/bin/sh", "-c", "exit 3", NULL};
	char *argv2[] = {"sleep", "1000", NULL};
	struct task_conf t = {.name = "feed",
			      .command = {.v = argv, .n = 3},
			      .partitions = 4};
	struct outcome o = {0};

	run_it(NULL, &t, &o);
	handler_result_clear(&o.res);
	t.command = (struct strlist){.v = argv2, .n = 2};
	o = (struct outcome){.stop_why = "task lease lost", .stop_after = 0.1};
	run_it(NULL, &t, &o);
	handler_result_clear(&o.res);
}

/* A leased task's lines name the task and partition, never job=0 or an
 * attempt, and no outcome (its duty restarts it either way). */
static void
test_task_log_lines(void **state)
{
	char *log = capture_stderr(task_runs);

	printf("%s", log);
	assert_non_null(strstr(log, "msg=\"task=feed partition=2: exit status "
				    "3, wall "));
	assert_non_null(strstr(log, "msg=\"task=feed partition=2: stopping: "
				    "task lease lost\""));
	assert_non_null(strstr(log, "msg=\"task=feed partition=2: stopped: "
				    "task lease lost (killed by signal 15), "
				    "wall "));
	assert_null(strstr(log, "job="));
	assert_null(strstr(log, "attempt="));
	assert_null(strstr(log, "->"));
	free(log);
}

/* user: and group: (as root only): the command runs with those ids and
 * the user's groups, nothing of root's. */
static void
test_run_as(void **state)
{
	char *argv[] = {
		"/bin/sh", "-c",
		"echo \"[$(id -u), $(id -g), [$(id -G | tr ' ' ',')]]\"", NULL};
	struct handler_conf h = conf_for(argv, NULL, 10000);
	struct passwd *pw = getpwnam("nobody");
	gid_t groups[1];
	struct outcome o = {0};
	char want[128];

	if (geteuid() != 0)
		skip();
	assert_non_null(pw);
	groups[0] = pw->pw_gid;
	h.run_as = (struct run_as){.user = "nobody",
				   .set = true,
				   .uid = pw->pw_uid,
				   .gid = pw->pw_gid,
				   .groups = groups,
				   .ngroups = 1};
	run_job(&h, "{}", &o);
	assert_int_equal(o.res.outcome, OUTCOME_DONE);
	snprintf(want, sizeof(want), "[%u, %u, [%u]]", (unsigned)pw->pw_uid,
		 (unsigned)pw->pw_gid, (unsigned)pw->pw_gid);
	assert_string_equal(o.res.result, want);
	handler_result_clear(&o.res);
}

/* A stop before a deferred failure is delivered keeps the failure. */
static void
test_stop_failed_start(void **state)
{
	char *argv[] = {"/nonexistent/prog", NULL};
	struct handler_conf h = conf_for(argv, NULL, 10000);
	struct outcome o = {.stop_why = "cancel", .stop_now = true};

	run_job(&h, "{}", &o);
	assert_int_equal(o.res.outcome, OUTCOME_RETRY);
	assert_non_null(strstr(o.res.error, "could not start"));
	handler_result_clear(&o.res);
}

static void
test_no_handler(void **state)
{
	struct outcome o = {0};

	run_job(NULL, "{}", &o);
	assert_int_equal(o.res.outcome, OUTCOME_RETRY);
	assert_string_equal(o.res.error, "no handler for kind test");
	handler_result_clear(&o.res);
}

static void
test_durations(void **state)
{
	int64_t ms = 0;
	char b[32];

	assert_int_equal(duration_parse("30", &ms, NULL), 0);
	assert_int_equal(ms, 30000);
	assert_int_equal(duration_parse("250ms", &ms, NULL), 0);
	assert_int_equal(ms, 250);
	assert_int_equal(duration_parse("2h", &ms, NULL), 0);
	assert_int_equal(ms, 7200000);
	assert_int_equal(duration_parse("1d", &ms, NULL), 0);
	assert_int_equal(ms, 86400000);
	assert_int_equal(duration_parse("0.5s", &ms, NULL), 0);
	assert_int_equal(ms, 500);
	assert_int_equal(duration_parse("-1s", &ms, NULL), -1);
	assert_int_equal(duration_parse("5 s", &ms, NULL), -1);
	assert_int_equal(duration_parse("5w", &ms, NULL), -1);
	assert_int_equal(duration_parse("", &ms, NULL), -1);
	assert_int_equal(duration_parse("nan", &ms, NULL), -1);
	assert_int_equal(duration_parse("1e30s", &ms, NULL), -1);
	assert_string_equal(duration_format(30000, b, sizeof(b)), "30s");
	assert_string_equal(duration_format(300000, b, sizeof(b)), "5m");
	assert_string_equal(duration_format(1500, b, sizeof(b)), "1500ms");
	assert_string_equal(duration_format(0, b, sizeof(b)), "0s");
}

static void
test_text_checks(void **state)
{
	char s[] = "ok \xc3\xa9 \xff \x80x \xed\xa0\x80 end";
	char cut[] = "\xa9tail";

	pgtext_sanitize(s, sizeof(s) - 1);
	assert_string_equal(s, "ok \xc3\xa9 ? ?x ??? end");
	pgtext_sanitize(cut, sizeof(cut) - 1);
	assert_string_equal(cut, "?tail");
	assert_true(pgtext_is_jsonb("{\"a\": [1, 2]}", 13));
	assert_true(pgtext_is_jsonb(" 3 \n", 4));
	assert_false(pgtext_is_jsonb("{\"a\": 1} x", 10));
	assert_false(pgtext_is_jsonb("{\"a\": \"\\u0000\"}", 15));
	assert_true(pgtext_is_jsonb("{\"a\": \"\\\\u0000\"}", 16));
	assert_false(pgtext_is_jsonb("\"\xff\"", 3));
	assert_false(pgtext_is_jsonb("", 0));
}

/*
 * pgtext_is_jsonb() against what PostgreSQL's jsonb input accepts.  Each
 * expectation was checked with `select $1::jsonb` on PostgreSQL 15 (UTF8
 * database) when this table was written; jsonb's answer is the one that
 * counts, since a result it refuses would undo a finished job.
 */
static void
test_json_as_jsonb(void **state)
{
	static const struct {
		const char *text;
		bool ok;
	} cases[] = {
		/* Raw control characters inside strings: refused. */
		{"{\"a\":\"x\ty\"}", false},
		{"{\"a\":\"x\ny\"}", false},
		{"\"x\ry\"", false},
		{"\"\x01\"", false},
		{"\"\x1f\"", false},
		{"{\"a\tb\":1}", false},
		{"\"\x7f\"", true}, /* DEL is not a control character here */
		/* Escapes. */
		{"{\"a\":\"x\\ty\"}", true},
		{"\"\\u0001\"", true},
		{"\"\\u0000\"", false},
		{"\"\\\\u0000\"", true},
		{"\"\\ud800\"", false},
		{"\"\\udc00\"", false},
		{"\"\\ud800\\u0041\"", false},
		{"\"\\ud800x\"", false},
		{"\"\\ud800\\ud800\"", false},
		{"\"\\ud83d\\ude00\"", true},
		{"\"\\u00E9\"", true},
		{"\"\\/\"", true},
		{"\"\\x\"", false},
		{"\"\\U0041\"", false},
		{"\"\\u12\"", false},
		{"\"\xc3\xa9\"", true},
		{"\"\xed\xb3\xbf\"", false}, /* a surrogate in UTF-8 */
		{"\"\xff\"", false},
		/* Numbers. */
		{"1e999", true},
		{"-0", true},
		{"1E+2", true},
		{"-1.5E-3", true},
		{"0.0e0", true},
		{"1e01", true},
		{"1e-0", true},
		{"0.00", true},
		{"1e0000000000000000000000001", true},
		{"01", false},
		{"-01", false},
		{"00", false},
		{"1.", false},
		{".5", false},
		{"+1", false},
		{"1e", false},
		{"1E", false},
		{"1e+", false},
		{"-", false},
		{"--1", false},
		{"0x10", false},
		{"Infinity", false},
		{"NaN", false},
		/* What numeric can hold. */
		{"1e131071", true},
		{"9.9e131071", true},
		{"12e131070", true},
		{"1e131072", false},
		{"12e131071", false},
		{"1e-16383", true},
		{"0.001e-16380", true},
		{"1e-16384", false},
		{"1.5e-16383", false},
		{"0.001e-16381", false},
		{"100e-16385", false},
		{"0e1000000", true},
		{"0e-16384", false},
		{"0.0e-16383", false},
		{"0e99999999999", false},
		{"-0e-99999999999999999", false},
		{"1e1000000", false},
		/* Whitespace: space, tab, LF, CR only. */
		{" \t\n\r[1]\r\n", true},
		{"\x0b"
		 "1",
		 false},
		{"[1,\x0c"
		 "2]",
		 false},
		{"[1,\xc2\xa0"
		 "2]",
		 false},
		{"\xef\xbb\xbf"
		 "1",
		 false},
		{"", false},
		{"  ", false},
		/* Structure and literals. */
		{"{\"a\": [1, 2]}", true},
		{" 3 \n", true},
		{"{}", true},
		{"[]", true},
		{"[1,null]", true},
		{"{\"a\":1,\"a\":2}", true},
		{"{\"a\": {\"b\": [true, false, null, {}, []]}}", true},
		{"{\"a\": 1} x", false},
		{"1 2", false},
		{"[1,]", false},
		{"{\"a\":1,}", false},
		{"{1:2}", false},
		{"{\"a\" 1}", false},
		{"'a'", false},
		{"[true1]", false},
		{"True", false},
		{"[1", false},
		{"[1]]", false},
		{"{\"a\":1]", false},
		{"\"abc", false},
	};
	char *big;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *t = cases[i].text;
		if (pgtext_is_jsonb(t, strlen(t)) != cases[i].ok)
			fail_msg("pgtext_is_jsonb(\"%s\") should be %d", t,
				 cases[i].ok);
	}
	/* A NUL inside is not JSON text that PostgreSQL can receive. */
	assert_false(pgtext_is_jsonb("\"a\0b\"", 5));
	assert_false(pgtext_is_jsonb("1\0", 2));
	/* Digits rather than exponents: 1 and 131071 zeros fits. */
	big = xmalloc(131075);
	memset(big, '0', 131074);
	big[0] = '1';
	assert_true(pgtext_is_jsonb(big, 131072));
	assert_false(pgtext_is_jsonb(big, 131073));
	/* 16383 digits after the point fit, 16384 do not. */
	memcpy(big, "0.", 2);
	assert_true(pgtext_is_jsonb(big, 2 + 16383));
	assert_false(pgtext_is_jsonb(big, 2 + 16384));
	free(big);
	/* Deep nesting needs no recursion here. */
	big = xmalloc(200000);
	memset(big, '[', 100000);
	memset(big + 100000, ']', 100000);
	assert_true(pgtext_is_jsonb(big, 200000));
	assert_false(pgtext_is_jsonb(big, 199999));
	free(big);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_json_stdout),
		cmocka_unit_test(test_text_stdout),
		cmocka_unit_test(test_stdout_jsonb_refuses),
		cmocka_unit_test(test_exit_65_dead),
		cmocka_unit_test(test_exit_75_retry_in),
		cmocka_unit_test(test_exit_3_stderr),
		cmocka_unit_test(test_stderr_tail),
		cmocka_unit_test(test_signal),
		cmocka_unit_test(test_stdin_payload),
		cmocka_unit_test(test_stdin_not_read),
		cmocka_unit_test(test_clean_env),
		cmocka_unit_test(test_path_lookup),
		cmocka_unit_test(test_missing_executable),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_big_stdout),
		cmocka_unit_test(test_fds_closed),
		cmocka_unit_test(test_grandchild_killed_on_exit),
		cmocka_unit_test(test_timeout),
		cmocka_unit_test(test_stop),
		cmocka_unit_test(test_stop_escalates),
		cmocka_unit_test(test_stop_log_line),
		cmocka_unit_test(test_task_log_lines),
		cmocka_unit_test(test_stop_failed_start),
		cmocka_unit_test(test_run_as),
		cmocka_unit_test(test_no_handler),
		cmocka_unit_test(test_durations),
		cmocka_unit_test(test_text_checks),
		cmocka_unit_test(test_json_as_jsonb),
	};
	const char *fix = getenv("PGJOBD_FIXTURES");

	if (!fix) {
		fprintf(stderr, "PGJOBD_FIXTURES is not set: run through "
				"ctest\n");
		return 1;
	}
	snprintf(script, sizeof(script), "%s/handlers/behave.sh", fix);
	signal(SIGPIPE, SIG_IGN); /* as the worker does */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	log_init("test", LOG_DEBUG, 0);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
