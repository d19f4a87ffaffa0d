/*
 * Integration: W3C trace context from enqueue to handler (docs/tracing.md).
 * pgjob.enqueue()'s traceparent and the session's pgjob.traceparent,
 * checked strictly (an invalid one is dropped with a warning); children and
 * workflow steps inheriting it; and every handler type (exec, http with the
 * test HTTP server, process with the Python client, plugin) getting the
 * attempt's traceparent: the job's trace id and flags, a span id of the
 * attempt's own.
 */
#include "testlib.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "common/util.h"
#include "db/claim_limited.h"

#define TRACE  "0af7651916cd43dd8448eb211c80319c"
#define PARENT "b7ad6b7169203331"
#define TP     "00-" TRACE "-" PARENT "-01"

/* The warnings the server sent, appended. */
static void
keep(void *arg, const char *message)
{
	char **buf = arg;
	char *n = xasprintf("%s%s", *buf ? *buf : "", message);
	free(*buf);
	*buf = n;
}

static void
test_enqueue(void **state)
{
	char *ci = t_db_migrated("t_trace_enqueue");
	PGconn *c = t_connect(ci);
	char *notices = NULL;
	PQsetNoticeProcessor(c, keep, &notices);

	/* The argument; none; the session's setting; the argument over it. */
	long long a =
		t_long(c, "select pgjob.enqueue('k', traceparent => '%s')", TP);
	t_assert_job(c, a, "traceparent", TP);
	long long none = t_long(c, "select pgjob.enqueue('k')");
	t_assert_job(c, none, "coalesce(traceparent, 'null')", "null");
	t_exec(c, "set pgjob.traceparent = '00-" TRACE "-00f067aa0ba902b7-00'");
	long long s = t_long(c, "select pgjob.enqueue('k')");
	t_assert_job(c, s, "traceparent", "00-" TRACE "-00f067aa0ba902b7-00");
	long long o =
		t_long(c, "select pgjob.enqueue('k', traceparent => '%s')", TP);
	t_assert_job(c, o, "traceparent", TP);
	/* enqueue_many and a workflow take the session's. */
	t_exec(c, "select pgjob.enqueue_many('[{\"kind\": \"m\"},"
		  " {\"kind\": \"m\"}]')");
	t_assert_value(c, "2",
		       "select count(*) from pgjob.jobs where kind = 'm' and"
		       " traceparent = '00-" TRACE "-00f067aa0ba902b7-00'");
	long long wf = t_long(
		c,
		"select pgjob.enqueue_workflow('{\"steps\": [{\"name\": \"a\","
		" \"kind\": \"k\"}, {\"name\": \"b\", \"kind\": \"k\","
		" \"after\": [\"a\"]}]}')");
	t_assert_value(
		c, "2",
		"select count(*) from pgjob.jobs where workflow_id = %lld"
		" and traceparent = '00-" TRACE "-00f067aa0ba902b7-00'",
		wf);
	t_exec(c, "reset pgjob.traceparent");
	assert_null(notices);

	/* A child without one inherits its first parent's that has one;
	 * with one, keeps its own. */
	long long kid = t_long(
		c, "select pgjob.enqueue('k', depends_on => array[%lld, %lld])",
		none, a);
	t_assert_job(c, kid, "traceparent", TP);
	long long own = t_long(c,
			       "select pgjob.enqueue('k', depends_on =>"
			       " array[%lld], traceparent => '00-" TRACE
			       "-1111111111111111-01')",
			       a);
	t_assert_job(c, own, "traceparent", "00-" TRACE "-1111111111111111-01");
	/* A job of a batch, with parents or without. */
	long long b = t_long(c, "select pgjob.batch_open()");
	long long bj = t_long(c,
			      "select pgjob.enqueue('k', batch_id => %lld,"
			      " traceparent => '%s')",
			      b, TP);
	t_assert_job(c, bj, "traceparent", TP);
	long long bk = t_long(c,
			      "select pgjob.enqueue('k', batch_id => %lld,"
			      " depends_on => array[%lld])",
			      b, a);
	t_assert_job(c, bk, "traceparent", TP);
	/* pgjob show: the traceparent and the trace id alone. */
	struct t_run r;
	char sid[24];
	snprintf(sid, sizeof(sid), "%lld", a);
	t_pgjob(&r, ci, "show", sid, NULL);
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, "\ntrace_id "));
	assert_non_null(strstr(r.out, " " TRACE "\n"));
	t_run_free(&r);
	t_pgjob(&r, ci, "show", sid, "--json", NULL);
	assert_non_null(strstr(r.out, "\"traceparent\":\"" TP "\""));
	assert_non_null(strstr(r.out, "\"trace_id\":\"" TRACE "\""));
	t_run_free(&r);
	/* pgjob enqueue --traceparent: kept as the argument is; a bad one
	 * refused with exit 2, nothing enqueued. */
	t_pgjob(&r, ci, "enqueue", "k", "--traceparent", TP, NULL);
	assert_int_equal(r.status, 0);
	t_assert_job(c, atoll(r.out), "traceparent", TP);
	t_run_free(&r);
	long long before = t_long(c, "select count(*) from pgjob.jobs");
	t_pgjob(&r, ci, "enqueue", "k", "--traceparent",
		"00-" TRACE "-" PARENT "-1", NULL);
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "pgjob: enqueue: bad --traceparent"));
	t_run_free(&r);
	t_assert_value(c, "t", "select count(*) = %lld from pgjob.jobs",
		       before);
	long long orphan = t_long(
		c, "select pgjob.enqueue('k', depends_on => array[%lld])",
		none);
	t_assert_job(c, orphan, "coalesce(traceparent, 'null')", "null");

	/* Invalid: dropped, each with a warning; the job is enqueued. */
	static const char *const bad[] = {
		"01-" TRACE "-" PARENT "-01", /* version */
		"00-0AF7651916CD43DD8448EB211C80319C-" PARENT "-01", /* case */
		"00-00000000000000000000000000000000-" PARENT "-01",
		"00-" TRACE "-0000000000000000-01",
		"00-" TRACE "-" PARENT "-1",
		"00-" TRACE "-" PARENT "-01-extra",
		"00_" TRACE "_" PARENT "_01",
		"",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		free(notices);
		notices = NULL;
		long long id = t_long(
			c, "select pgjob.enqueue('k', traceparent => '%s')",
			bad[i]);
		t_assert_job(c, id, "coalesce(traceparent, 'null')", "null");
		assert_non_null(notices);
		assert_non_null(
			strstr(notices, "WARNING:  pgjob: traceparent"));
	}
	/* The same from the session. */
	free(notices);
	notices = NULL;
	t_exec(c, "set pgjob.traceparent = 'garbage'");
	long long g = t_long(c, "select pgjob.enqueue('k')");
	t_assert_job(c, g, "coalesce(traceparent, 'null')", "null");
	assert_non_null(strstr(notices, "\"garbage\" is not a W3C trace"));
	free(notices);
	PQfinish(c);
	free(ci);
}

/* Asserts that v (an expression of job id's row) is the attempt's
 * traceparent: TP's trace and flags, a span id of its own. */
static void
assert_attempt_tp(PGconn *c, long long id, const char *v)
{
	t_wait_state(c, id, "done", 60);
	char *expr = xasprintf("%s ~ '^00-" TRACE "-[0-9a-f]{16}-01$'"
			       " and %s <> '%s'",
			       v, v, TP);
	t_assert_job(c, id, expr, "t");
	free(expr);
}

static void
test_handlers(void **state)
{
	int in_fd;
	pid_t srv;
	int port = t_httpd_start(&in_fd, &srv);
	char *ci = t_db_migrated("t_trace_handlers");
	PGconn *c = t_connect(ci);
	/* "trace": the fixture program's kind. */
	const char *kinds[] = {"ex", "hook", "trace", "plug"};
	long long with[4], without[4];
	for (int i = 0; i < 4; i++) {
		with[i] = t_long(c,
				 "select pgjob.enqueue('%s', traceparent =>"
				 " '%s')",
				 kinds[i], TP);
		without[i] = t_long(c, "select pgjob.enqueue('%s')", kinds[i]);
	}
	long long old = t_long(c, "select pgjob.enqueue('old')");
	/* A queue with flow control: claimed by pgjob.claim_limited(). */
	long long lim = t_long(c,
			       "select pgjob.enqueue('lim', queue => 'lim',"
			       " traceparent => '%s')",
			       TP);
	pid_t p = t_start(
		"trace", ci,
		"workers: 1\n"
		"queues: { lim: { global_concurrency: 2 } }\n"
		"handlers:\n"
		"  ex: { type: exec, command: [\"/bin/sh\", \"-c\","
		" \"printf '{\\\"tp\\\": \\\"%%s\\\"}' "
		"\\\"$$TRACEPARENT\\\"\"]"
		" }\n"
		"  lim: { type: exec, queue: lim, command: [\"/bin/sh\", "
		"\"-c\","
		" \"printf '{\\\"tp\\\": \\\"%%s\\\"}' "
		"\\\"$$TRACEPARENT\\\"\"] }\n"
		"  hook: { type: http, url: \"http://127.0.0.1:%d/ok\" }\n"
		"  trace: { type: process, command: [\"python3\", \"%s\"],"
		" env: [\"PYTHONPATH=%s\"] }\n"
		"  plug: { type: plugin, library: \"%s\","
		" symbol: echo_trace }\n"
		"  old: { type: plugin, library: \"%s\", symbol: abi_one }\n",
		port, t_src("tests/fixtures/process/handlers.py"),
		t_src("clients/python"), t_bin("pgjobd_test_plugins.so"),
		t_bin("pgjobd_test_plugins.so"));
	assert_attempt_tp(c, with[0], "result->>'tp'");
	assert_attempt_tp(c, with[1], "result->'headers'->>'traceparent'");
	assert_attempt_tp(c, with[2], "result->>'traceparent'");
	assert_attempt_tp(c, with[3], "result->>'traceparent'");
	assert_attempt_tp(c, lim, "result->>'tp'");
	t_assert_value(c, "1",
		       "select count(*) from pgjob.limits where queue = 'lim'");
	for (int i = 0; i < 4; i++)
		t_wait_state(c, without[i], "done", 60);
	t_assert_job(c, without[0], "result->>'tp'", "");
	t_assert_job(c, without[1], "result->'headers' ? 'traceparent'", "f");
	t_assert_job(c, without[2], "result->>'traceparent' is null", "t");
	t_assert_job(c, without[3], "result->>'traceparent' is null", "t");
	/* A plugin built for ABI 1 still runs. */
	t_wait_state(c, old, "done", 60);
	t_stop_clean(p);
	t_httpd_stop(in_fd, srv);
	PQfinish(c);
	free(ci);
}

/*
 * The OTLP receiver's package, @opentelemetry/otlp-transformer (its
 * protobuf schema generated from opentelemetry-proto), in the build folder:
 * installed with npm when missing.  NULL when npm cannot install it (no
 * registry reachable).
 */
static const char *
otlp_node(void)
{
	static char dir[1024];
	char root[1200];
	snprintf(dir, sizeof(dir), "%s", t_bin("otlp-node"));
	snprintf(root, sizeof(root),
		 "%s/node_modules/@opentelemetry/otlp-transformer/build/src/"
		 "generated/root.js",
		 dir);
	if (access(root, R_OK) == 0)
		return dir;
	/* The last version that ships the generated schema. */
	const char *argv[] = {
		"npm",	      "install",
		"--prefix",   dir,
		"--no-audit", "--no-fund",
		"--silent",   "@opentelemetry/otlp-transformer@0.52.1",
		NULL};
	struct t_run r;
	t_run(&r, 300, NULL, argv);
	int ok = r.status == 0 && access(root, R_OK) == 0;
	if (!ok)
		print_message("npm install failed (%d): %s\n", r.status, r.err);
	t_run_free(&r);
	return ok ? dir : NULL;
}

/* The value of the series "name{labels}" (or "name") in the /metrics on
 * port, or -1 when it is not there. */
static double
metric(int port, const char *series)
{
	char *body = t_http_get(port, "/metrics");
	double v = -1;
	char *needle = xasprintf("\n%s ", series);
	const char *p = body ? strstr(body, needle) : NULL;
	if (p)
		v = strtod(p + strlen(needle), NULL);
	free(needle);
	free(body);
	return v;
}

/* Waits up to 60 s for series to reach at least min. */
static double
wait_metric(int port, const char *series, double min)
{
	double v = -1;
	for (int i = 0; i < 600 && (v = metric(port, series)) < min; i++)
		t_sleep_ms(100);
	if (v < min) {
		char *body = t_http_get(port, "/metrics");
		fail_msg("%s: %g, not %g or more in:\n%s", series, v, min,
			 body ? strstr(body, "pgjobd_trace") : "(none)");
	}
	return v;
}

/* The receiver's line of the span named name of job id's attempt, or of
 * its enqueue (attempt 0): one, or the test fails (caller frees). */
static char *
span_of(const char *text, const char *name, long long id, int attempt)
{
	char *want = xasprintf("\"name\":\"%s\"", name);
	char *idn = xasprintf("\"messaging.message.id\":\"%lld\"", id);
	char *att = xasprintf("\"pgjob.attempt\":\"%d\"", attempt);
	char *found = NULL;
	int n = 0;
	for (const char *p = text; p && *p;) {
		const char *e = strchr(p, '\n');
		char *l = xasprintf("%.*s", (int)(e ? e - p : (long)strlen(p)),
				    p);
		if (strstr(l, want) && strstr(l, idn) &&
		    (attempt ? strstr(l, att) != NULL
			     : strstr(l, "pgjob.attempt") == NULL)) {
			n++;
			free(found);
			found = l;
		} else {
			free(l);
		}
		p = e ? e + 1 : NULL;
	}
	if (n != 1)
		fail_msg("%d spans %s of job %lld attempt %d in:\n%s", n, want,
			 id, attempt, text);
	free(want);
	free(idn);
	free(att);
	return found;
}

/* The number after "key":" in a receiver's line. */
static long long
num(const char *line, const char *key)
{
	char *k = xasprintf("\"%s\":\"", key);
	const char *p = strstr(line, k);
	if (!p)
		fail_msg("no %s in %s", key, line);
	long long v = strtoll(p + strlen(k), NULL, 10);
	free(k);
	return v;
}

/* The string after "key":" in a receiver's line (caller frees). */
static char *
str(const char *line, const char *key)
{
	char *k = xasprintf("\"%s\":\"", key);
	const char *p = strstr(line, k);
	if (!p)
		fail_msg("no %s in %s", key, line);
	p += strlen(k);
	char *v = xasprintf("%.*s", (int)strcspn(p, "\""), p);
	free(k);
	return v;
}

/*
 * Starts tests/fixtures/otlp/receiver.js with OpenTelemetry's package in
 * node, writing what it decodes to out (emptied first), answering status
 * (NULL: 200); its port in *port.
 */
static pid_t
receiver(const char *node, const char *out, const char *status, int *port)
{
	static int n;
	char name[32];
	snprintf(name, sizeof(name), "otlp%d", ++n);
	unlink(out);
	char *env = xasprintf("OTLP_NODE=%s", node);
	char *st = xasprintf("OTLP_STATUS=%s", status ? status : "200");
	const char *renv[] = {env, st, NULL};
	const char *rargv[] = {"node", t_src("tests/fixtures/otlp/receiver.js"),
			       out, NULL};
	pid_t rcv = t_spawn(t_log(name), renv, rargv);
	*port = 0;
	for (int i = 0; i < 600 && *port <= 0; i++) {
		char *s = t_read_file(t_log(name));
		*port = s ? atoi(s) : 0;
		free(s);
		if (*port <= 0)
			t_sleep_ms(50);
	}
	assert_true(*port > 0);
	free(env);
	free(st);
	return rcv;
}

/* Asserts that span (a receiver's line) is a child of the enqueue's span
 * in the job's trace, and returns its start and end. */
static void
check_span(const char *span, const char *name, int kind, long long *start,
	   long long *end)
{
	char *want[] = {
		xasprintf("\"traceId\":\"%s\"", TRACE),
		xasprintf("\"parentSpanId\":\"%s\"", PARENT),
		xasprintf("\"name\":\"%s\"", name),
		xasprintf("\"kind\":%d", kind),
		xasprintf("\"service\":\"pgjobd-test\""),
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(*want); i++) {
		if (!strstr(span, want[i]))
			fail_msg("%s not in %s", want[i], span);
		free(want[i]);
	}
	*start = num(span, "start");
	*end = num(span, "end");
	assert_true(*start > 0 && *start <= *end);
}

/*
 * tracing: otlp_endpoint: the spans of jobs in a trace, sent over OTLP/HTTP
 * to a receiver that decodes them with OpenTelemetry's own schema
 * (tests/fixtures/otlp/receiver.js): per attempt its span (the span id its
 * handler got) and its wait's, per job its enqueue's once, all children of
 * the enqueue's span in the job's trace, in order in time, with the kind,
 * queue, attempt and outcome; both claims (a limited queue's too).  A job
 * without a trace sends none.  /metrics counts them.
 */
static void
test_export(void **state)
{
	const char *node = otlp_node();
	if (!node) {
		print_message("skipped: npm cannot install "
			      "@opentelemetry/otlp-transformer (is the npm "
			      "registry reachable?)\n");
		skip();
	}
	char *out = xasprintf("%s/otlp.out", t_tmpdir());
	int port;
	pid_t rcv = receiver(node, out, NULL, &port);

	char *ci = t_db_migrated("t_trace_export");
	PGconn *c = t_connect(ci);
	long long ok = t_long(
		c, "select pgjob.enqueue('ok', traceparent => '%s')", TP);
	/* Queue q2 has flow control: pgjob.claim_limited() claims it. */
	long long bad = t_long(c,
			       "select pgjob.enqueue('bad', queue => 'q2',"
			       " traceparent => '%s')",
			       TP);
	long long flaky = t_long(
		c, "select pgjob.enqueue('flaky', traceparent => '%s')", TP);
	long long none = t_long(c, "select pgjob.enqueue('ok')");
	int mport = t_free_port();
	pid_t p = t_start("export", ci,
			  "workers: 1\n"
			  "metrics: { listen: \"127.0.0.1:%d\" }\n"
			  "tracing: { otlp_endpoint: \"http://127.0.0.1:%d/\","
			  " service_name: pgjobd-test, buffer: 16 }\n"
			  "queues: { q2: { global_concurrency: 1 } }\n"
			  "handlers:\n"
			  "  ok: { type: exec, command: [\"/bin/sh\", \"-c\","
			  " \"printf '{\\\"tp\\\": \\\"%%s\\\"}' "
			  "\\\"$$TRACEPARENT\\\"\"] }\n"
			  "  bad: { type: exec, queue: q2, max_attempts: 1,"
			  " command: [\"/bin/sh\", \"-c\", \"exit 3\"] }\n"
			  "  flaky: { type: exec, max_attempts: 2,"
			  " backoff: { base: 100ms, max: 100ms },"
			  " command: [\"/bin/sh\", \"-c\","
			  " \"test $$PGJOB_ATTEMPT -gt 1\"] }\n",
			  mport, port);
	t_wait_state(c, ok, "done", 60);
	t_wait_state(c, bad, "dead", 60);
	t_wait_state(c, flaky, "done", 60);
	t_wait_state(c, none, "done", 60);
	/* ok and bad: enqueue, wait, attempt; flaky: its enqueue, and two
	 * attempts each with its wait.  The sender sends within a second. */
	wait_metric(mport, "pgjobd_trace_spans_exported_total", 11);
	assert_true(metric(mport, "pgjobd_trace_spans_dropped_total") == 0);
	assert_true(metric(mport, "pgjobd_trace_spans_failed_total") == 0);
	assert_true(metric(mport, "pgjobd_trace_buffer_capacity_spans") == 16);
	assert_true(metric(mport, "pgjobd_trace_export_seconds_count") >= 1);
	t_stop_clean(p);
	char *text = t_read_file(out);
	assert_non_null(text);
	assert_null(strstr(text, "\"error\""));
	assert_int_equal(t_count_in_file(out, "\"traceId\""), 11);

	/* ok's attempt: the span id its handler got. */
	char *tp = t_job(c, ok, "result->>'tp'");
	char *needle = xasprintf("\"spanId\":\"%.16s\"", tp + 36);
	char *l = span_of(text, "process default", ok, 1);
	assert_non_null(strstr(l, needle));
	static const char *const want_ok[] = {
		"\"status\":1",
		"\"pgjob.kind\":\"ok\"",
		"\"pgjob.outcome\":\"done\"",
		"\"messaging.destination.name\":\"default\"",
		"\"messaging.operation.type\":\"process\"",
	};
	for (size_t i = 0; i < sizeof(want_ok) / sizeof(*want_ok); i++)
		if (!strstr(l, want_ok[i]))
			fail_msg("%s not in %s", want_ok[i], l);
	free(l);

	/* Each job: enqueue <= wait's start <= wait's end = the attempt's
	 * start <= its end; the wait has the attempt's attributes. */
	struct {
		long long id;
		const char *queue, *outcome;
		int attempts, status;
	} jobs[] = {{ok, "default", "done", 1, 1},
		    {bad, "q2", "dead", 1, 2},
		    {flaky, "default", "done", 2, 1}};
	for (size_t j = 0; j < sizeof(jobs) / sizeof(*jobs); j++) {
		char name[64];
		long long es, ee, ws, we, as, ae;
		snprintf(name, sizeof(name), "send %s", jobs[j].queue);
		char *enq = span_of(text, name, jobs[j].id, 0);
		check_span(enq, name, 4, &es, &ee);
		assert_true(es == ee);
		assert_non_null(strstr(enq, "\"messaging.operation.type\":"
					    "\"send\""));
		char *ids[5] = {str(enq, "spanId")};
		int nids = 1;
		for (int a = 1; a <= jobs[j].attempts; a++) {
			int last = a == jobs[j].attempts;
			const char *outcome = last ? jobs[j].outcome : "retry";
			char *o =
				xasprintf("\"pgjob.outcome\":\"%s\"", outcome);
			snprintf(name, sizeof(name), "wait %s", jobs[j].queue);
			char *w = span_of(text, name, jobs[j].id, a);
			check_span(w, name, 1, &ws, &we);
			assert_non_null(strstr(w, o));
			assert_null(strstr(w, "\"status\":2"));
			snprintf(name, sizeof(name), "process %s",
				 jobs[j].queue);
			char *at = span_of(text, name, jobs[j].id, a);
			check_span(at, name, 5, &as, &ae);
			assert_non_null(strstr(at, o));
			char *st = xasprintf("\"status\":%d",
					     last ? jobs[j].status : 2);
			assert_non_null(strstr(at, st));
			assert_true(es <= ws);
			assert_true(we == as);
			ids[nids++] = str(w, "spanId");
			ids[nids++] = str(at, "spanId");
			free(st);
			free(o);
			free(w);
			free(at);
		}
		for (int x = 0; x < nids; x++)
			for (int y = x + 1; y < nids; y++)
				assert_string_not_equal(ids[x], ids[y]);
		for (int x = 0; x < nids; x++)
			free(ids[x]);
		free(enq);
	}
	t_wait_log("export", "tracing: 11 spans sent, 0 dropped", 1, 10);

	t_stop(rcv, SIGTERM, 10);
	free(needle);
	free(tp);
	free(text);
	free(out);
	PQfinish(c);
	free(ci);
}

/*
 * An endpoint that never answers, then none at all: the jobs run to the
 * end all the same, the spans that find the buffer full are dropped and
 * counted, and the requests that fail are counted by reason (/metrics).
 */
static void
test_export_fails(void **state)
{
	/* A socket that listens and never accepts: the kernel completes
	 * the connections, and the requests wait for an answer.  Not
	 * inherited: pgjobd must not keep it open once it is closed here. */
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(lfd, 16), 0);
	assert_int_equal(getsockname(lfd, (struct sockaddr *)&sa, &len), 0);
	int port = ntohs(sa.sin_port);

	char *ci = t_db_migrated("t_trace_fails");
	PGconn *c = t_connect(ci);
	t_exec(c,
	       "select pgjob.enqueue('n', traceparent => '%s')"
	       " from generate_series(1, 30)",
	       TP);
	int mport = t_free_port();
	pid_t p = t_start("fails", ci,
			  "workers: 1\n"
			  "metrics: { listen: \"127.0.0.1:%d\" }\n"
			  "tracing: { otlp_endpoint: \"http://127.0.0.1:%d\","
			  " buffer: 3 }\n"
			  "handlers:\n"
			  "  n: { type: exec, command: [\"/bin/true\"] }\n",
			  mport, port);
	t_wait_until(c, 60,
		     "select count(*) = 30 from pgjob.all_jobs"
		     " where state = 'done'");
	/* All done while no request was ever answered: every attempt after
	 * the first that the buffer (one attempt's spans) held was
	 * dropped. */
	assert_true(metric(mport, "pgjobd_trace_spans_exported_total") == 0);
	wait_metric(mport, "pgjobd_trace_spans_dropped_total", 3);
	assert_true(metric(mport, "pgjobd_trace_buffer_capacity_spans") == 3);

	/* Nothing listens any more: refused. */
	close(lfd);
	long long one =
		t_long(c, "select pgjob.enqueue('n', traceparent => '%s')", TP);
	t_wait_state(c, one, "done", 60);
	wait_metric(mport,
		    "pgjobd_trace_export_failures_total{reason=\"connect\"}",
		    1);
	wait_metric(mport, "pgjobd_trace_spans_failed_total", 2);
	assert_true(metric(mport, "pgjobd_trace_spans_exported_total") == 0);
	t_stop_clean(p);
	t_wait_log("fails", "tracing: 0 spans sent", 1, 10);
	PQfinish(c);
	free(ci);
}

/*
 * The receiver decodes every request and answers 503: each request counts
 * as failed for its status, its spans as failed, none as exported.
 */
static void
test_export_refused(void **state)
{
	const char *node = otlp_node();
	if (!node) {
		print_message("skipped: npm cannot install "
			      "@opentelemetry/otlp-transformer\n");
		skip();
	}
	char *out = xasprintf("%s/otlp-refused.out", t_tmpdir());
	int port;
	pid_t rcv = receiver(node, out, "503", &port);
	char *ci = t_db_migrated("t_trace_refused");
	PGconn *c = t_connect(ci);
	long long id =
		t_long(c, "select pgjob.enqueue('n', traceparent => '%s')", TP);
	int mport = t_free_port();
	pid_t p =
		t_start("refused", ci,
			"workers: 1\n"
			"metrics: { listen: \"127.0.0.1:%d\" }\n"
			"tracing: { otlp_endpoint: \"http://127.0.0.1:%d\" }\n"
			"handlers:\n"
			"  n: { type: exec, command: [\"/bin/true\"] }\n",
			mport, port);
	t_wait_state(c, id, "done", 60);
	wait_metric(mport,
		    "pgjobd_trace_export_failures_total{reason=\"status\"}", 1);
	assert_true(metric(mport, "pgjobd_trace_spans_failed_total") == 3);
	assert_true(metric(mport, "pgjobd_trace_spans_exported_total") == 0);
	t_stop_clean(p);
	/* It did decode them: the request was valid, only refused. */
	assert_int_equal(t_count_in_file(out, "\"traceId\""), 3);
	t_stop(rcv, SIGTERM, 10);
	PQfinish(c);
	free(ci);
	free(out);
}

/*
 * A limited claim's statement and a job whose enqueue commits while the
 * claim runs: pgjob.claim_limited() claims it under a snapshot newer than
 * the statement's, and the job's traceparent must come with it (the
 * statement once read it by a join in its own older snapshot, and the job
 * ran outside its trace).  The claim is held, after its statement began,
 * by a lock on pgjob.limits; the enqueue commits while it waits.
 */
static void
test_limited_race(void **state)
{
	(void)state;
	char *ci = t_db_migrated("t_trace_limited_race");
	PGconn *c = t_connect(ci), *e = t_connect(ci), *l = t_connect(ci),
	       *w = t_connect(ci);
	t_exec(c, "insert into pgjob.limits (queue, global_concurrency,"
		  " source) values ('lq', 100, 'sql')");
	t_exec(e, "begin");
	long long id = t_long(e,
			      "select pgjob.enqueue('k', queue => 'lq',"
			      " traceparent => '%s')",
			      TP);
	t_exec(l, "begin");
	t_exec(l, "lock table pgjob.limits in access exclusive mode");
	long long wpid = t_long(w, "select pg_backend_pid()");
	const char *p[] = {"lq", "10",	  "{k}",    "parallel",
			   "w",	 "60000", "1048576"};
	assert_int_equal(PQsendQueryParams(w, queue_claim_limited_sql, 7, NULL,
					   p, NULL, NULL, 0),
			 1);
	/* The claim's statement has its snapshot and waits for the lock. */
	t_wait_until(c, 60,
		     "select wait_event_type = 'Lock' from pg_stat_activity"
		     " where pid = %lld",
		     wpid);
	t_exec(e, "commit");
	t_exec(l, "commit");
	PGresult *r = PQgetResult(w);
	assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
	assert_int_equal(PQntuples(r), 1);
	assert_string_equal(PQgetvalue(r, 0, 0), "c");
	assert_int_equal(atoll(PQgetvalue(r, 0, 1)), id);
	assert_string_equal(PQgetvalue(r, 0, 14), TP);
	assert_false(PQgetisnull(r, 0, 15));
	assert_false(PQgetisnull(r, 0, 16));
	PQclear(r);
	while ((r = PQgetResult(w)))
		PQclear(r);
	PQfinish(w);
	PQfinish(l);
	PQfinish(e);
	PQfinish(c);
	free(ci);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_enqueue),
		cmocka_unit_test(test_handlers),
		cmocka_unit_test(test_export),
		cmocka_unit_test(test_export_fails),
		cmocka_unit_test(test_export_refused),
		cmocka_unit_test(test_limited_race),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
