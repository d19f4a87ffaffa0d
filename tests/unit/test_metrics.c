/* Unit tests for metrics: a real server on a loopback port of a loop of the
 * test's own, driven with ev_run(EVRUN_NOWAIT) between plain-socket client
 * steps (status codes, HEAD, oversize and malformed requests, slow clients,
 * the connection limit, fork), and the exact Prometheus text; the series of
 * monitoring (time in queue, timeouts, dead and scheduled jobs, schedules,
 * the database, process_*) as prom_render() and
 * procmetrics_render() write them. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <ev.h>

#include "common/log.h"
#include "common/metrics.h"
#include "common/stats.h"
#include "daemon/httpd.h"
#include "daemon/procmetrics.h"
#include "daemon/prom.h"
#include "common/util.h"

#define BIG (1024 * 1024) /* a body far larger than a socket buffer */

struct fixture {
	struct ev_loop *loop;
	struct httpd *s;
	int healthy;
	char last_path[256];
	int renders;
};

static int
render(void *arg, const char *path, struct buf *body, const char **ctype)
{
	struct fixture *f = arg;

	f->renders++;
	snprintf(f->last_path, sizeof(f->last_path), "%s", path);
	if (strcmp(path, "/metrics") == 0) {
		*ctype = METRICS_CONTENT_TYPE;
		buf_appendf(body, "pgjobd_up 1\n");
		return 200;
	}
	if (strcmp(path, "/healthz") == 0) {
		buf_appendf(body, "%s\n", f->healthy ? "ok" : "unhealthy");
		return f->healthy ? 200 : 503;
	}
	if (strcmp(path, "/big") == 0) {
		for (int i = 0; i < BIG / 16; i++)
			buf_append(body, "0123456789abcde\n", 16);
		return 200;
	}
	if (strcmp(path, "/bad") == 0)
		return 42; /* not an HTTP status: the server says 500 */
	buf_appendf(body, "not found\n");
	return 404;
}

static int
setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char *err = NULL;

	f->loop = ev_loop_new(EVFLAG_AUTO);
	f->healthy = 1;
	f->s = httpd_listen(f->loop, "127.0.0.1:0", render, f, &err);
	if (!f->s) {
		fprintf(stderr, "metrics_listen: %s\n", err);
		return -1;
	}
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;
	httpd_close(f->s);
	ev_loop_destroy(f->loop);
	free(f);
	return 0;
}

static int
connect_to(int family, int port)
{
	struct sockaddr_storage ss = {0};
	socklen_t len;
	int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	if (family == AF_INET6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
		a->sin6_family = AF_INET6;
		a->sin6_port = htons((uint16_t)port);
		a->sin6_addr = in6addr_loopback;
		len = sizeof(*a);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;
		a->sin_family = AF_INET;
		a->sin_port = htons((uint16_t)port);
		a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		len = sizeof(*a);
	}
	assert_int_equal(connect(fd, (struct sockaddr *)&ss, len), 0);
	return fd;
}

/* Drives the loop once, then waits up to 5 ms for fd to become readable. */
static void
spin(struct fixture *f, int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	ev_run(f->loop, EVRUN_NOWAIT);
	poll(&p, 1, 5);
}

/*
 * Reads from fd until EOF (or a reset), driving the loop in between;
 * returns what came (caller frees with buf_free()).  Fails after 5 s.
 */
static struct buf
read_all(struct fixture *f, int fd)
{
	struct buf b = {0};
	char chunk[65536];
	int64_t deadline = util_now_ms() + 30000; /* a guard, not a measure */

	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	buf_append(&b, "", 0);
	for (;;) {
		ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
		if (n > 0) {
			buf_append(&b, chunk, (size_t)n);
			continue;
		}
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return b;
		assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
		assert_true(util_now_ms() < deadline);
		spin(f, fd);
	}
}

/* Sends req on a new connection and returns the whole response. */
static struct buf
exchange_on(struct fixture *f, int family, int port, const char *req,
	    size_t len)
{
	int fd = connect_to(family, port);
	size_t off = 0;
	int64_t deadline = util_now_ms() + 5000;

	/* Non-blocking, with the loop driven in between: a request larger
	 * than the socket buffers must not deadlock the test. */
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	while (off < len) {
		ssize_t n = send(fd, req + off, len - off, MSG_NOSIGNAL);
		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (errno == EPIPE || errno == ECONNRESET)
			break;
		assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
		assert_true(util_now_ms() < deadline);
		ev_run(f->loop, EVRUN_NOWAIT);
	}
	struct buf b = read_all(f, fd);
	close(fd);
	return b;
}

static struct buf
exchange(struct fixture *f, const char *req)
{
	return exchange_on(f, AF_INET, httpd_port(f->s), req, strlen(req));
}

/* The status code of a response, or -1. */
static int
status_of(const struct buf *b)
{
	int status;
	if (sscanf(b->data, "HTTP/1.0 %d ", &status) != 1)
		return -1;
	return status;
}

/* The body of a response (after the empty line). */
static const char *
body_of(const struct buf *b)
{
	const char *p = strstr(b->data, "\r\n\r\n");
	assert_non_null(p);
	return p + 4;
}

static void
test_get(void **state)
{
	struct fixture *f = *state;
	struct buf r = exchange(f, "GET /metrics HTTP/1.1\r\n"
				   "Host: localhost\r\n\r\n");
	assert_string_equal(r.data, "HTTP/1.0 200 OK\r\n"
				    "Content-Type: " METRICS_CONTENT_TYPE "\r\n"
				    "Content-Length: 12\r\n"
				    "Cache-Control: no-store\r\n"
				    "Connection: close\r\n\r\n"
				    "pgjobd_up 1\n");
	buf_free(&r);

	/* Bare LF line ends, HTTP/1.0, a query string. */
	r = exchange(f, "GET /metrics?name[]=x HTTP/1.0\n\n");
	assert_int_equal(status_of(&r), 200);
	assert_string_equal(f->last_path, "/metrics");
	assert_string_equal(body_of(&r), "pgjobd_up 1\n");
	buf_free(&r);
}

static void
test_status(void **state)
{
	struct fixture *f = *state;
	struct buf r = exchange(f, "GET /nope HTTP/1.1\r\n\r\n");
	assert_int_equal(status_of(&r), 404);
	assert_string_equal(body_of(&r), "not found\n");
	assert_non_null(strstr(r.data, "Content-Type: text/plain; "
				       "charset=utf-8\r\n"));
	buf_free(&r);

	r = exchange(f, "GET /healthz HTTP/1.1\r\n\r\n");
	assert_int_equal(status_of(&r), 200);
	assert_string_equal(body_of(&r), "ok\n");
	buf_free(&r);
	f->healthy = 0;
	r = exchange(f, "GET /healthz HTTP/1.1\r\n\r\n");
	assert_int_equal(status_of(&r), 503);
	assert_non_null(strstr(r.data, " 503 Service Unavailable\r\n"));
	assert_string_equal(body_of(&r), "unhealthy\n");
	buf_free(&r);
	f->healthy = 1;

	r = exchange(f, "GET /bad HTTP/1.1\r\n\r\n");
	assert_int_equal(status_of(&r), 500);
	buf_free(&r);
}

static void
test_head(void **state)
{
	struct fixture *f = *state;
	struct buf r = exchange(f, "HEAD /metrics HTTP/1.1\r\n\r\n");
	assert_int_equal(status_of(&r), 200);
	assert_non_null(strstr(r.data, "Content-Length: 12\r\n"));
	assert_string_equal(body_of(&r), "");
	buf_free(&r);
}

static void
test_bad_requests(void **state)
{
	struct fixture *f = *state;
	int renders = f->renders;

	struct buf r = exchange(f, "POST /metrics HTTP/1.1\r\n"
				   "Content-Length: 2\r\n\r\nhi");
	assert_int_equal(status_of(&r), 405);
	assert_non_null(strstr(r.data, "\r\nAllow: GET, HEAD\r\n"));
	assert_string_equal(body_of(&r), "Method Not Allowed\n");
	buf_free(&r);

	const char *bad[] = {
		"hello\r\n\r\n",
		"GET metrics HTTP/1.1\r\n\r\n",
		"GET /metrics\r\n\r\n",
		"GET /metrics FTP/1.0\r\n\r\n",
		"GET /a b HTTP/1.1\r\n\r\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		r = exchange(f, bad[i]);
		assert_int_equal(status_of(&r), 400);
		buf_free(&r);
	}
	r = exchange_on(f, AF_INET, httpd_port(f->s),
			"GET /\0x HTTP/1.1\r\n\r\n", 20);
	assert_int_equal(status_of(&r), 400);
	buf_free(&r);
	assert_int_equal(f->renders, renders);
}

/* Over 8 KiB of request head: 431; exactly 8 KiB is still served. */
static void
test_oversize(void **state)
{
	struct fixture *f = *state;
	struct buf req = {0};

	buf_appendf(&req, "GET /metrics HTTP/1.1\r\nX-Pad: ");
	while (req.len < 8192 - 4)
		buf_append(&req, "a", 1);
	buf_append(&req, "\r\n\r\n", 4);
	assert_int_equal(req.len, 8192);
	struct buf r =
		exchange_on(f, AF_INET, httpd_port(f->s), req.data, req.len);
	assert_int_equal(status_of(&r), 200);
	buf_free(&r);

	req.len -= 4;
	while (req.len < 9000)
		buf_append(&req, "a", 1);
	r = exchange_on(f, AF_INET, httpd_port(f->s), req.data, req.len);
	assert_int_equal(status_of(&r), 431);
	assert_non_null(strstr(r.data, " 431 Request Header Fields Too "
				       "Large\r\n"));
	buf_free(&r);

	/* Much more than fits: the response still arrives intact. */
	while (req.len < 200000)
		buf_append(&req, "a", 1);
	r = exchange_on(f, AF_INET, httpd_port(f->s), req.data, req.len);
	assert_int_equal(status_of(&r), 431);
	buf_free(&r);
	buf_free(&req);
}

/* A body much larger than the socket buffers goes out in pieces. */
static void
test_big_body(void **state)
{
	struct fixture *f = *state;
	struct buf r = exchange(f, "GET /big HTTP/1.1\r\n\r\n");
	assert_int_equal(status_of(&r), 200);
	assert_int_equal(strlen(body_of(&r)), BIG);
	assert_non_null(strstr(r.data, "Content-Length: 1048576\r\n"));
	buf_free(&r);
}

/* Waits until fd sees EOF (or a reset); returns the milliseconds it took. */
static int64_t
ms_until_closed(struct fixture *f, int fd)
{
	int64_t start = util_now_ms();
	struct buf b = read_all(f, fd);
	buf_free(&b);
	return util_now_ms() - start;
}

/*
 * Clients that send nothing, or half a request, are dropped after the
 * timeout; meanwhile other requests are served at once.
 */
static void
test_slow_clients(void **state)
{
	struct fixture *f = *state;
	int64_t start = util_now_ms();

	httpd_set_timeout(f->s, 1.0);
	int silent = connect_to(AF_INET, httpd_port(f->s));
	int partial = connect_to(AF_INET, httpd_port(f->s));
	assert_int_equal(send(partial, "GET /met", 8, 0), 8);
	for (int i = 0; i < 10; i++)
		spin(f, partial);
	assert_int_equal(httpd_connections(f->s), 2);

	struct buf r = exchange(f, "GET /metrics HTTP/1.1\r\n\r\n");
	assert_int_equal(status_of(&r), 200);
	buf_free(&r);
	/* The served one goes once the server sees our close; the two slow
	 * ones are still there: it was served before their timeout, not
	 * after it (no clock read, which a loaded machine would stretch). */
	for (int i = 0; i < 10 && httpd_connections(f->s) > 2; i++)
		spin(f, -1);
	assert_int_equal(httpd_connections(f->s), 2);

	/* Dropped, each, by the timeout: not before it. */
	ms_until_closed(f, partial);
	assert_true(util_now_ms() - start >= 950);
	ms_until_closed(f, silent);
	assert_int_equal(httpd_connections(f->s), 0);
	close(silent);
	close(partial);
	ev_run(f->loop, EVRUN_NOWAIT);
	assert_int_equal(httpd_connections(f->s), 0);
	httpd_set_timeout(f->s, 5.);
}

/* Beyond 64 open connections a new one is closed at once. */
static void
test_connection_limit(void **state)
{
	struct fixture *f = *state;
	int fds[64], extra;

	for (int i = 0; i < 64; i++)
		fds[i] = connect_to(AF_INET, httpd_port(f->s));
	for (int i = 0; i < 100 && httpd_connections(f->s) < 64; i++)
		spin(f, fds[0]);
	assert_int_equal(httpd_connections(f->s), 64);

	extra = connect_to(AF_INET, httpd_port(f->s));
	assert_true(ms_until_closed(f, extra) < 1000);
	close(extra);
	assert_int_equal(httpd_connections(f->s), 64);

	for (int i = 0; i < 64; i++)
		close(fds[i]);
	for (int i = 0; i < 100 && httpd_connections(f->s) > 0; i++)
		spin(f, -1);
	assert_int_equal(httpd_connections(f->s), 0);
	struct buf r = exchange(f, "GET /metrics HTTP/1.1\r\n\r\n");
	assert_int_equal(status_of(&r), 200);
	buf_free(&r);
}

/*
 * A child that called httpd_forget() holds no copy of a connection, so
 * the client sees the close when the parent drops it, while the child
 * lives on.
 */
static void
test_forget_after_fork(void **state)
{
	struct fixture *f = *state;
	int p[2], status;
	char c;

	httpd_set_timeout(f->s, 0.2);
	int slow = connect_to(AF_INET, httpd_port(f->s));
	for (int i = 0; i < 100 && httpd_connections(f->s) < 1; i++)
		spin(f, slow);
	assert_int_equal(httpd_connections(f->s), 1);
	assert_int_equal(pipe(p), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(p[1]);
		httpd_forget(f->s);
		(void)!read(p[0], &c, 1); /* until the parent closes p[1] */
		_exit(0);
	}
	close(p[0]);
	assert_true(ms_until_closed(f, slow) < 2000);
	close(slow);
	close(p[1]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	httpd_set_timeout(f->s, 5.);
}

static void
test_parse_listen(void **state)
{
	const struct {
		const char *in, *host, *port;
	} ok[] = {
		{"127.0.0.1:9188", "127.0.0.1", "9188"},
		{"localhost:9188", "localhost", "9188"},
		{"[::1]:9188", "::1", "9188"},
		{"[::]:9188", "::", "9188"},
		{":9188", NULL, "9188"},
		{"*:9188", NULL, "9188"},
		{"0.0.0.0:0", "0.0.0.0", "0"},
		{"h:65535", "h", "65535"},
	};
	const char *bad[] = {
		"9188",	     "127.0.0.1", "127.0.0.1:",	 "::1:9188",
		"[::1]9188", "[::1:9188", "[]:9188",	 "h:65536",
		"h:-1",	     "h:12a",	  "h:000009188", ""};
	char *host, *port;

	for (size_t i = 0; i < sizeof(ok) / sizeof(*ok); i++) {
		assert_int_equal(metrics_parse_listen(ok[i].in, &host, &port),
				 0);
		if (ok[i].host)
			assert_string_equal(host, ok[i].host);
		else
			assert_null(host);
		assert_string_equal(port, ok[i].port);
		free(host);
		free(port);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		assert_int_equal(metrics_parse_listen(bad[i], &host, &port),
				 -1);
}

static void
test_listen_errors(void **state)
{
	struct fixture *f = *state;
	char addr[64], *err = NULL;

	assert_null(httpd_listen(f->loop, "nonsense", render, f, &err));
	assert_string_equal(err, "nonsense: expected \"host:port\", "
				 "\"[v6addr]:port\" or \":port\"");
	free(err);

	snprintf(addr, sizeof(addr), "127.0.0.1:%d", httpd_port(f->s));
	assert_null(httpd_listen(f->loop, addr, render, f, &err));
	char *want = xasprintf("%s: %s", addr, strerror(EADDRINUSE));
	assert_string_equal(err, want);
	free(want);
	free(err);

	/* TEST-NET-1: an address of no local interface. */
	assert_null(httpd_listen(f->loop, "192.0.2.1:0", render, f, &err));
	want = xasprintf("192.0.2.1:0: %s", strerror(EADDRNOTAVAIL));
	assert_string_equal(err, want);
	free(want);
	free(err);
}

/* ":0" listens on every interface (IPv4 too); "[::1]:0" where the host
 * has IPv6. */
static void
test_listen_forms(void **state)
{
	struct fixture *f = *state;
	char *err = NULL;
	struct httpd *s;
	struct buf r;
	const char *req = "GET /metrics HTTP/1.1\r\n\r\n";

	s = httpd_listen(f->loop, ":0", render, f, &err);
	assert_non_null(s);
	assert_true(httpd_port(s) > 0);
	r = exchange_on(f, AF_INET, httpd_port(s), req, strlen(req));
	assert_int_equal(status_of(&r), 200);
	buf_free(&r);
	httpd_close(s);

	int probe = socket(AF_INET6, SOCK_STREAM, 0);
	struct sockaddr_in6 a = {.sin6_family = AF_INET6,
				 .sin6_addr = IN6ADDR_LOOPBACK_INIT};
	int v6 = probe >= 0 &&
		 bind(probe, (struct sockaddr *)&a, sizeof(a)) == 0;
	if (probe >= 0)
		close(probe);
	if (!v6) {
		fprintf(stderr, "# no IPv6 loopback: [::1] not tested\n");
		return;
	}
	s = httpd_listen(f->loop, "[::1]:0", render, f, &err);
	assert_non_null(s);
	r = exchange_on(f, AF_INET6, httpd_port(s), req, strlen(req));
	assert_int_equal(status_of(&r), 200);
	buf_free(&r);
	httpd_close(s);
}

/* ---- the text format ---- */

/* A label value is valid UTF-8 without control characters whatever it
 * holds: a byte that is not UTF-8 (a name cut inside a character, say) and
 * a control character read '?', so that one hostile or truncated name
 * cannot make the whole scrape unparseable. */
static void
test_label_sanitised(void **state)
{
	struct buf l = {0};

	metrics_label(&l, "queue", "a\r\tb\x1b[2J\xc3\xa9\xc3");
	metrics_label(&l, "kind", "\xff\xfe\xe2\x82\xac\x7f");
	assert_string_equal(l.data, "queue=\"a??b?[2J\xc3\xa9?\","
				    "kind=\"??\xe2\x82\xac?\"");
	buf_free(&l);
}

static void
test_text(void **state)
{
	struct buf b = {0}, l = {0};

	metrics_label(&l, "queue", "de\"f\\ault\nx");
	metrics_label_int(&l, "slot", 3);
	metrics_counter(&b, "pgjobd_jobs_total",
			"Jobs finished.\nBy \"outcome\" \\ kind.", l.data, 42);
	metrics_counter(&b, "pgjobd_jobs_total", NULL, NULL, 0.5);
	metrics_counter(&b, "pgjobd_jobs_total", NULL, "", 1e21);
	metrics_gauge(&b, "pgjobd_workers", "Workers.", NULL, 4);
	metrics_gauge(&b, "pgjobd_workers", NULL, "a=\"1\"", 0.1);
	metrics_gauge(&b, "pgjobd_workers", NULL, "a=\"2\"", -3);
	metrics_gauge(&b, "pgjobd_workers", NULL, "a=\"3\"", 1e-7);
	metrics_gauge(&b, "pgjobd_workers", NULL, "a=\"4\"", NAN);
	metrics_gauge(&b, "pgjobd_workers", NULL, "a=\"5\"", INFINITY);
	metrics_gauge(&b, "pgjobd_workers", NULL, "a=\"6\"", -INFINITY);
	metrics_gauge(&b, "pgjobd_workers", NULL, "a=\"7\"", 1.0 / 3);
	metrics_gauge(&b, "pgjobd_workers", NULL, "a=\"8\"", 1700000000123.0);
	metrics_header(&b, "pgjobd_empty", "gauge", "No series yet.");
	assert_string_equal(
		b.data,
		"# HELP pgjobd_jobs_total Jobs finished.\\nBy \"outcome\" "
		"\\\\ kind.\n"
		"# TYPE pgjobd_jobs_total counter\n"
		"pgjobd_jobs_total{queue=\"de\\\"f\\\\ault\\nx\",slot=\"3\"} "
		"42\n"
		"pgjobd_jobs_total 0.5\n"
		"pgjobd_jobs_total 1e+21\n"
		"# HELP pgjobd_workers Workers.\n"
		"# TYPE pgjobd_workers gauge\n"
		"pgjobd_workers 4\n"
		"pgjobd_workers{a=\"1\"} 0.1\n"
		"pgjobd_workers{a=\"2\"} -3\n"
		"pgjobd_workers{a=\"3\"} 1e-07\n"
		"pgjobd_workers{a=\"4\"} NaN\n"
		"pgjobd_workers{a=\"5\"} +Inf\n"
		"pgjobd_workers{a=\"6\"} -Inf\n"
		"pgjobd_workers{a=\"7\"} 0.3333333333333333\n"
		"pgjobd_workers{a=\"8\"} 1700000000123\n"
		"# HELP pgjobd_empty No series yet.\n"
		"# TYPE pgjobd_empty gauge\n");
	buf_free(&b);
	buf_free(&l);
}

static void
test_histogram(void **state)
{
	const double bounds[] = {0.005, 0.1, 1, 10};
	const uint64_t counts[] = {1, 2, 0, 3};
	struct buf b = {0}, l = {0};

	metrics_label(&l, "kind", "send \"mail\"");
	metrics_histogram(&b, "pgjobd_job_seconds", "Job wall time.", l.data,
			  bounds, counts, 4, 12.5, 7);
	metrics_histogram(&b, "pgjobd_job_seconds", NULL, NULL, bounds, counts,
			  0, 0, 0);
	assert_string_equal(
		b.data,
		"# HELP pgjobd_job_seconds Job wall time.\n"
		"# TYPE pgjobd_job_seconds histogram\n"
		"pgjobd_job_seconds_bucket{kind=\"send \\\"mail\\\"\","
		"le=\"0.005\"} 1\n"
		"pgjobd_job_seconds_bucket{kind=\"send \\\"mail\\\"\","
		"le=\"0.1\"} 3\n"
		"pgjobd_job_seconds_bucket{kind=\"send \\\"mail\\\"\","
		"le=\"1\"} 3\n"
		"pgjobd_job_seconds_bucket{kind=\"send \\\"mail\\\"\","
		"le=\"10\"} 6\n"
		"pgjobd_job_seconds_bucket{kind=\"send \\\"mail\\\"\","
		"le=\"+Inf\"} 7\n"
		"pgjobd_job_seconds_sum{kind=\"send \\\"mail\\\"\"} 12.5\n"
		"pgjobd_job_seconds_count{kind=\"send \\\"mail\\\"\"} 7\n"
		"pgjobd_job_seconds_bucket{le=\"+Inf\"} 0\n"
		"pgjobd_job_seconds_sum 0\n"
		"pgjobd_job_seconds_count 0\n");
	buf_free(&b);
	buf_free(&l);
}

static void
test_bucket(void **state)
{
	const double bounds[] = {1, 2, 5};

	assert_int_equal(metrics_bucket(bounds, 3, 0.5), 0);
	assert_int_equal(metrics_bucket(bounds, 3, 1), 0);
	assert_int_equal(metrics_bucket(bounds, 3, 1.5), 1);
	assert_int_equal(metrics_bucket(bounds, 3, 5), 2);
	assert_int_equal(metrics_bucket(bounds, 3, 6), 3);
	assert_int_equal(metrics_bucket(bounds, 3, NAN), 3);
	assert_int_equal(metrics_bucket(bounds, 0, 1), 0);
}

/* The health series: written by the lease holder's worker, rendered while
 * fresh, left out once stale or never written. */
static void
test_health_series(void **state)
{
	struct stats *s = stats_create();
	struct buf out = {0};
	assert_non_null(s);
	prom_render(s, 0, 1, &out);
	assert_null(strstr(out.data, "pgjobd_db_xmin"));
	assert_null(strstr(out.data, "pgjobd_db_dead_tuples"));
	buf_reset(&out);

	struct stats_health *h = &s->health;
	int64_t now = util_now_ms();
	h->xmin_age_ms[0] = 312500;
	h->xmin_age_xids[0] = 4113;
	h->xmin_age_ms[1] = h->xmin_age_xids[1] = -1;
	h->xmin_age_ms[2] = 9000;
	h->xmin_age_xids[2] = 20;
	snprintf(h->tables[0].name, sizeof(h->tables[0].name), "jobs");
	h->tables[0].dead = 1234;
	h->tables[0].vacuum_ms = -1;
	h->ntables = 1;
	snprintf(h->indexes[0].name, sizeof(h->indexes[0].name),
		 "jobs_claim_idx");
	h->indexes[0].bloat_milli = 375;
	h->nindexes = 1;
	h->valid_ms = now + 30000;
	h->at_ms = now;
	prom_render(s, 0, 1, &out);
	static const char *const want[] = {
		"pgjobd_db_xmin_horizon_age_seconds{holder=\"backend\"} "
		"312.5\n",
		"pgjobd_db_xmin_horizon_age_seconds{holder=\"replication_"
		"slot\"} "
		"0\n",
		"pgjobd_db_xmin_horizon_age_seconds{holder=\"prepared_xact\"} "
		"9\n",
		"pgjobd_db_xmin_horizon_age_xids{holder=\"backend\"} 4113\n",
		"pgjobd_db_dead_tuples{table=\"jobs\"} 1234\n",
		"pgjobd_db_last_vacuum_age_seconds{table=\"jobs\"} -1\n",
		"pgjobd_db_index_bloat_ratio{index=\"jobs_claim_idx\"} 0.375\n",
		"# TYPE pgjobd_db_index_bloat_ratio gauge\n",
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		if (!strstr(out.data, want[i]))
			fail_msg("missing %s in:\n%s", want[i], out.data);
	buf_reset(&out);

	/* The holder stopped writing: three intervals later, gone. */
	h->valid_ms = now - 1;
	prom_render(s, 0, 1, &out);
	assert_null(strstr(out.data, "pgjobd_db_xmin"));
	assert_null(strstr(out.data, "pgjobd_db_dead_tuples"));
	buf_free(&out);
	stats_destroy(s);
}

/* The duration bounds reach the largest timeout in at most 4 more steps,
 * each at least 2x, the last exactly the timeout (whole seconds). */
static void
test_dur_bounds(void **state)
{
	double b[STATS_DUR_BUCKETS];

	assert_int_equal(stats_dur_bounds(0, b), STATS_BUCKETS);
	assert_int_equal(stats_dur_bounds(60, b), STATS_BUCKETS);
	assert_true(b[STATS_BUCKETS - 1] == 60);
	assert_int_equal(stats_dur_bounds(60.5, b), STATS_BUCKETS + 1);
	assert_true(b[STATS_BUCKETS] == 61);
	/* 130 s is less than two doublings of 60 s: one step. */
	assert_int_equal(stats_dur_bounds(130, b), STATS_BUCKETS + 1);
	assert_true(b[STATS_BUCKETS] == 130);
	assert_int_equal(stats_dur_bounds(240, b), STATS_BUCKETS + 2);
	assert_true(b[STATS_BUCKETS] == 120 && b[STATS_BUCKETS + 1] == 240);
	assert_int_equal(stats_dur_bounds(300, b), STATS_BUCKETS + 2);
	assert_true(b[STATS_BUCKETS] == 135 && b[STATS_BUCKETS + 1] == 300);
	assert_int_equal(stats_dur_bounds(7200, b), STATS_DUR_BUCKETS);
	assert_true(b[STATS_BUCKETS] == 199 && b[STATS_BUCKETS + 1] == 658 &&
		    b[STATS_BUCKETS + 2] == 2176 &&
		    b[STATS_DUR_BUCKETS - 1] == 7200);
	assert_int_equal(stats_dur_bounds(30 * 86400, b), STATS_DUR_BUCKETS);
	assert_true(b[STATS_DUR_BUCKETS - 1] == 30 * 86400);
	for (int i = 1; i < STATS_DUR_BUCKETS; i++)
		assert_true(b[i] >= 2 * b[i - 1] || i < STATS_BUCKETS);
}

/* Fails unless text holds line (a whole line). */
static void
assert_line(const char *text, const char *line)
{
	size_t n = strlen(line);
	for (const char *p = text; (p = strstr(p, line)); p++)
		if ((p == text || p[-1] == '\n') && p[n] == '\n')
			return;
	fail_msg("no line \"%s\" in:\n%s", line, text);
}

static void
test_render_monitoring(void **state)
{
	struct stats *s = stats_create();
	struct buf b = {0};
	assert_non_null(s);
	s->ndur_bounds = (uint32_t)stats_dur_bounds(300, s->dur_bounds);
	/* Two workers; kinds a and b share queue q1. */
	struct stats_kind *a = stats_kind(&s->w[0], "a", "q1");
	struct stats_kind *bk = stats_kind(&s->w[1], "b", "q1");
	struct stats_kind *a2 = stats_kind(&s->w[1], "a", "q1");
	struct stats_kind *c = stats_kind(&s->w[1], "c", "q2");
	stats_observe_wait(a, 20000);		   /* 0.02 s */
	stats_observe_wait(bk, 2000000);	   /* 2 s */
	stats_observe_wait(a2, -5);		   /* run_at ahead of now: 0 */
	stats_observe_wait(c, 100000 * 1000000LL); /* over a day */
	stats_observe_dur(s, c, 250 * 1000000LL);
	stats_add(&a->timed_out, 1);
	stats_add(&a2->timed_out, 2);
	stats_add(&s->w[0].connect_failures, 3);
	stats_add(&s->w[1].connect_failures, 1);
	s->w[1].connected = 1;
	snprintf(s->queues[0].name, STATS_NAME, "q1");
	snprintf(s->queues[1].name, STATS_NAME, "q2");
	s->queues[0].scheduled = 7;
	s->queues[1].unhandled = 4;
	s->nqueues = 2;
	snprintf(s->dead[0].name, STATS_NAME, "q2");
	s->dead[0].n = 5;
	s->ndead = 1;
	s->dead_at_ms = 1;
	snprintf(s->schedules[0].name, STATS_NAME, "nightly \"x\"\n");
	s->schedules[0].last_tick_s = 1700000000;
	s->schedules[0].next_tick_s = 1700086400;
	snprintf(s->schedules[1].name, STATS_NAME, "elsewhere");
	s->schedules[1].last_tick_s = 1700000060;
	s->nschedules = 2;

	prom_render(s, 2, 2, &b);
	const char *want[] = {
		"# TYPE pgjobd_jobs_timed_out_total counter",
		"pgjobd_jobs_timed_out_total{kind=\"a\",queue=\"q1\"} 3",
		"pgjobd_jobs_timed_out_total{kind=\"c\",queue=\"q2\"} 0",
		"pgjobd_handler_duration_seconds_bucket{kind=\"c\",queue="
		"\"q2\","
		"le=\"135\"} 0",
		"pgjobd_handler_duration_seconds_bucket{kind=\"c\",queue="
		"\"q2\","
		"le=\"300\"} 1",
		"# TYPE pgjobd_job_queue_wait_seconds histogram",
		"pgjobd_job_queue_wait_seconds_bucket{queue=\"q1\",le=\"0.01\"}"
		" 1",
		"pgjobd_job_queue_wait_seconds_bucket{queue=\"q1\",le=\"0.05\"}"
		" 2",
		"pgjobd_job_queue_wait_seconds_bucket{queue=\"q1\",le=\"5\"} 3",
		"pgjobd_job_queue_wait_seconds_count{queue=\"q1\"} 3",
		"pgjobd_job_queue_wait_seconds_sum{queue=\"q1\"} 2.02",
		"pgjobd_job_queue_wait_seconds_bucket{queue=\"q2\",le="
		"\"86400\"} 0",
		"pgjobd_job_queue_wait_seconds_bucket{queue=\"q2\",le=\"+Inf\"}"
		" 1",
		"pgjobd_queue_scheduled{queue=\"q1\"} 7",
		"pgjobd_queue_unhandled{queue=\"q2\"} 4",
		"pgjobd_queue_dead{queue=\"q2\"} 5",
		"pgjobd_queue_dead{queue=\"q1\"} 0",
		"pgjobd_schedule_last_tick_timestamp_seconds{schedule="
		"\"nightly "
		"\\\"x\\\"\\n\"} 1700000000",
		"pgjobd_schedule_next_tick_timestamp_seconds{schedule="
		"\"nightly "
		"\\\"x\\\"\\n\"} 1700086400",
		"pgjobd_schedule_last_tick_timestamp_seconds{schedule="
		"\"elsewhere\"} 1700000060",
		"# TYPE pgjobd_db_connect_failures_total counter",
		"pgjobd_db_connect_failures_total 4",
		"pgjobd_db_up 1",
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(*want); i++)
		assert_line(b.data, want[i]);
	/* Reloads are the supervisor's, rendered once (daemon/report.c),
	 * never in a database's area. */
	assert_null(strstr(b.data, "pgjobd_config_"));
	/* Each family once; a schedule without a next tick has none. */
	assert_null(strstr(strstr(b.data, "# TYPE pgjobd_queue_dead ") + 1,
			   "# TYPE pgjobd_queue_dead "));
	assert_null(strstr(b.data, "next_tick_timestamp_seconds{schedule="
				   "\"elsewhere\""));

	/* No live connection: down. */
	s->w[1].connected = 0;
	buf_reset(&b);
	prom_render(s, 2, 2, &b);
	assert_line(b.data, "pgjobd_db_up 0");
	buf_free(&b);
	stats_destroy(s);
}

/* /healthz names a worker by its worker=N, not its place in the list. */
static void
test_healthy_numbers(void **state)
{
	struct stats *s = stats_create();
	char why[160];
	int idx[] = {0, 1}, number[] = {3, 4};
	assert_non_null(s);
	s->w[0].slot = 1;
	s->w[0].connected = 1;
	s->w[0].last_ok_ms = util_now_ms();
	assert_int_equal(stats_healthy(s, idx, number, 2, 60000, why, 160), 0);
	assert_string_equal(why,
			    "worker 4 holds no slot or has no connection\n");
	s->w[1] = s->w[0];
	assert_int_equal(stats_healthy(s, idx, number, 2, 60000, why, 160), 1);
	assert_string_equal(why, "ok: 2 workers hold slots\n");
	stats_destroy(s);
}

/* process_* of this process, and pgjobd_workers_* summed over the "live
 * workers" given: here this process, twice. */
static void
test_procmetrics(void **state)
{
	struct buf b = {0};
	pid_t pids[] = {getpid(), getpid()};
	procmetrics_render(&b, pids, 2);
	assert_line(b.data, "# TYPE process_cpu_seconds_total counter");
	assert_line(b.data, "# TYPE pgjobd_workers_cpu_seconds_total counter");
	const char *gauges[] = {
		"process_start_time_seconds",
		"process_resident_memory_bytes",
		"process_open_fds",
		"process_max_fds",
		"pgjobd_workers_resident_memory_bytes",
		"pgjobd_workers_open_fds",
	};
	char t[128];
	for (size_t i = 0; i < sizeof(gauges) / sizeof(*gauges); i++) {
		snprintf(t, sizeof(t), "\n%s ", gauges[i]);
		const char *v = strstr(b.data, t);
		assert_non_null(v);
		assert_true(strtod(v + strlen(t), NULL) > 0);
	}
	/* Started before now, after 2020. */
	double start = strtod(
		strstr(b.data, "\nprocess_start_time_seconds ") + 28, NULL);
	assert_true(start > 1577836800 && start <= (double)time(NULL) + 1);
	/* Two readings of this process: twice its memory. */
	double rss = strtod(
		strstr(b.data, "\nprocess_resident_memory_bytes ") + 31, NULL);
	double wrss = strtod(
		strstr(b.data, "\npgjobd_workers_resident_memory_bytes ") + 38,
		NULL);
	assert_true(wrss >= 1.5 * rss);
	snprintf(t, sizeof(t), "pgjobd_build_info{version=\"%s\",schema=\"",
		 PGJOBD_VERSION);
	assert_non_null(strstr(b.data, t));
	buf_free(&b);
}

/* databases: two expositions as one, each family's HELP and TYPE once, its
 * samples together, each labelled with its database first. */
static void
test_merge(void **state)
{
	struct buf parts[2] = {{0}, {0}}, out = {0};
	const char *names[2] = {"alpha", "be\"ta"};

	metrics_counter(&parts[0], "x_total", "X.", "kind=\"k\"", 1);
	metrics_gauge(&parts[0], "y", "Y.", NULL, 2);
	metrics_gauge(&parts[1], "y", "Y.", NULL, 3);
	metrics_counter(&parts[1], "x_total", "X.", "kind=\"k\"", 4);
	metrics_counter(&parts[1], "x_total", NULL, "kind=\"l\"", 5);
	metrics_merge(&out, "database", names, parts, 2);
	assert_string_equal(out.data,
			    "# HELP x_total X.\n"
			    "# TYPE x_total counter\n"
			    "x_total{database=\"alpha\",kind=\"k\"} 1\n"
			    "x_total{database=\"be\\\"ta\",kind=\"k\"} 4\n"
			    "x_total{database=\"be\\\"ta\",kind=\"l\"} 5\n"
			    "# HELP y Y.\n"
			    "# TYPE y gauge\n"
			    "y{database=\"alpha\"} 2\n"
			    "y{database=\"be\\\"ta\"} 3\n");
	buf_free(&out);
	/* A histogram keeps le last; an empty part adds nothing. */
	static const double b[1] = {1};
	uint64_t counts[1] = {1};
	buf_reset(&parts[1]);
	buf_reset(&parts[0]);
	metrics_histogram(&parts[0], "h", "H.", NULL, b, counts, 1, 0.5, 1);
	metrics_merge(&out, "database", names, parts, 2);
	assert_string_equal(out.data,
			    "# HELP h H.\n"
			    "# TYPE h histogram\n"
			    "h_bucket{database=\"alpha\",le=\"1\"} 1\n"
			    "h_bucket{database=\"alpha\",le=\"+Inf\"} 1\n"
			    "h_sum{database=\"alpha\"} 0.5\n"
			    "h_count{database=\"alpha\"} 1\n");
	buf_free(&out);
	buf_free(&parts[0]);
	buf_free(&parts[1]);
}

int
main(void)
{
	log_init("test", LOG_ERROR, 0);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_health_series),
		cmocka_unit_test_setup_teardown(test_get, setup, teardown),
		cmocka_unit_test_setup_teardown(test_status, setup, teardown),
		cmocka_unit_test_setup_teardown(test_head, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_requests, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_oversize, setup, teardown),
		cmocka_unit_test_setup_teardown(test_big_body, setup, teardown),
		cmocka_unit_test_setup_teardown(test_slow_clients, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_connection_limit, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_forget_after_fork, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_listen_errors, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_listen_forms, setup,
						teardown),
		cmocka_unit_test(test_parse_listen),
		cmocka_unit_test(test_text),
		cmocka_unit_test(test_label_sanitised),
		cmocka_unit_test(test_histogram),
		cmocka_unit_test(test_bucket),
		cmocka_unit_test(test_dur_bounds),
		cmocka_unit_test(test_healthy_numbers),
		cmocka_unit_test(test_render_monitoring),
		cmocka_unit_test(test_procmetrics),
		cmocka_unit_test(test_merge),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
