/*
 * test_handler_http: the http handler on a real libev loop against a real
 * HTTP server on 127.0.0.1 (tests/fixtures/http/httpd.c, started once for
 * the whole program): what is sent, the outcome of every kind of status,
 * Retry-After, response bodies, network errors, timeouts, handler_stop(),
 * many requests in flight on one loop, and log lines without secrets.
 *
 * Each run gets a new loop, between handler_init() and handler_fini(), as
 * a worker has them.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>
#include <ev.h>

#include "common/config.h"
#include "common/pgtext.h"
#include "handlers/handler.h"
#include "common/log.h"
#include "common/util.h"

static int port;	     /* the test server's */
static pid_t server_pid;     /* it exits when server_in closes */
static int server_in = -1;   /* the write end of its stdin */
static struct config no_cfg; /* handler_init() with no handlers */

struct outcome {
	struct ev_loop *loop;
	int calls;
	struct handler_result res;
	struct handler_run *run;
	const char *stop_why; /* handler_stop() after stop_after seconds */
	double stop_after;
	bool stop_now; /* handler_stop() right after handler_start() */
	int64_t start_ms, end_ms;
	int *pending; /* several runs on one loop: break when 0 */
};

/* A handler for a path of the test server (or any url). */
struct target {
	char url[256];
	struct handler_conf h;
};

static void
target_url(struct target *t, const char *url, int64_t timeout_ms)
{
	memset(t, 0, sizeof(*t));
	snprintf(t->url, sizeof(t->url), "%s", url);
	t->h.kind = "hook";
	t->h.type = HANDLER_HTTP;
	t->h.queue = "q1";
	t->h.timeout_ms = timeout_ms;
	t->h.url = t->url;
	t->h.tls_verify = true;
}

static void
target_path(struct target *t, const char *path, int64_t timeout_ms)
{
	char url[256];

	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", port, path);
	target_url(t, url, timeout_ms);
}

static void
done_cb(void *arg, struct handler_result *res)
{
	struct outcome *o = arg;

	o->calls++;
	o->end_ms = util_now_ms();
	o->res = *res; /* take the strings */
	res->result = res->error = NULL;
	/* A stop from inside done does nothing. */
	handler_stop(o->run, "from done");
	if (!o->pending || --*o->pending == 0)
		ev_break(o->loop, EVBREAK_ALL);
}

static void
guard_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	fail_msg("the runs did not complete within 30 s");
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

static struct job
job_for(const struct handler_conf *h, int64_t id, const char *payload)
{
	return (struct job){
		.id = id,
		.kind = "hook",
		.queue = "q1",
		.payload = (char *)payload,
		.attempt = 2,
		.max_attempts = 5,
		.lease_token = 777,
		.handler = h,
	};
}

/* Runs the loop until every run is done; at most 30 s. */
static void
run_loop(struct ev_loop *loop)
{
	ev_timer guard;

	ev_timer_init(&guard, guard_cb, 30., 0.);
	ev_timer_start(loop, &guard);
	ev_run(loop, 0);
	ev_timer_stop(loop, &guard);
}

/* Runs one job with handler h to completion; o receives the result. */
static void
run_job(const struct handler_conf *h, const char *payload, struct outcome *o)
{
	struct job job = job_for(h, 42, payload);
	ev_timer stop;

	o->loop = ev_loop_new(EVFLAG_AUTO);
	assert_int_equal(handler_init(&no_cfg), 0);
	o->calls = 0;
	o->res = (struct handler_result){.outcome = OUTCOME_DONE,
					 .retry_in_ms = -2};
	o->start_ms = util_now_ms();
	o->run = handler_start(o->loop, &job, 3, done_cb, o);
	assert_non_null(o->run);
	assert_int_equal(o->calls, 0); /* never from inside handler_start */
	if (o->stop_now) {
		handler_stop(o->run, o->stop_why);
		assert_int_equal(o->calls, 0); /* nor handler_stop */
	}
	ev_timer_init(&stop, stop_cb, o->stop_after, 0.);
	stop.data = o;
	if (o->stop_why && !o->stop_now)
		ev_timer_start(o->loop, &stop);
	run_loop(o->loop);
	ev_timer_stop(o->loop, &stop);
	handler_fini();
	ev_loop_destroy(o->loop);
	assert_int_equal(o->calls, 1);
}

static void
run_path(const char *path, int64_t timeout_ms, struct outcome *o)
{
	struct target t;

	target_path(&t, path, timeout_ms);
	run_job(&t.h, "{}", o);
}

/* The value of header name (case-insensitive) in the echo, or NULL. */
static const char *
echoed(cJSON *echo, const char *name)
{
	cJSON *hs = cJSON_GetObjectItemCaseSensitive(echo, "headers");
	cJSON *v = cJSON_GetObjectItem(hs, name); /* case-insensitive */

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void
test_request(void **state)
{
	char *headers[] = {"X-Test: yes", "Authorization: Bearer s3cret",
			   "Idempotency-Key: configured", NULL};
	const char *payload = "{\"to\": \"caf\xc3\xa9\", \"q\": \"\\\"\"}";
	struct outcome o = {0};
	struct target t;
	cJSON *echo;

	target_path(&t, "/ok", 10000);
	t.h.headers = (struct strlist){headers, 3};
	run_job(&t.h, payload, &o);
	assert_int_equal(o.res.outcome, OUTCOME_DONE);
	assert_null(o.res.error);
	assert_int_equal(o.res.retry_in_ms, -1);
	assert_non_null(o.res.result);
	assert_true(pgtext_is_jsonb(o.res.result, strlen(o.res.result)));
	echo = cJSON_Parse(o.res.result);
	assert_non_null(echo);
	assert_string_equal(
		cJSON_GetObjectItemCaseSensitive(echo, "method")->valuestring,
		"POST");
	assert_string_equal(
		cJSON_GetObjectItemCaseSensitive(echo, "body")->valuestring,
		payload);
	/* The job id, never a configured Idempotency-Key. */
	assert_string_equal(echoed(echo, "Idempotency-Key"), "42");
	assert_string_equal(echoed(echo, "Content-Type"), "application/json");
	assert_string_equal(echoed(echo, "User-Agent"),
			    "pgjobd/" PGJOBD_VERSION);
	assert_string_equal(echoed(echo, "X-Test"), "yes");
	assert_string_equal(echoed(echo, "Authorization"), "Bearer s3cret");
	assert_null(echoed(echo, "Expect"));
	cJSON_Delete(echo);
	handler_result_clear(&o.res);
}

static void
test_header_overrides(void **state)
{
	char *headers[] = {
		"Content-Type: application/vnd.x+json",
		"User-Agent: ", "X-Empty: ", "Transfer-Encoding: gzip", NULL};
	struct outcome o = {0};
	struct target t;
	cJSON *echo;

	target_path(&t, "/ok", 10000);
	t.h.headers = (struct strlist){headers, 4};
	run_job(&t.h, "{\"a\": 1}", &o);
	assert_int_equal(o.res.outcome, OUTCOME_DONE);
	echo = cJSON_Parse(o.res.result);
	/* A configured value replaces ours; an empty one removes it. */
	assert_string_equal(echoed(echo, "Content-Type"),
			    "application/vnd.x+json");
	assert_null(echoed(echo, "User-Agent"));
	assert_null(echoed(echo, "X-Empty"));
	/* The body's framing stays libcurl's. */
	assert_null(echoed(echo, "Transfer-Encoding"));
	assert_string_equal(echoed(echo, "Content-Length"), "8");
	assert_string_equal(
		cJSON_GetObjectItemCaseSensitive(echo, "body")->valuestring,
		"{\"a\": 1}");
	assert_string_equal(echoed(echo, "Idempotency-Key"), "42");
	cJSON_Delete(echo);
	handler_result_clear(&o.res);
}

static void
check_done(const char *path, const char *result)
{
	struct outcome o = {0};

	run_path(path, 10000, &o);
	assert_int_equal(o.res.outcome, OUTCOME_DONE);
	if (result)
		assert_string_equal(o.res.result, result);
	else
		assert_null(o.res.result);
	assert_null(o.res.error);
	handler_result_clear(&o.res);
}

static void
test_2xx(void **state)
{
	check_done("/json-ws", "[1, 2]");
	check_done("/not-json", NULL);
	check_done("/status/201", NULL); /* "status 201" is not JSON */
	check_done("/status/204", NULL);
	check_done("/big", NULL); /* a JSON string, but over 1 MiB */
}

/* Whether path's answer is a snooze: a 429 or 503 with a Retry-After. */
static void
check_snooze(const char *path, bool snooze)
{
	struct outcome o = {0};

	run_path(path, 10000, &o);
	assert_int_equal(o.res.snooze, snooze);
	handler_result_clear(&o.res);
}

/* path ends in outcome with error and retry_in_ms. */
static void
check(const char *path, enum handler_outcome outcome, const char *error,
      int64_t retry_in_ms)
{
	struct outcome o = {0};

	run_path(path, 10000, &o);
	assert_int_equal(o.res.outcome, outcome);
	assert_string_equal(o.res.error, error);
	assert_int_equal(o.res.retry_in_ms, retry_in_ms);
	assert_null(o.res.result);
	handler_result_clear(&o.res);
}

static void
test_4xx_dead(void **state)
{
	check("/status/400", OUTCOME_DEAD, "HTTP 400: status 400", -1);
	check("/status/404", OUTCOME_DEAD, "HTTP 404: status 404", -1);
	check("/status/410", OUTCOME_DEAD, "HTTP 410: status 410", -1);
	check("/status/422", OUTCOME_DEAD, "HTTP 422: status 422", -1);
}

static void
test_retry_statuses(void **state)
{
	check("/status/408", OUTCOME_RETRY, "HTTP 408: status 408", -1);
	check("/status/425", OUTCOME_RETRY, "HTTP 425: status 425", -1);
	check("/status/429", OUTCOME_RETRY, "HTTP 429: status 429", -1);
	check("/status/500", OUTCOME_RETRY, "HTTP 500: status 500", -1);
	check("/status/502", OUTCOME_RETRY, "HTTP 502: status 502", -1);
	check("/status/503", OUTCOME_RETRY, "HTTP 503: status 503", -1);
}

static void
test_retry_after(void **state)
{
	struct outcome o = {0};

	check("/retry-after/7", OUTCOME_RETRY, "HTTP 503: busy", 7000);
	check("/retry-after/0", OUTCOME_RETRY, "HTTP 503: busy", 0);
	check_snooze("/retry-after/7", true);
	check_snooze("/retry-after-in/30", true);
	check_snooze("/retry-after-bad", false);
	check_snooze("/status/500", false);
	/* An HTTP-date counts from the response's Date (in 1994). */
	check("/retry-after-date", OUTCOME_RETRY, "HTTP 503: busy", 120000);
	check("/retry-after-bad", OUTCOME_RETRY, "HTTP 503: busy", -1);
	/* Without a Date header, from now: 30 s less what passed between
	 * the server's clock read and ours (at most the request's time),
	 * give or take a second (both in whole seconds): the bound moves
	 * with the load instead of a fixed window. */
	run_path("/retry-after-in/30", 10000, &o);
	assert_int_equal(o.res.outcome, OUTCOME_RETRY);
	assert_string_equal(o.res.error, "HTTP 429: slow down");
	assert_true(o.res.retry_in_ms <= 31000);
	assert_true(o.res.retry_in_ms >= 29000 - (o.end_ms - o.start_ms));
	handler_result_clear(&o.res);
}

static void
test_redirect_dead(void **state)
{
	char want[128];

	snprintf(want, sizeof(want),
		 "HTTP 302: redirect to 127.0.0.1:%d not followed", port);
	check("/redirect", OUTCOME_DEAD, want, -1);
}

static void
test_error_body(void **state)
{
	struct outcome o = {0};
	char want[600] = "HTTP 500: ??a";

	/* 512 bytes at most, cut before a split character, sanitized. */
	for (int i = 0; i < 254; i++)
		strcat(want, "\xc3\xa9");
	strcat(want, "...");
	run_path("/error-body", 10000, &o);
	assert_int_equal(o.res.outcome, OUTCOME_RETRY);
	assert_string_equal(o.res.error, want);
	handler_result_clear(&o.res);
}

/* A port on 127.0.0.1 that nothing listens on. */
static int
closed_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	close(fd);
	return ntohs(a.sin_port);
}

static void
test_connection_refused(void **state)
{
	struct outcome o = {0};
	struct target t;
	char url[64], want[128];
	int p = closed_port();

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/ok", p);
	snprintf(want, sizeof(want),
		 "could not connect to 127.0.0.1:%d: Connection refused", p);
	target_url(&t, url, 10000);
	run_job(&t.h, "{}", &o);
	assert_int_equal(o.res.outcome, OUTCOME_RETRY);
	assert_string_equal(o.res.error, want);
	assert_int_equal(o.res.retry_in_ms, -1);
	handler_result_clear(&o.res);
}

static void
test_empty_reply(void **state)
{
	struct outcome o = {0};
	char want[128];

	snprintf(want, sizeof(want),
		 "request to 127.0.0.1:%d failed: Empty reply from server",
		 port);
	run_path("/close", 10000, &o);
	assert_int_equal(o.res.outcome, OUTCOME_RETRY);
	assert_string_equal(o.res.error, want);
	handler_result_clear(&o.res);
}

static void
test_tls_failure(void **state)
{
	char prefix[64];

	snprintf(prefix, sizeof(prefix), "TLS error with 127.0.0.1:%d: ", port);
	for (int verify = 0; verify < 2; verify++) {
		struct outcome o = {0};
		struct target t;
		char url[64];

		snprintf(url, sizeof(url), "https://127.0.0.1:%d/ok", port);
		target_url(&t, url, 10000);
		t.h.tls_verify = verify;
		run_job(&t.h, "{}", &o);
		assert_int_equal(o.res.outcome, OUTCOME_RETRY);
		assert_non_null(o.res.error);
		assert_memory_equal(o.res.error, prefix, strlen(prefix));
		handler_result_clear(&o.res);
	}
}

static void
test_bad_url(void **state)
{
	struct outcome o = {0};
	const char *prefix = "http handler: bad url: ";

	run_path(":99999/ok", 10000, &o); /* http://127.0.0.1:N:99999/ok */
	assert_int_equal(o.res.outcome, OUTCOME_RETRY);
	assert_memory_equal(o.res.error, prefix, strlen(prefix));
	handler_result_clear(&o.res);
	/* Stopping it changes nothing: its result is known. */
	o.stop_now = true;
	o.stop_why = "test";
	run_path(":99999/ok", 10000, &o);
	assert_memory_equal(o.res.error, prefix, strlen(prefix));
	handler_result_clear(&o.res);
}

static void
test_timeout(void **state)
{
	const char *prefix = "timed out after 500ms (";
	const char *paths[] = {"/hang", "/slow-bytes"}; /* no head; half */

	for (int i = 0; i < 2; i++) {
		struct outcome o = {0};

		run_path(paths[i], 500, &o);
		assert_int_equal(o.res.outcome, OUTCOME_RETRY);
		assert_memory_equal(o.res.error, prefix, strlen(prefix));
		assert_int_equal(o.res.retry_in_ms, -1);
		/* Not before its timeout (load only makes it later). */
		assert_true(o.end_ms - o.start_ms >= 450);
		handler_result_clear(&o.res);
	}
}

/* A listener whose accept queue is full: new SYNs are dropped, so a
 * connect hangs.  Returns its port; *fds gets the sockets to close. */
static int
full_listener(int fds[3])
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t len = sizeof(a);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fds[0] = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(bind(fds[0], (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(fds[0], 0), 0);
	assert_int_equal(getsockname(fds[0], (struct sockaddr *)&a, &len), 0);
	for (int i = 1; i < 3; i++) {
		fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		connect(fds[i], (struct sockaddr *)&a, sizeof(a));
	}
	usleep(100 * 1000);
	return ntohs(a.sin_port);
}

static void
test_connect_timeout(void **state)
{
	struct outcome o = {0};
	struct target t;
	char url[64];
	int fds[3];

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/ok",
		 full_listener(fds));
	target_url(&t, url, 500);
	run_job(&t.h, "{}", &o);
	assert_int_equal(o.res.outcome, OUTCOME_RETRY);
	assert_memory_equal(o.res.error, "timed out after 500ms (", 23);
	assert_int_equal(o.res.timed_out, 1);
	assert_true(o.end_ms - o.start_ms >= 450); /* not before it */
	handler_result_clear(&o.res);
	for (int i = 0; i < 3; i++)
		close(fds[i]);
}

static void
test_stop(void **state)
{
	struct outcome o = {.stop_why = "lease lost", .stop_after = 0.2};

	run_path("/hang", 10000, &o);
	assert_int_equal(o.res.outcome, OUTCOME_RETRY);
	assert_string_equal(o.res.error, "stopped: lease lost");
	assert_int_equal(o.res.retry_in_ms, -1);
	assert_true(o.end_ms - o.start_ms >= 150); /* at the stop, not before */
	handler_result_clear(&o.res);

	o = (struct outcome){.stop_why = "shutdown", .stop_now = true};
	run_path("/hang", 10000, &o);
	assert_int_equal(o.res.outcome, OUTCOME_RETRY);
	assert_string_equal(o.res.error, "stopped: shutdown");
	handler_result_clear(&o.res);
}

/*
 * Many requests in flight on one loop: the test server answers 20
 * requests for /together/20 only once all 20 are open at once, so each
 * is done only if the loop had them all in flight together (one after the
 * other, the first would wait for the rest until its timeout).  No clock
 * read, which a loaded machine would stretch.
 */
static void
test_concurrent(void **state)
{
	enum { N = 20 };
	struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
	struct job jobs[N];
	struct outcome o[N];
	struct target t;
	int pending = N;

	assert_int_equal(handler_init(&no_cfg), 0);
	target_path(&t, "/together/20", 10000);
	for (int i = 0; i < N; i++) {
		jobs[i] = job_for(&t.h, 100 + i, "{}");
		o[i] = (struct outcome){.loop = loop, .pending = &pending};
		o[i].run = handler_start(loop, &jobs[i], 3, done_cb, &o[i]);
	}
	run_loop(loop);
	handler_fini();
	ev_loop_destroy(loop);
	for (int i = 0; i < N; i++) {
		assert_int_equal(o[i].calls, 1);
		assert_int_equal(o[i].res.outcome, OUTCOME_DONE);
		assert_string_equal(o[i].res.result, "[1,2]");
		handler_result_clear(&o[i].res);
	}
}

/* Runs fn with stderr going to a file; returns what was written. */
static char *
capture_stderr(void (*fn)(void))
{
	char path[] = "/tmp/test_handler_http.XXXXXX";
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
redirect_runs(void)
{
	struct outcome o = {0};

	run_path("/redirect-secret", 10000, &o);
	assert_int_equal(o.res.outcome, OUTCOME_DEAD);
	assert_string_equal(o.res.error,
			    "HTTP 302: redirect to hooks.example:8443 not "
			    "followed");
	handler_result_clear(&o.res);
	run_path("/redirect-bare", 10000, &o);
	assert_int_equal(o.res.outcome, OUTCOME_DEAD);
	assert_string_equal(o.res.error, "HTTP 301: redirect not followed");
	handler_result_clear(&o.res);
}

/* A Location (or a 3xx body) may hold the secrets of a url: last_error and
 * the log name the host and port only. */
static void
test_redirect_secret(void **state)
{
	char *log = capture_stderr(redirect_runs);

	printf("%s", log);
	assert_null(strstr(log, "s3cret"));
	assert_non_null(strstr(log, ": HTTP 302 -> dead, wall "));
	free(log);
}

static void
cancel_run(void)
{
	struct outcome o = {.stop_why = "cancelled", .stop_after = 0.1};

	run_path("/hang", 10000, &o);
	assert_string_equal(o.res.error, "stopped: cancelled");
	handler_result_clear(&o.res);
}

/* A stopped request's line says what happened, and no outcome: the worker
 * decides that (a cancelled job is not retried). */
static void
test_stop_log_line(void **state)
{
	char *log = capture_stderr(cancel_run);

	printf("%s", log);
	assert_non_null(strstr(log, ": stopped: cancelled, wall "));
	assert_null(strstr(log, "-> retry"));
	free(log);
}

static void
secret_runs(void)
{
	char *headers[] = {"Authorization: Bearer s3cret", NULL};
	const char *paths[] = {"/ok", "/status/401", "/status/500", "/close"};
	struct handler_conf insecure = {.kind = "insecure",
					.type = HANDLER_HTTP};
	struct config cfg = {.handlers = &insecure, .nhandlers = 1};

	assert_int_equal(handler_init(&cfg), 0);
	for (size_t i = 0; i < sizeof(paths) / sizeof(*paths); i++) {
		struct outcome o = {0};
		struct target t;

		target_path(&t, paths[i], 10000);
		t.h.headers = (struct strlist){headers, 1};
		run_job(&t.h, "{\"x\": \"payload-secret\"}", &o);
		handler_result_clear(&o.res);
	}
}

static void
test_log_lines(void **state)
{
	char *log = capture_stderr(secret_runs);

	printf("%s", log);
	assert_null(strstr(log, "s3cret"));
	assert_null(strstr(log, "payload-secret"));
	assert_non_null(strstr(log, "handler insecure: tls_verify is false"));
	assert_non_null(strstr(log, ": HTTP 200 -> done, wall "));
	assert_non_null(strstr(log, ": HTTP 401 -> dead, wall "));
	assert_non_null(strstr(log, ": HTTP 500 -> retry, wall "));
	assert_non_null(strstr(log, "job=42 kind=hook attempt=2"));
	free(log);
}

/* Starts the test server and reads its port. */
static int
server_start(void **state)
{
	const char *bin = getenv("PGJOBD_TEST_BIN");
	char path[4096], line[32] = "";
	int in[2], out[2];
	ssize_t n = 0, r;

	if (!bin) {
		fprintf(stderr, "PGJOBD_TEST_BIN is not set: run through "
				"ctest\n");
		return -1;
	}
	snprintf(path, sizeof(path), "%s/pgjobd_test_httpd", bin);
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0)
		return -1;
	server_pid = fork();
	if (server_pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		execl(path, path, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	server_in = in[1];
	while (n < (ssize_t)sizeof(line) - 1 && !strchr(line, '\n') &&
	       (r = read(out[0], line + n, sizeof(line) - 1 - (size_t)n)) > 0)
		n += r;
	close(out[0]);
	port = atoi(line);
	if (port <= 0) {
		fprintf(stderr, "%s did not print its port\n", path);
		return -1;
	}
	return 0;
}

static int
server_stop(void **state)
{
	close(server_in);
	waitpid(server_pid, NULL, 0);
	return 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_request),
		cmocka_unit_test(test_header_overrides),
		cmocka_unit_test(test_2xx),
		cmocka_unit_test(test_4xx_dead),
		cmocka_unit_test(test_retry_statuses),
		cmocka_unit_test(test_retry_after),
		cmocka_unit_test(test_redirect_dead),
		cmocka_unit_test(test_redirect_secret),
		cmocka_unit_test(test_error_body),
		cmocka_unit_test(test_connection_refused),
		cmocka_unit_test(test_empty_reply),
		cmocka_unit_test(test_tls_failure),
		cmocka_unit_test(test_bad_url),
		cmocka_unit_test(test_timeout),
		cmocka_unit_test(test_connect_timeout),
		cmocka_unit_test(test_stop),
		cmocka_unit_test(test_concurrent),
		cmocka_unit_test(test_log_lines),
		cmocka_unit_test(test_stop_log_line),
	};

	signal(SIGPIPE, SIG_IGN); /* as the worker does */
	log_init("test", LOG_DEBUG, 0);
	return cmocka_run_group_tests(tests, server_start, server_stop);
}
