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
 * Outcomes (docs/handlers.md): 2xx is done, its body the result when it is
 * JSON; 408, 425, 429, 5xx and every transfer error (connect, DNS, TLS,
 * timeout) are retried, after Retry-After when the server sent one; 3xx is
 * not followed and is dead, as is every other 4xx.
 *
 * Nothing here logs a header value, the URL's path or query, or a
 * response body: those can carry secrets (an Authorization header, a token
 * in the query).  Log lines and errors name the server as host:port.
 *
 * libcurl is not linked but loaded with dlopen() the first time it is
 * needed: by handler_http_init() for a config with an http handler, or by
 * the first request.  libcurl and the libraries it pulls in (a second TLS
 * stack, HTTP/2, IDN, ssh, rtmp...) add about 1.5 MiB to the resident set
 * of every process that maps them, and most configs have no http handler
 * (docs/daemon.md: a worker at rest stays under 8 MiB).  Every libcurl call
 * goes
 * through the table lc, whose members have the exact types of curl.h's
 * declarations; curl.h is still what the code is compiled against.
 */
#include "common/failpoint.h"
#include "common/duration.h"
#include "handlers/handler_http.h"

#include <ctype.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>
#include <ev.h>

#include "common/config.h"
#include "common/log.h"
#include "common/pgtext.h"
#include "common/util.h"

#if LIBCURL_VERSION_NUM < 0x075500
#error "the http handler needs libcurl 7.85 or later"
#endif
#define LIBCURL_MIN 0x075500 /* checked again at run time */
/* libcurl's soname: libcurl.so.4 since 7.16 (2006). */
#define LIBCURL_SONAME "libcurl.so.4"

/* The libcurl functions used here, without their curl_ prefix. */
#define LIBCURL_FUNCS(X)                                                       \
	X(global_init)                                                         \
	X(global_cleanup)                                                      \
	X(version_info)                                                        \
	X(easy_init)                                                           \
	X(easy_cleanup)                                                        \
	X(easy_setopt)                                                         \
	X(easy_getinfo)                                                        \
	X(easy_header)                                                         \
	X(easy_strerror)                                                       \
	X(multi_init)                                                          \
	X(multi_cleanup)                                                       \
	X(multi_setopt)                                                        \
	X(multi_add_handle)                                                    \
	X(multi_remove_handle)                                                 \
	X(multi_assign)                                                        \
	X(multi_socket_action)                                                 \
	X(multi_timeout)                                                       \
	X(multi_info_read)                                                     \
	X(slist_append)                                                        \
	X(slist_free_all)                                                      \
	X(url)                                                                 \
	X(url_set)                                                             \
	X(url_get)                                                             \
	X(url_cleanup)                                                         \
	X(url_strerror)                                                        \
	X(getdate)                                                             \
	X(free)

/* lc.easy_init is curl_easy_init, and so on; filled by libcurl_load(). */
static struct {
#define X(f) __typeof__(curl_##f) *f;
	LIBCURL_FUNCS(X)
#undef X
} lc;

#define BODY_MAX	   (1024 * 1024) /* response bytes kept */
#define ERROR_BODY_MAX	   512		 /* of which, in an error text */
#define CONNECT_TIMEOUT_MS 10000
#define PROTOCOLS	   "http,https"

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

/* One request; owned by the handler_run (handler.c), freed by
 * handler_http_free(). */
struct http_run {
	struct http_run *prev, *next; /* in m->runs */
	void *run;		      /* handler.c's, handed back to finish */
	handler_finish_fn *finish;
	struct http_multi *m; /* NULL once abandoned by handler_http_fini() */
	struct log_job lj;
	CURL *easy;
	struct curl_slist *headers;
	char *target; /* "host:port" of the url, for messages */
	bool https;
	bool attached; /* the easy handle is in the multi */
	int64_t timeout_ms;
	int64_t start_ms;
	struct buf body;   /* the first BODY_MAX bytes of the response */
	size_t body_total; /* response body bytes received */
	char errbuf[CURL_ERROR_SIZE];
	char *why;	/* "stopped: ..." once stopped; owned */
	ev_timer later; /* delivers a stop from the loop */
};

static struct http_multi *multis; /* one per loop that ran an http job */
static bool global_ready;	  /* curl_global_init() done */

static void check_done(struct http_multi *m);

/* Allocation failure in libcurl is out of memory, as in util.c. */
static struct curl_slist *
slist_add(struct curl_slist *l, const char *s)
{
	struct curl_slist *n = lc.slist_append(l, s);

	if (!n) {
		log_errorx("out of memory (curl_slist_append)");
		abort();
	}
	return n;
}

/*
 * Loads libcurl into lc, once per process; it is never unloaded (its TLS
 * libraries cannot be, and a worker that used it keeps using it).  Returns
 * NULL, or why it cannot be used (static storage): the same reason on
 * every later call.
 */
static const char *
libcurl_load(void)
{
	static void *dl;
	static char why[512];

	if (dl)
		return NULL;
	if (why[0])
		return why;
	dlerror();
	void *h = dlopen(LIBCURL_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(why, sizeof(why), "cannot load libcurl: %s",
			 dlerror());
		return why;
	}
#define X(f)                                                                   \
	if (!why[0] && !(lc.f = (__typeof__(lc.f))dlsym(h, "curl_" #f)))       \
		snprintf(why, sizeof(why),                                     \
			 "%s has no curl_%s: libcurl %s or "                   \
			 "later is needed",                                    \
			 LIBCURL_SONAME, #f, "7.85");
	LIBCURL_FUNCS(X)
#undef X
	const curl_version_info_data *v =
		why[0] ? NULL : lc.version_info(CURLVERSION_NOW);
	if (v && (unsigned)v->version_num < LIBCURL_MIN)
		snprintf(why, sizeof(why),
			 "libcurl %s is too old: 7.85 or later is needed",
			 v->version);
	if (why[0]) {
		dlclose(h);
		memset(&lc, 0, sizeof(lc));
		return why;
	}
	dl = h;
	return NULL;
}

/* libcurl_load() and curl_global_init(); NULL, or why libcurl cannot be
 * used. */
static const char *
global_init(void)
{
	const char *why = libcurl_load();

	if (why || global_ready)
		return why;
	if (lc.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		log_errorx("curl_global_init failed");
		abort();
	}
	global_ready = true;
	return NULL;
}

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
	const char *why = nhttp ? global_init() : NULL;
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
	if (global_ready)
		lc.global_cleanup();
	global_ready = false;
}

static size_t
write_cb(char *p, size_t size, size_t n, void *arg)
{
	struct http_run *x = arg;
	size_t len = size * n;
	size_t room = BODY_MAX - x->body.len;
	size_t k = len < room ? len : room;

	/* Past BODY_MAX the rest is read and dropped: the status counts. */
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
 * replace, then Idempotency-Key.  Headers that would make the request
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
		if (!skip)
			l = slist_add(l, h->headers.v[i]);
	}
	for (size_t j = 0; j < sizeof(defaults) / sizeof(*defaults); j++)
		if (!configured(h, defaults[j][0]))
			l = slist_add(l, defaults[j][1]);
	snprintf(key, sizeof(key), "Idempotency-Key: %lld", (long long)job->id);
	return slist_add(l, key);
}

/* "host:port" of url (port defaulted from the scheme), or NULL with *why
 * set to libcurl's reason.  Caller frees. */
static char *
target_of(const char *url, const char **why)
{
	CURLU *u = lc.url();
	char *host = NULL, *port = NULL, *s = NULL;
	CURLUcode rc;

	if (!u) {
		log_errorx("out of memory (curl_url)");
		abort();
	}
	rc = lc.url_set(u, CURLUPART_URL, url, 0);
	if (rc == CURLUE_OK)
		rc = lc.url_get(u, CURLUPART_HOST, &host, 0);
	if (rc == CURLUE_OK)
		rc = lc.url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT);
	if (rc == CURLUE_OK)
		s = xasprintf("%s:%s", host, port);
	else
		*why = lc.url_strerror(rc);
	lc.free(host);
	lc.free(port);
	lc.url_cleanup(u);
	return s;
}

const char *
handler_http_check_url(const char *url)
{
	const char *why = libcurl_load();
	char *target;

	if (why)
		return why;
	if (!(target = target_of(url, &why)))
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
	int64_t connect_ms = CONNECT_TIMEOUT_MS;
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
	const char *nolib = global_init();
	if (nolib) {
		start_failed(x, fail, xasprintf("http handler: %s", nolib));
		return NULL;
	}
	if (!h->url || !(x->target = target_of(h->url, &why))) {
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

/* body[0..len) with surrounding whitespace trimmed; sets *len. */
static const char *
trim(const char *s, size_t *len)
{
	while (*len && isspace((unsigned char)*s))
		s++, (*len)--;
	while (*len && isspace((unsigned char)s[*len - 1]))
		(*len)--;
	return s;
}

/* The response body when it was kept whole and is JSON; else NULL.
 * Caller frees. */
static char *
body_json(const struct http_run *x)
{
	size_t len = x->body.len;
	const char *s = trim(x->body.data ? x->body.data : "", &len);

	if (x->body_total > x->body.len || len == 0)
		return NULL;
	return pgtext_is_jsonb(s, len) ? xstrndup(s, len) : NULL;
}

/* "HTTP 503: <the body's first 512 bytes>", sanitized; caller frees. */
static char *
status_text(const struct http_run *x, long status)
{
	size_t len = x->body.len;
	const char *s = trim(x->body.data ? x->body.data : "", &len);
	bool cut = len > ERROR_BODY_MAX || x->body_total > x->body.len;
	char *t;
	int n;

	if (len > ERROR_BODY_MAX) {
		len = ERROR_BODY_MAX;
		/* Not in the middle of a UTF-8 character. */
		while (len > 0 && ((unsigned char)s[len] & 0xc0) == 0x80)
			len--;
	}
	if (len == 0)
		return xasprintf("HTTP %ld", status);
	/* Copied, not printed: the body may hold NUL bytes. */
	t = xmalloc(len + 64);
	n = snprintf(t, 60, "HTTP %ld: ", status);
	memcpy(t + n, s, len);
	pgtext_sanitize(t + n, len);
	strcpy(t + n + len, cut ? "..." : "");
	return t;
}

/*
 * For a 3xx: where it points (not followed), as host:port only.  The path
 * and query of a Location can carry what the configured url carried (a
 * token in the query), and user:password@ too; none of it goes into
 * last_error or a log line.  Nor does the body, which often repeats the
 * Location in full.
 */
static char *
redirect_text(const struct http_run *x, long status)
{
	char *loc = NULL, *where, *t;
	const char *why;

	lc.easy_getinfo(x->easy, CURLINFO_REDIRECT_URL, &loc);
	if (!loc || !*loc || !(where = target_of(loc, &why)))
		return xasprintf("HTTP %ld: redirect not followed", status);
	t = xasprintf("HTTP %ld: redirect to %.*s not followed", status,
		      ERROR_BODY_MAX, where);
	pgtext_sanitize(t, strlen(t));
	free(where);
	return t;
}

/* A header of the final response, copied (caller frees), or NULL. */
static char *
header(const struct http_run *x, const char *name)
{
	struct curl_header *h;
	size_t len;
	const char *s;

	if (lc.easy_header(x->easy, name, 0, CURLH_HEADER, -1, &h) != CURLHE_OK)
		return NULL;
	len = strlen(h->value);
	s = trim(h->value, &len);
	return xstrndup(s, len);
}

/*
 * Retry-After as a delay in ms: delta-seconds, or an HTTP-date taken
 * relative to the response's Date header (the server's clock), else to
 * this host's clock; a date in the past is 0.  -1 when absent or
 * unreadable: the backoff decides.
 */
static int64_t
retry_after(const struct http_run *x)
{
	char *ra = header(x, "Retry-After"), *date;
	size_t digits;
	time_t when, base = time(NULL), server_now;
	int64_t ms = -1;

	if (!ra)
		return -1;
	digits = strspn(ra, "0123456789");
	if (digits > 0 && digits <= 10 && ra[digits] == '\0') {
		ms = strtoll(ra, NULL, 10) * 1000;
	} else if ((when = lc.getdate(ra, NULL)) >= 0) {
		date = header(x, "Date");
		if (date && (server_now = lc.getdate(date, NULL)) >= 0)
			base = server_now;
		free(date);
		ms = when > base ? (int64_t)(when - base) * 1000 : 0;
	} else {
		log_job(LOG_WARN, &x->lj,
			"Retry-After is neither seconds nor an HTTP-date; the "
			"backoff decides");
	}
	free(ra);
	return ms;
}

static bool
is_tls_error(CURLcode rc)
{
	switch (rc) {
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CIPHER:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_ISSUER_ERROR:
	case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
	case CURLE_SSL_INVALIDCERTSTATUS:
	case CURLE_SSL_CRL_BADFILE:
	case CURLE_SSL_ENGINE_NOTFOUND:
	case CURLE_SSL_ENGINE_SETFAILED:
	case CURLE_SSL_ENGINE_INITFAILED:
	case CURLE_USE_SSL_FAILED:
		return true;
	default:
		return false;
	}
}

/*
 * Of a transfer that timed out: whether the connect timeout ended it (the
 * connection, or its TLS, was not up), rather than the handler's timeout.
 */
static bool
connect_timed_out(const struct http_run *x)
{
	curl_off_t tcp = 0, tls = 0;

	if (x->timeout_ms > 0 && x->timeout_ms <= CONNECT_TIMEOUT_MS)
		return false; /* the same limit: the handler's */
	lc.easy_getinfo(x->easy, CURLINFO_CONNECT_TIME_T, &tcp);
	lc.easy_getinfo(x->easy, CURLINFO_APPCONNECT_TIME_T, &tls);
	return tcp == 0 || (x->https && tls == 0);
}

/* A timeout: before the connection was up (the connect timeout), or
 * after (the handler's timeout).  Caller frees. */
static char *
timeout_text(const struct http_run *x, const char *detail)
{
	char d[32];

	if (connect_timed_out(x))
		return xasprintf(
			"could not connect to %s within %s (%s)", x->target,
			duration_format(CONNECT_TIMEOUT_MS, d, sizeof(d)),
			detail);
	return xasprintf("timed out after %s (%s)",
			 duration_format(x->timeout_ms, d, sizeof(d)), detail);
}

/* The error text of a transfer that failed; caller frees. */
static char *
curl_error_text(const struct http_run *x, CURLcode rc)
{
	const char *detail = x->errbuf[0] ? x->errbuf : lc.easy_strerror(rc);
	long oserr = 0;
	char *t;

	if (rc == CURLE_COULDNT_CONNECT) {
		lc.easy_getinfo(x->easy, CURLINFO_OS_ERRNO, &oserr);
		t = xasprintf("could not connect to %s: %s", x->target,
			      oserr ? strerror((int)oserr) : detail);
	} else if (rc == CURLE_COULDNT_RESOLVE_HOST) {
		t = xasprintf("could not resolve %s: %s", x->target, detail);
	} else if (rc == CURLE_OPERATION_TIMEDOUT) {
		t = timeout_text(x, detail);
	} else if (is_tls_error(rc)) {
		t = xasprintf("TLS error with %s: %s", x->target, detail);
	} else {
		t = xasprintf("request to %s failed: %s", x->target, detail);
	}
	pgtext_sanitize(t, strlen(t));
	return t;
}

/* The outcome of a transfer that ended with rc. */
static void
make_result(struct http_run *x, CURLcode rc, struct handler_result *res)
{
	long status = 0;

	res->outcome = OUTCOME_RETRY;
	res->retry_in_ms = -1;
	res->snooze = false;
	if (rc != CURLE_OK) {
		res->error = curl_error_text(x, rc);
		/* The handler's timeout, not a host that did not answer. */
		res->timed_out =
			rc == CURLE_OPERATION_TIMEDOUT && !connect_timed_out(x);
		return;
	}
	lc.easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
	/* Kept with a failed attempt (sql/013_attempts.sql). */
	res->has_status = status > 0 && status <= INT_MAX;
	res->status = res->has_status ? (int)status : 0;
	if (status >= 200 && status <= 299) {
		res->outcome = OUTCOME_DONE;
		res->result = body_json(x);
	} else if (status >= 300 && status <= 399) {
		res->outcome = OUTCOME_DEAD;
		res->error = redirect_text(x, status);
	} else if (status >= 400 && status <= 499 && status != 408 &&
		   status != 425 && status != 429) {
		res->outcome = OUTCOME_DEAD;
		res->error = status_text(x, status);
	} else {
		/* 408, 425, 429, 5xx, and statuses HTTP does not define. */
		res->error = status_text(x, status);
		res->retry_in_ms = retry_after(x);
		if ((status == 429 || status == 503) && res->retry_in_ms > 0)
			res->throttle_ms = res->retry_in_ms;
		/* Too many requests, or unavailable until then: the server
		 * said when to come back (RFC 9110, 10.2.3), a snooze. */
		res->snooze = (status == 429 || status == 503) &&
			      res->retry_in_ms >= 0;
	}
}

/* The attempt's one log line: how it ended, wall time, bytes. */
static void
log_attempt(const struct http_run *x, CURLcode rc,
	    const struct handler_result *res)
{
	static const char *names[] = {"done", "retry", "dead"};
	long status = 0;
	char what[64], d[32] = "";

	if (!x->why && rc == CURLE_OK)
		lc.easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
	if (status)
		snprintf(what, sizeof(what), "HTTP %ld", status);
	if (res->retry_in_ms >= 0)
		duration_format(res->retry_in_ms, d, sizeof(d));
	if (x->why) {
		/* Stopped: the worker decides how the attempt ends. */
		log_job(LOG_INFO, &x->lj, "POST %s: %s, wall %lld ms",
			x->target, x->why,
			(long long)(util_now_ms() - x->start_ms));
		return;
	}
	log_job(res->outcome == OUTCOME_DONE || res->snooze ? LOG_INFO
							    : LOG_WARN,
		&x->lj, "POST %s: %s -> %s%s%s, wall %lld ms, %zu bytes%s",
		x->target, status ? what : res->error,
		res->snooze ? "snooze" : names[res->outcome],
		d[0] ? " in " : "", d, (long long)(util_now_ms() - x->start_ms),
		x->body_total,
		x->body_total > x->body.len ? " (over 1 MiB: not kept)" : "");
}

/* The transfer of x has ended: report it (this frees x). */
static void
complete(struct http_run *x, CURLcode rc)
{
	struct handler_result res = {.outcome = OUTCOME_RETRY,
				     .retry_in_ms = -1};

	make_result(x, rc, &res);
	log_attempt(x, rc, &res);
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

	log_attempt(x, CURLE_OK, &res);
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
