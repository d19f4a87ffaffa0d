/*
 * handler_http: POSTs a job's payload to a webhook with libcurl's multi
 * interface, on the worker's libev loop.
 *
 * One CURLM per event loop (the worker has exactly one), created when the
 * loop's first http job starts and freed by handler_fini().  libcurl tells
 * us which sockets to watch (CURLMOPT_SOCKETFUNCTION) and when to wake it
 * (CURLMOPT_TIMERFUNCTION); ev_io and ev_timer watchers call
 * curl_multi_socket_action() back, so one worker has many requests in
 * flight and the loop never blocks.  Finished transfers are collected with
 * curl_multi_info_read() after each socket_action, so done is always called
 * from a loop callback and never from inside a libcurl callback.
 *
 * Outcomes (docs/handlers.md) are handler_http_result.c's: 2xx is done,
 * 408, 425, 429, 5xx and transfer errors are retried, the rest is dead.
 *
 * Nothing here logs a header value, the URL's path or query, or a
 * response body: those can carry secrets (an Authorization header, a token
 * in the query).  Log lines and errors name the server as host:port.
 *
 * libcurl is loaded when first needed (handler_http_curl.c): every
 * libcurl call goes through its table lc.
 */
#include "common/failpoint.h"
#include "handlers/handler_http.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <ev.h>

#include "common/config.h"
#include "common/log.h"
#include "common/util.h"
#include "handlers/handler_http_curl.h"
#include "handlers/handler_http_result.h"

#define PROTOCOLS "http,https"

struct http_sock;

/* The libcurl multi handle of one event loop; owned by this module, freed
 * by handler_fini().  Its watchers are on loop, which must outlive it. */
struct http_multi {
	struct http_multi *next;
	struct ev_loop *loop;
	CURLM *multi;
	ev_timer timer;		 /* libcurl's timeout */
	struct http_sock *socks; /* every socket libcurl asked us to watch */
	struct http_run *runs;	 /* every run from start until freed */
};

/* One socket libcurl watches; owned by its multi. */
struct http_sock {
	struct http_sock *prev, *next;
	struct http_multi *m;
	ev_io w;
};

static struct http_multi *multis; /* one per loop that ran an http job */

static void check_done(struct http_multi *m);

static void io_cb(struct ev_loop *loop, ev_io *w, int revents);

/*
 * libcurl's socket callback: start, change or stop the ev_io of socket s.
 * Only watchers change here; libcurl must not be called back from inside.
 */
static int
sock_cb(CURL *e, curl_socket_t s, int what, void *userp, void *socketp)
{
	struct http_multi *m = userp;
	struct http_sock *hs = socketp;
	int events = (what & CURL_POLL_IN ? EV_READ : 0) |
		     (what & CURL_POLL_OUT ? EV_WRITE : 0);

	if (what == CURL_POLL_REMOVE) {
		/* libcurl forgets the socket (and socketp) after this. */
		if (hs) {
			ev_io_stop(m->loop, &hs->w);
			if (hs->prev)
				hs->prev->next = hs->next;
			else
				m->socks = hs->next;
			if (hs->next)
				hs->next->prev = hs->prev;
			free(hs);
		}
		return 0;
	}
	if (!hs) {
		hs = xcalloc(1, sizeof(*hs));
		hs->m = m;
		ev_init(&hs->w, io_cb);
		hs->w.data = hs;
		hs->next = m->socks;
		if (m->socks)
			m->socks->prev = hs;
		m->socks = hs;
		lc.multi_assign(m->multi, s, hs);
	}
	ev_io_stop(m->loop, &hs->w);
	ev_io_set(&hs->w, s, events);
	if (events)
		ev_io_start(m->loop, &hs->w);
	return 0;
}

static void
io_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct http_sock *hs = w->data;
	struct http_multi *m = hs->m; /* hs may be freed by the action */
	int flags = (revents & EV_READ ? CURL_CSELECT_IN : 0) |
		    (revents & EV_WRITE ? CURL_CSELECT_OUT : 0);
	int running;

	lc.multi_socket_action(m->multi, w->fd, flags, &running);
	check_done(m);
}

/* libcurl's timer callback: -1 stops the timer, else it fires in ms. */
static int
timer_cb(CURLM *multi, long ms, void *userp)
{
	struct http_multi *m = userp;

	ev_timer_stop(m->loop, &m->timer);
	if (ms < 0)
		return 0;
	/* From the current time, not the loop's cached one: a timer that
	 * fires early leaves libcurl with nothing to do and no new timer. */
	ev_now_update(m->loop);
	ev_timer_set(&m->timer, (double)ms / 1000., 0.);
	ev_timer_start(m->loop, &m->timer);
	return 0;
}

static void
timeout_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct http_multi *m = w->data;
	long ms = -1;
	int running;

	lc.multi_socket_action(m->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	check_done(m);
	/* libcurl calls timer_cb only when its next deadline changes; if this
	 * one came a little early, arm the timer again ourselves. */
	if (!ev_is_active(&m->timer) &&
	    lc.multi_timeout(m->multi, &ms) == CURLM_OK && ms >= 0)
		timer_cb(m->multi, ms, m);
}

/* The multi handle of loop, created on first use. */
static struct http_multi *
multi_get(struct ev_loop *loop)
{
	struct http_multi *m;

	for (m = multis; m; m = m->next)
		if (m->loop == loop)
			return m;
	m = xcalloc(1, sizeof(*m));
	m->loop = loop;
	m->multi = lc.multi_init();
	if (!m->multi) {
		log_errorx("out of memory (curl_multi_init)");
		abort();
	}
	ev_init(&m->timer, timeout_cb);
	m->timer.data = m;
	lc.multi_setopt(m->multi, CURLMOPT_SOCKETFUNCTION, sock_cb);
	lc.multi_setopt(m->multi, CURLMOPT_SOCKETDATA, m);
	lc.multi_setopt(m->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
	lc.multi_setopt(m->multi, CURLMOPT_TIMERDATA, m);
	m->next = multis;
	multis = m;
	return m;
}

/* Takes x's easy handle out of the multi: an unfinished transfer is
 * aborted and its connection closed. */
static void
detach(struct http_run *x)
{
	if (!x->attached)
		return;
	lc.multi_remove_handle(x->m->multi, x->easy);
	x->attached = false;
}

static void
unlink_run(struct http_run *x)
{
	if (x->prev)
		x->prev->next = x->next;
	else
		x->m->runs = x->next;
	if (x->next)
		x->next->prev = x->prev;
	x->prev = x->next = NULL;
}

/* handler_http_fini() with x still running: x stays allocated (its run
 * owns it) but holds nothing of libcurl or of the loop any more. */
static void
abandon(struct http_run *x)
{
	ev_timer_stop(x->m->loop, &x->later);
	detach(x);
	unlink_run(x);
	lc.easy_cleanup(x->easy);
	x->easy = NULL;
	lc.slist_free_all(x->headers);
	x->headers = NULL;
	buf_free(&x->body);
	x->m = NULL;
}

static void
multi_free(struct http_multi *m)
{
	int n = 0;

	/* No callbacks while it is taken apart: we free the watchers. */
	lc.multi_setopt(m->multi, CURLMOPT_SOCKETFUNCTION, NULL);
	lc.multi_setopt(m->multi, CURLMOPT_TIMERFUNCTION, NULL);
	while (m->runs) {
		abandon(m->runs);
		n++;
	}
	if (n)
		log_warnx("http: %d requests abandoned unfinished", n);
	lc.multi_cleanup(m->multi);
	while (m->socks) {
		struct http_sock *hs = m->socks;
		m->socks = hs->next;
		ev_io_stop(m->loop, &hs->w);
		free(hs);
	}
	ev_timer_stop(m->loop, &m->timer);
	free(m);
}

int
handler_http_init(const struct config *cfg)
{
	int nhttp = 0;
	for (size_t i = 0; cfg && i < cfg->nhandlers; i++) {
		const struct handler_conf *h = &cfg->handlers[i];
		if (h->type != HANDLER_HTTP)
			continue;
		nhttp++;
		if (!h->tls_verify)
			log_warnx("handler %s: tls_verify is false: the "
				  "server's certificate and host name are not "
				  "checked",
				  h->kind);
	}
	/* Without an http handler, libcurl is not even loaded. */
	const char *why = nhttp ? handler_http_curl_init() : NULL;
	if (why) {
		log_errorx("http handlers: %s", why);
		return -1;
	}
	return 0;
}

void
handler_http_fini(void)
{
	while (multis) {
		struct http_multi *m = multis;
		multis = m->next;
		multi_free(m);
	}
	handler_http_curl_cleanup();
}

static size_t
write_cb(char *p, size_t size, size_t n, void *arg)
{
	struct http_run *x = arg;
	size_t len = size * n;
	size_t room = HTTP_BODY_MAX - x->body.len;
	size_t k = len < room ? len : room;

	/* Past HTTP_BODY_MAX the rest is read and dropped: the status counts.
	 */
	if (k)
		buf_append(&x->body, p, k);
	x->body_total += len;
	return len;
}

/* True when h ("Name: value") is the header name. */
static bool
header_is(const char *h, const char *name)
{
	size_t n = strlen(name);

	return strncasecmp(h, name, n) == 0 && h[n] == ':';
}

static bool
configured(const struct handler_conf *h, const char *name)
{
	for (size_t i = 0; i < h->headers.n; i++)
		if (header_is(h->headers.v[i], name))
			return true;
	return false;
}

/*
 * The request headers: the handler's own, then the defaults it did not
 * replace, then traceparent (when the job has a trace), then
 * Idempotency-Key.  Headers that would make the request
 * wrong (Content-Length, Transfer-Encoding) or the job's identity
 * ambiguous (Idempotency-Key) are not taken from the config.  "Expect:"
 * turns off libcurl's Expect: 100-continue, which costs a round trip (or a
 * second's wait on servers that ignore it).  Caller frees with
 * curl_slist_free_all().
 */
static struct curl_slist *
build_headers(const struct job *job, const struct handler_conf *h)
{
	static const char *const reserved[] = {
		"Idempotency-Key", "Content-Length", "Transfer-Encoding"};
	static const char *const defaults[][2] = {
		{"Content-Type", "Content-Type: application/json"},
		{"User-Agent", "User-Agent: pgjobd/" PGJOBD_VERSION},
		{"Expect", "Expect:"},
	};
	struct curl_slist *l = NULL;
	char key[64];

	for (size_t i = 0; i < h->headers.n; i++) {
		bool skip = false;
		for (size_t j = 0; j < sizeof(reserved) / sizeof(*reserved);
		     j++)
			skip = skip || header_is(h->headers.v[i], reserved[j]);
		skip = skip || (job->traceparent[0] &&
				header_is(h->headers.v[i], "traceparent"));
		if (!skip)
			l = handler_http_curl_slist_add(l, h->headers.v[i]);
	}
	for (size_t j = 0; j < sizeof(defaults) / sizeof(*defaults); j++)
		if (!configured(h, defaults[j][0]))
			l = handler_http_curl_slist_add(l, defaults[j][1]);
	/* The attempt's W3C trace context (docs/tracing.md), which replaces a
	 * configured one. */
	if (job->traceparent[0]) {
		char tp[80];
		snprintf(tp, sizeof(tp), "traceparent: %s", job->traceparent);
		l = handler_http_curl_slist_add(l, tp);
	}
	snprintf(key, sizeof(key), "Idempotency-Key: %lld", (long long)job->id);
	return handler_http_curl_slist_add(l, key);
}

const char *
handler_http_check_url(const char *url)
{
	const char *why = handler_http_curl_load();
	char *target;

	if (why)
		return why;
	if (!(target = handler_http_curl_target(url, &why)))
		return why;
	free(target);
	return NULL;
}

/* Sets every option of x's request; returns 0, or -1 if libcurl refused
 * one. */
static int
setup(struct http_run *x, const struct job *job, const struct handler_conf *h)
{
	CURL *e = x->easy;
	const char *body = job->payload ? job->payload : "";
	long verify = h->tls_verify ? 1L : 0L;
	int64_t connect_ms = HTTP_CONNECT_TIMEOUT_MS;
	int bad = 0;

	if (x->timeout_ms > 0 && x->timeout_ms < connect_ms)
		connect_ms = x->timeout_ms;
#define SET(opt, val) (bad |= lc.easy_setopt(e, opt, val) != CURLE_OK)
	SET(CURLOPT_URL, h->url);
	SET(CURLOPT_PROTOCOLS_STR, PROTOCOLS);
	SET(CURLOPT_REDIR_PROTOCOLS_STR, PROTOCOLS);
	SET(CURLOPT_FOLLOWLOCATION, 0L);
	SET(CURLOPT_NOSIGNAL, 1L); /* SIGALRM belongs to plugin runs */
	SET(CURLOPT_HTTPHEADER, x->headers);
	/* Borrowed: the job outlives the transfer (handler.h). */
	SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
	SET(CURLOPT_POSTFIELDS, body);
	SET(CURLOPT_SSL_VERIFYPEER, verify);
	SET(CURLOPT_SSL_VERIFYHOST, verify ? 2L : 0L);
	if (x->timeout_ms > 0)
		SET(CURLOPT_TIMEOUT_MS, (long)x->timeout_ms);
	SET(CURLOPT_CONNECTTIMEOUT_MS, (long)connect_ms);
	SET(CURLOPT_WRITEFUNCTION, write_cb);
	SET(CURLOPT_WRITEDATA, x);
	SET(CURLOPT_ERRORBUFFER, x->errbuf);
	SET(CURLOPT_PRIVATE, x);
#undef SET
	return bad ? -1 : 0;
}

static void later_cb(struct ev_loop *loop, ev_timer *w, int revents);

/* Frees what handler_http_start() made of x before it failed. */
static void
start_failed(struct http_run *x, struct handler_result *fail, char *msg)
{
	fail->outcome = OUTCOME_RETRY;
	fail->error = msg;
	log_job(LOG_WARN, &x->lj, "%s", msg);
	if (x->easy)
		lc.easy_cleanup(x->easy);
	if (x->headers) /* else libcurl may not be loaded */
		lc.slist_free_all(x->headers);
	free(x->target);
	free(x);
}

struct http_run *
handler_http_start(void *run, struct ev_loop *loop, const struct job *job,
		   handler_finish_fn *finish, struct handler_result *fail)
{
	const struct handler_conf *h = job->handler;
	struct http_run *x = xcalloc(1, sizeof(*x));
	const char *why = "no url";

	x->run = run;
	x->finish = finish;
	x->lj = (struct log_job){job->id, job->kind, job->attempt};
	x->timeout_ms = h->timeout_ms;
	x->start_ms = util_now_ms();
	ev_timer_init(&x->later, later_cb, 0., 0.);
	x->later.data = x;
	const char *nolib = handler_http_curl_init();
	if (nolib) {
		start_failed(x, fail, xasprintf("http handler: %s", nolib));
		return NULL;
	}
	if (!h->url || !(x->target = handler_http_curl_target(h->url, &why))) {
		start_failed(x, fail,
			     xasprintf("http handler: bad url: %s", why));
		return NULL;
	}
	x->https = strncasecmp(h->url, "https:", 6) == 0;
	x->m = multi_get(loop);
	x->headers = build_headers(job, h);
	if (FAILPOINT(FP_HTTP_REQUEST)) {
		/* Retried, as a network error is. */
		start_failed(x, fail, xstrdup("could not connect: failpoint"));
		return NULL;
	}
	x->easy = lc.easy_init();
	if (!x->easy || setup(x, job, h) < 0) {
		start_failed(x, fail,
			     xstrdup("http handler: libcurl refused "
				     "the request's options"));
		return NULL;
	}
	/* Calls timer_cb at most: the transfer starts from the loop. */
	if (lc.multi_add_handle(x->m->multi, x->easy) != CURLM_OK) {
		start_failed(x, fail,
			     xstrdup("http handler: libcurl refused "
				     "the request"));
		return NULL;
	}
	x->attached = true;
	x->next = x->m->runs;
	if (x->m->runs)
		x->m->runs->prev = x;
	x->m->runs = x;
	log_job(LOG_DEBUG, &x->lj, "POST %s, %zu bytes", x->target,
		strlen(job->payload ? job->payload : ""));
	return x;
}

/* The transfer of x has ended: report it (this frees x). */
static void
complete(struct http_run *x, CURLcode rc)
{
	struct handler_result res = {.outcome = OUTCOME_RETRY,
				     .retry_in_ms = -1};

	handler_http_result(x, rc, &res);
	handler_http_log_attempt(x, rc, &res);
	detach(x);
	x->finish(x->run, &res); /* frees x */
}

/* Reports every finished transfer of m.  A done callback may start or
 * stop other requests meanwhile: remove_handle drops a stopped one's
 * pending message. */
static void
check_done(struct http_multi *m)
{
	CURLMsg *msg;
	int left;

	while ((msg = lc.multi_info_read(m->multi, &left))) {
		struct http_run *x = NULL;
		CURLcode rc = msg->data.result;

		if (msg->msg != CURLMSG_DONE)
			continue;
		lc.easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &x);
		complete(x, rc);
	}
}

static void
later_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct http_run *x = w->data;
	struct handler_result res = {.outcome = OUTCOME_RETRY,
				     .error = xstrdup(x->why),
				     .retry_in_ms = -1};

	handler_http_log_attempt(x, CURLE_OK, &res);
	x->finish(x->run, &res); /* frees x */
}

void
handler_http_stop(struct http_run *x, const char *why)
{
	if (x->why || !x->m)
		return;
	x->why = xasprintf("stopped: %s", why);
	log_job(LOG_INFO, &x->lj, "stopping: %s", why);
	detach(x); /* aborts the transfer now */
	ev_timer_start(x->m->loop, &x->later);
}

void
handler_http_free(struct http_run *x)
{
	if (x->m) {
		ev_timer_stop(x->m->loop, &x->later);
		detach(x);
		unlink_run(x);
	}
	lc.easy_cleanup(x->easy);
	lc.slist_free_all(x->headers);
	buf_free(&x->body);
	free(x->target);
	free(x->why);
	free(x);
}
