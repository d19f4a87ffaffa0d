/*
 * web: the web console's HTTP server (web.h).  libmicrohttpd runs an
 * internal pool of POOL_THREADS threads; each request is answered in one of
 * them, start to end, with that thread's own database connection.  The
 * decisions about access are all in answer() and the functions it calls, in
 * the order a request meets them: Host, size, the static page, the session
 * (with users, and its token: the cookie alone reads nothing), then for a
 * POST the CSRF token, Content-Type, Origin and role; only then does api.c
 * see it (docs/security.md, "The web console").
 */
#include "web/web.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "common/log.h"
#include "common/metrics.h"
#include "common/util.h"
#include "db/db.h"
#include "db/migrate.h"
#include "web/api.h"
#include "web/assets.h"
#include "web/auth.h"
#include "web/deadline.h"
#include "web/gzip.h"
#include "web/listen.h"
#include "web/unserved.h"

/*
 * Bounds on what a peer may send: a POST body of BODY_MAX bytes (413 past
 * it; one announced past BODY_REFUSE is refused before a byte is read), a
 * URL with its query of URL_MAX (414), CONN_MAX connections at once
 * (PER_IP_MAX from one address, so that a few addresses cannot take them
 * all), each dropped after CONN_TIMEOUT_S idle seconds, and MEMORY_MAX
 * bytes for a request's headers.  A request's head must be whole within
 * HEAD_S of the connection (for the next request on it: of the last
 * answer, plus the idle time), and its body within BODY_S of its head,
 * however steadily their bytes trickle in: an idle timeout alone lets a
 * byte every few seconds hold a connection for ever (slowloris).
 */
#define POOL_THREADS   4
#define BODY_MAX       (64 * 1024)
#define BODY_REFUSE    (1024 * 1024)
#define URL_MAX	       (8 * 1024)
#define CONN_MAX       256
#define PER_IP_MAX     16
#define CONN_TIMEOUT_S 30
#define HEAD_S	       10
#define BODY_S	       30
#define MEMORY_MAX     (32 * 1024)
/* An API answer is gzip'd from this many bytes, for a browser that takes
 * it (web/gzip.h bounds it from above): below, the header costs more than
 * compressing saves. */
#define GZIP_MIN 1024

#define COOKIE_NAME "pgjob_session"
#define CSP                                                                    \
	"default-src 'none'; script-src 'self'; style-src 'self'; "            \
	"img-src 'self' data:; connect-src 'self'; base-uri 'none'; "          \
	"form-action 'self'; frame-ancestors 'none'"

/* What the whole server shares; set before the threads start, then read
 * only. */
static struct {
	const struct web_options *o;
	const struct web_conf *conf;
	bool login_required; /* web.users is not empty */
	bool loopback;	     /* bound to a loopback address */
	char *hosts[3];	     /* the Host values a loopback console takes */
	/* From web.public_url: its Host ("jobs.example.com[:port]") and its
	 * origin ("https://jobs.example.com[:port]"), or NULL. */
	char *public_host, *public_origin;
	bool secure;	/* Secure on the cookie */
	char *database; /* current_database(), for /api/session */
} srv;

/*
 * The database connections, one per server thread.  A thread finds its own
 * through its _Thread_local index into conns[]; the main thread closes them
 * all after MHD_stop_daemon() has joined the threads.
 */
#define CONNS_MAX 16
static pthread_mutex_t conns_lock = PTHREAD_MUTEX_INITIALIZER;
static struct db_conn *conns[CONNS_MAX];
static int nconns;
static _Thread_local int conn_index = -1;
/* A connection failed and none has been made since: the log says so once,
 * not once a request (the page asks every 2 seconds). */
static bool db_down;

/* One request's state across libmicrohttpd's calls. */
struct request {
	struct buf body;
	bool too_big;
};

/* An answer before it becomes an MHD_Response. */
struct reply {
	int status;
	const char *type; /* static */
	char *body;	  /* owned, unless is_static */
	size_t len;
	bool is_static;
	bool api; /* Cache-Control: no-store */
	/* An asset's ETag and its encoding ("gzip" or NULL); static. */
	const char *etag, *encoding;
	/* Holds a secret (the CSRF token): never compressed, since a
	 * compressed secret beside text an attacker chose leaks through the
	 * length (BREACH). */
	bool secret;
	char *set_cookie;
	int retry_after;
	const char *disposition; /* static */
};

static void
reply_json(struct reply *r, int status, cJSON *item)
{
	r->status = status;
	r->type = "application/json";
	r->body = cJSON_PrintUnformatted(item);
	if (!r->body)
		abort(); /* out of memory, as xmalloc() does */
	r->len = strlen(r->body);
	cJSON_Delete(item);
}

static void
reply_error(struct reply *r, int status, const char *msg)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "error", msg);
	reply_json(r, status, o);
}

/* ---- the database connection of this thread ---- */

static struct db_conn *
thread_db(struct reply *r)
{
	char *err = NULL;
	struct db_conn *db;

	pthread_mutex_lock(&conns_lock);
	if (conn_index < 0 && nconns < CONNS_MAX)
		conn_index = nconns++;
	db = conn_index >= 0 ? conns[conn_index] : NULL;
	pthread_mutex_unlock(&conns_lock);
	if (conn_index < 0) {
		reply_error(r, 503, "no database connection for this thread");
		return NULL;
	}
	if (db)
		return db;
	/* A console never weighs on the database for long: api.c's settings
	 * stop every statement after 5 s. */
	db = db_connect(srv.o->conninfo, "pgjob web", &err);
	if (db && web_api_session(db, &err) < 0) {
		db_close(db);
		db = NULL;
	}
	pthread_mutex_lock(&conns_lock);
	bool was_down = db_down;
	db_down = !db;
	pthread_mutex_unlock(&conns_lock);
	if (!db && !was_down)
		log_warnx("web: database: %s (answering 503 until it is back)",
			  err);
	else if (db && was_down)
		log_info("web: database: connected again");
	if (!db) {
		reply_error(r, 503,
			    "the database cannot be reached (the "
			    "console's log says why)");
		free(err);
		return NULL;
	}
	pthread_mutex_lock(&conns_lock);
	conns[conn_index] = db;
	pthread_mutex_unlock(&conns_lock);
	return db;
}

/* After api.c said the connection is gone: the next request opens one. */
static void
thread_db_lost(void)
{
	pthread_mutex_lock(&conns_lock);
	db_close(conns[conn_index]);
	conns[conn_index] = NULL;
	pthread_mutex_unlock(&conns_lock);
}

/* ---- sending ---- */

static enum MHD_Result
send_reply(struct MHD_Connection *c, struct reply *r)
{
	/* An API answer (an asset comes gzip'd already: assets.h). */
	if (!r->is_static && !r->secret)
		r->encoding = web_gzip_body(
			MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						    "Accept-Encoding"),
			GZIP_MIN, &r->body, &r->len);
	struct MHD_Response *resp = MHD_create_response_from_buffer(
		r->len, r->body,
		r->is_static ? MHD_RESPMEM_PERSISTENT : MHD_RESPMEM_MUST_FREE);
	enum MHD_Result rc;
	char n[16];

	if (!resp) {
		if (!r->is_static)
			free(r->body);
		free(r->set_cookie);
		return MHD_NO;
	}
	/* Every answer, the page's and the API's, errors included. */
	MHD_add_response_header(resp, "Content-Security-Policy", CSP);
	MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
	MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
	MHD_add_response_header(resp, "X-Frame-Options", "DENY");
	/* An asset: kept, but asked again (its ETag) before each use, so
	 * that a new build's is seen at once. */
	MHD_add_response_header(resp, "Cache-Control",
				r->api ? "no-store" : "no-cache");
	MHD_add_response_header(resp, "Vary", "Accept-Encoding");
	if (r->etag)
		MHD_add_response_header(resp, "ETag", r->etag);
	if (r->encoding)
		MHD_add_response_header(resp, "Content-Encoding", r->encoding);
	if (r->type)
		MHD_add_response_header(resp, "Content-Type", r->type);
	if (r->set_cookie)
		MHD_add_response_header(resp, "Set-Cookie", r->set_cookie);
	if (r->disposition)
		MHD_add_response_header(resp, "Content-Disposition",
					r->disposition);
	if (r->retry_after > 0) {
		snprintf(n, sizeof(n), "%d", r->retry_after);
		MHD_add_response_header(resp, "Retry-After", n);
	}
	rc = MHD_queue_response(c, (unsigned)r->status, resp);
	MHD_destroy_response(resp);
	free(r->set_cookie);
	return rc;
}

static char *
cookie_for(const char *token)
{
	const char *secure = srv.secure ? "; Secure" : "";
	if (!token)
		return xasprintf(COOKIE_NAME "=; Max-Age=0; HttpOnly; "
					     "SameSite=Strict; Path=/%s",
				 secure);
	return xasprintf(COOKIE_NAME "=%s; HttpOnly; SameSite=Strict; "
				     "Path=/%s",
			 token, secure);
}

/*
 * GET /api/session's answer, and /api/login's.  The CSRF token only in the
 * answer that makes a session (a login, or a new anonymous one): a request
 * that only carries the cookie, which a page of any port of this host gets
 * sent, never learns it (docs/security.md, "Sessions").
 */
static void
reply_session(struct reply *r, const struct auth_session *s, bool csrf)
{
	cJSON *o = cJSON_CreateObject();
	const char *role = s->role == AUTH_OPERATOR    ? "operator"
			   : s->role == AUTH_READ_ONLY ? "read-only"
						       : NULL;

	if (s->user[0])
		cJSON_AddStringToObject(o, "user", s->user);
	else
		cJSON_AddNullToObject(o, "user");
	if (role)
		cJSON_AddStringToObject(o, "role", role);
	else
		cJSON_AddNullToObject(o, "role");
	cJSON_AddBoolToObject(o, "login_required", srv.login_required);
	if (csrf)
		cJSON_AddStringToObject(o, "csrf", s->csrf);
	r->secret = csrf;
	cJSON_AddStringToObject(o, "version", PGJOBD_VERSION);
	if (srv.database)
		cJSON_AddStringToObject(o, "database", srv.database);
	else
		cJSON_AddNullToObject(o, "database");
	reply_json(r, 200, o);
}

/* ---- the checks ---- */

static enum MHD_Result
add_length(void *cls, enum MHD_ValueKind kind, const char *key,
	   const char *value)
{
	size_t *n = cls;
	*n += strlen(key) + (value ? strlen(value) : 0) + 2;
	return MHD_YES;
}

/* The URL as the peer sent it was longer than URL_MAX (about: the query
 * comes back decoded, which is never longer). */
static bool
url_too_long(struct MHD_Connection *c, const char *url)
{
	size_t n = strlen(url);
	MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, add_length, &n);
	return n > URL_MAX;
}

/*
 * On a loopback address, only the Host names of this machine, and
 * web.public_url's (what a reverse proxy passes on): a page of another site
 * whose name resolves to 127.0.0.1 (DNS rebinding) sends its own, and gets
 * nothing.
 */
static bool
host_ok(const char *host)
{
	if (!srv.loopback)
		return true;
	if (!host)
		return false;
	for (size_t i = 0; i < 3; i++)
		if (strcasecmp(host, srv.hosts[i]) == 0)
			return true;
	return srv.public_host && strcasecmp(host, srv.public_host) == 0;
}

/* An Origin, when the browser sends one, must be this console's: its Host's,
 * or web.public_url's. */
static bool
origin_ok(const char *origin, const char *host)
{
	if (!origin)
		return true;
	if (srv.public_origin && strcasecmp(origin, srv.public_origin) == 0)
		return true;
	if (!host)
		return false;
	const char *rest = strncmp(origin, "http://", 7) == 0	 ? origin + 7
			   : strncmp(origin, "https://", 8) == 0 ? origin + 8
								 : NULL;
	return rest && strcasecmp(rest, host) == 0;
}

static void
client_address(struct MHD_Connection *c, char *buf, size_t len)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = ci ? ci->client_addr : NULL;
	socklen_t sl = sa && sa->sa_family == AF_INET6
			       ? sizeof(struct sockaddr_in6)
			       : sizeof(struct sockaddr_in);

	snprintf(buf, len, "unknown");
	if (sa)
		getnameinfo(sa, sl, buf, (socklen_t)len, NULL, 0,
			    NI_NUMERICHOST);
}

/* ---- the API ---- */

static const char *
query_get(void *ctx, const char *key)
{
	return MHD_lookup_connection_value(ctx, MHD_GET_ARGUMENT_KIND, key);
}

/* Turns api.c's answer into r; -1 from api.c drops the connection. */
static void
from_api(struct reply *r, int rc, struct web_response *out, const char *method,
	 const char *path)
{
	if (rc < 0)
		thread_db_lost();
	if (!out->status || (!out->body && out->status >= 400)) {
		free(out->body);
		reply_error(r, rc < 0 ? 503 : 500,
			    rc < 0 ? "the database connection was lost"
				   : "no answer");
	} else {
		r->status = out->status;
		r->type = out->content_type ? out->content_type
					    : "application/json";
		r->body = out->body;
		r->len = out->len;
		r->disposition = out->content_disposition;
	}
	if (r->status >= 500)
		log_warnx("web: %s /api/%s: %d", method, path, r->status);
}

static void
api_get(struct MHD_Connection *c, const char *path, struct reply *r)
{
	struct web_query q = {.get = query_get, .ctx = c};
	struct web_response out = {0};
	struct db_conn *db = thread_db(r);
	int rc;

	if (!db)
		return;
	/*
	 * A read is asked again, once, on a new connection when the old one
	 * was found gone (the server restarted, a failover, an idle session
	 * killed): the page sees no error for what a reconnect mends.  A POST
	 * is not: it may have acted before the connection went.
	 */
	if ((rc = web_api_get(db, path, &q, &out)) < 0) {
		thread_db_lost();
		free(out.body);
		out = (struct web_response){0};
		if (!(db = thread_db(r)))
			return;
		rc = web_api_get(db, path, &q, &out);
	}
	from_api(r, rc, &out, "GET", path);
}

static void
api_post(const struct auth_session *s, const char *path, const cJSON *body,
	 struct reply *r)
{
	struct web_user u = {.name = s->user,
			     .operator= s->role == AUTH_OPERATOR };
	struct web_response out = {0};
	struct db_conn *db = thread_db(r);

	if (!db)
		return;
	from_api(r, web_api_post(db, &u, path, body, &out), &out, "POST", path);
}

/* POST /api/login {"user", "password"}. */
static void
login(struct MHD_Connection *c, const struct auth_session *s, const cJSON *body,
      struct reply *r)
{
	const cJSON *user = cJSON_GetObjectItemCaseSensitive(body, "user");
	const cJSON *pw = cJSON_GetObjectItemCaseSensitive(body, "password");
	struct auth_session now;
	char addr[64];

	if (!srv.login_required) {
		reply_error(r, 400,
			    "this console has no users (web.users): "
			    "it needs no login");
		return;
	}
	if (!cJSON_IsString(user) || !cJSON_IsString(pw)) {
		reply_error(r, 400,
			    "expected {\"user\": \"...\", "
			    "\"password\": \"...\"}");
		return;
	}
	client_address(c, addr, sizeof(addr));
	switch (auth_login(addr, user->valuestring, pw->valuestring, s->token,
			   &now, &r->retry_after)) {
	case AUTH_LOGIN_OK:
		reply_session(r, &now, true);
		r->set_cookie = cookie_for(now.token);
		break;
	case AUTH_LOGIN_FAILED:
		reply_error(r, 401, "unknown user or wrong password");
		break;
	case AUTH_LOGIN_THROTTLED:
		reply_error(r, 429, "too many failed logins: wait and retry");
		break;
	case AUTH_LOGIN_ERROR:
		reply_error(r, 500, "no session could be made");
		break;
	}
}

/* A POST: the session, its CSRF token, Content-Type, Origin, then the
 * role; the body must be a JSON object. */
static void
post(struct MHD_Connection *c, const char *path, bool have,
     const struct auth_session *s, struct request *rq, struct reply *r)
{
	const char *token =
		MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-CSRF-Token");
	const char *type =
		MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
	const char *origin =
		MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
	const char *host =
		MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");
	cJSON *body;

	if (rq->too_big) {
		reply_error(r, 413, "the body is over 64 KiB");
		return;
	}
	if (!have) {
		reply_error(r, 403,
			    "no session: GET /api/session "
			    "first, and send its cookie");
		return;
	}
	if (!token || !auth_equal(token, s->csrf)) {
		reply_error(r, 403, "missing or wrong X-CSRF-Token");
		return;
	}
	if (!type || strncasecmp(type, "application/json", 16) != 0 ||
	    (type[16] && type[16] != ';')) {
		reply_error(r, 403,
			    "Content-Type must be "
			    "application/json");
		return;
	}
	if (!origin_ok(origin, host)) {
		reply_error(r, 403, "Origin is not this console's");
		return;
	}
	if (strcmp(path, "logout") == 0) {
		auth_session_end(s->token);
		r->set_cookie = cookie_for(NULL);
		{
			reply_json(r, 200, cJSON_CreateObject());
			return;
		}
	}
	buf_append(&rq->body, "", 1); /* NUL-terminated */
	body = rq->body.len > 1
		       ? cJSON_ParseWithLength(rq->body.data, rq->body.len - 1)
		       : cJSON_CreateObject();
	if (!cJSON_IsObject(body))
		reply_error(r, 400, "the body is not a JSON object");
	else if (strcmp(path, "login") == 0)
		login(c, s, body, r);
	else if (srv.login_required && s->role == AUTH_NONE)
		reply_error(r, 401, "log in first");
	else if (s->role != AUTH_OPERATOR)
		reply_error(r, 403, "a read-only user cannot act");
	else
		api_post(s, path, body, r);
	cJSON_Delete(body);
}

static void
api(struct MHD_Connection *c, const char *method, const char *path,
    struct request *rq, struct reply *r)
{
	const char *cookie =
		MHD_lookup_connection_value(c, MHD_COOKIE_KIND, COOKIE_NAME);
	struct auth_session s;
	bool have = cookie && auth_session_find(cookie, &s) == 0;

	r->api = true;
	if (strcmp(method, "POST") == 0) {
		post(c, path, have, &s, rq, r);
		/* Every action and its outcome, by whom: the console's audit
		 * trail (a login logs its own lines, in auth.c). */
		if (strcmp(path, "login") != 0)
			log_info("web: POST /api/%s by %s: %d", path,
				 !have	     ? "(no session)"
				 : s.user[0] ? s.user
					     : "(anonymous)",
				 r->status);
		return;
	}
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
		reply_error(r, 405, "GET or POST");
		return;
	}
	const char *token =
		MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-CSRF-Token");
	if (strcmp(path, "session") == 0) {
		/* A new anonymous session (before a login, so that the
		 * login POST has a CSRF token too) for a request without a
		 * session, or from a page that has no token for the session
		 * its cookie names (?new=1) or not its token (the server
		 * restarted): it is not the cookie's session, so its token
		 * can be handed out. */
		bool fresh = !have ||
			     MHD_lookup_connection_value(
				     c, MHD_GET_ARGUMENT_KIND, "new") ||
			     (token && !auth_equal(token, s.csrf));
		if (fresh && auth_session_new(&s) < 0) {
			reply_error(r, 500, "no session could be made");
			return;
		}
		if (fresh)
			r->set_cookie = cookie_for(s.token);
		reply_session(r, &s, fresh);
		return;
	}
	if (srv.login_required && (!have || s.role == AUTH_NONE)) {
		reply_error(r, 401, "log in first");
		return;
	}
	/* With users, a read needs the page's token as a POST does: the
	 * cookie alone, which a page of another port gets, reads nothing. */
	if (srv.login_required && (!token || !auth_equal(token, s.csrf))) {
		reply_error(r, 401,
			    "missing or wrong X-CSRF-Token: log in "
			    "again");
		return;
	}
	api_get(c, path, r);
}

/* ---- libmicrohttpd's callbacks ---- */

static void
route(struct MHD_Connection *c, const char *url, const char *method,
      struct request *rq, struct reply *r)
{
	const char *host =
		MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");
	const struct web_asset *a;

	r->api = strncmp(url, "/api/", 5) == 0;
	if (!host_ok(host)) {
		reply_error(r, 421,
			    "this console answers to "
			    "127.0.0.1, localhost and [::1] "
			    "only (see docs/console.md)");
		return;
	}
	if (url_too_long(c, url)) {
		reply_error(r, 414, "the URL is over 8 KiB");
		return;
	}
	if (strncmp(url, "/api/", 5) == 0) {
		api(c, method, url + 5, rq, r);
		return;
	}
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
		reply_error(r, 405, "GET");
		return;
	}
	if (!(a = web_asset_find(url))) {
		reply_error(r, 404, "no such page");
		return;
	}
	struct web_asset_body b;
	r->status =
		web_asset_answer(a,
				 MHD_lookup_connection_value(c, MHD_HEADER_KIND,
							     "Accept-Encoding"),
				 MHD_lookup_connection_value(c, MHD_HEADER_KIND,
							     "If-None-Match"),
				 &b);
	r->type = r->status == 200 ? a->content_type : NULL;
	r->body = (char *)b.data;
	r->len = b.len;
	r->etag = b.etag;
	r->encoding = b.encoding;
	r->is_static = true;
}

static enum MHD_Result
answer(void *cls, struct MHD_Connection *c, const char *url, const char *method,
       const char *version, const char *data, size_t *size, void **state)
{
	struct request *rq = *state;
	struct reply r = {0};

	if (!rq) {
		/* The headers only: answer on the next call, when libmicrohttpd
		 * knows the body (none for a GET), so that the connection can
		 * stay open for the page's next request. */
		*state = rq = xcalloc(1, sizeof(*rq));
		web_deadline_set(c, BODY_S * 1000LL); /* its head is in */
		const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
							     "Content-Length");
		if (!cl || strtoull(cl, NULL, 10) <= BODY_REFUSE)
			return MHD_YES;
		r.api = true;
		reply_error(&r, 413, "the body is over 64 KiB");
		return send_reply(c, &r);
	}
	if (*size) {
		if (rq->body.len + *size > BODY_MAX)
			rq->too_big = true; /* read and dropped */
		else
			buf_append(&rq->body, data, *size);
		*size = 0;
		return MHD_YES;
	}
	web_deadline_set(c, 0); /* the whole request is in */
	route(c, url, method, rq, &r);
	return send_reply(c, &r);
}

static void
completed(void *cls, struct MHD_Connection *c, void **state,
	  enum MHD_RequestTerminationCode why)
{
	struct request *rq = *state;

	/* The next request's head: within the idle time and HEAD_S. */
	web_deadline_set(c, (CONN_TIMEOUT_S + HEAD_S) * 1000LL);
	if (!rq)
		return;
	buf_free(&rq->body);
	free(rq);
	*state = NULL;
}

__attribute__((format(printf, 2, 0))) static void
mhd_log(void *cls, const char *fmt, va_list ap)
{
	char line[512];
	size_t n;

	vsnprintf(line, sizeof(line), fmt, ap);
	n = strlen(line);
	while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
		line[--n] = '\0';
	log_warnx("web: libmicrohttpd: %s", line);
}

/* ---- starting and stopping ---- */

/*
 * Connects once before serving: the database must be there and its schema
 * the one this pgjob knows.  Returns 0, or the exit code after printing.
 */
static int
check_database(void)
{
	char *err = NULL;
	int version = -1;
	struct db_conn *db = db_connect(srv.o->conninfo, "pgjob web", &err);

	if (!db) {
		fprintf(stderr, "pgjob: web: %s\n", err);
		free(err);
		return 1;
	}
	if (migrate_check(db, &version, &err) < 0) {
		fprintf(stderr, "pgjob: web: %s\n", err);
		free(err);
		db_close(db);
		return version >= 0 ? EXIT_CONFIG : 1;
	}
	struct db_rows *rows =
		db_query(db, "select current_database()", 0, NULL, NULL);
	if (rows && db_rows_count(rows) == 1)
		srv.database = xstrdup(db_rows_text(rows, 0, 0));
	db_rows_free(rows);
	db_close(db);
	return 0;
}

static void
cleanup(void)
{
	for (int i = 0; i < nconns; i++) {
		db_close(conns[i]);
		conns[i] = NULL;
	}
	nconns = 0;
	for (size_t i = 0; i < 3; i++) {
		free(srv.hosts[i]);
		srv.hosts[i] = NULL;
	}
	free(srv.database);
	srv.database = NULL;
	free(srv.public_host);
	free(srv.public_origin);
	srv.public_host = srv.public_origin = NULL;
	auth_shutdown();
	web_assets_free();
	web_unserved_stop();
}

int
web_run(const struct web_options *o)
{
	struct sockaddr_storage bound = {0};
	struct MHD_Daemon *d;
	sigset_t stop, old;
	char host[INET6_ADDRSTRLEN + 2];
	int fd, port, sig, rc;

	srv.o = o;
	srv.conf = o->conf;
	srv.login_required = o->conf->nusers > 0;
	if ((rc = check_database()) != 0)
		return rc;
	web_assets_prepare();
	if ((fd = web_listen_open(o->listen, &bound)) < 0) {
		cleanup();
		return 1;
	}
	srv.loopback = web_is_loopback(&bound);
	if (!srv.loopback && !srv.login_required) {
		fprintf(stderr,
			"pgjob: web: %s is not a loopback address, and the "
			"config has no web.users: anyone who reaches it could "
			"act on every job.  Add users (a hash from `pgjob web "
			"--hash-password`) or listen on 127.0.0.1\n",
			o->listen);
		close(fd);
		cleanup();
		return EXIT_CONFIG;
	}
	web_bound_name(&bound, host, sizeof(host), &port);
	srv.hosts[0] = xasprintf("127.0.0.1:%d", port);
	srv.hosts[1] = xasprintf("localhost:%d", port);
	srv.hosts[2] = xasprintf("[::1]:%d", port);
	if (o->conf->public_url) {
		/* Checked by the config: scheme://host[:port][/]. */
		const char *u = o->conf->public_url;
		size_t n = strlen(u);
		if (n && u[n - 1] == '/')
			n--;
		srv.public_origin = xstrndup(u, n);
		srv.public_host = xstrdup(strstr(srv.public_origin, "://") + 3);
	}
	srv.secure = o->conf->cookie_secure ||
		     (o->conf->public_url &&
		      strncmp(o->conf->public_url, "https://", 8) == 0);
	if (auth_init(o->conf) < 0) {
		close(fd);
		cleanup();
		return 1;
	}

	/* SIGINT and SIGTERM wait for sigwait() below: blocked before the
	 * server's threads start, so that they inherit the mask. */
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &stop, &old);
	signal(SIGPIPE, SIG_IGN);
	web_unserved_start(o->conninfo);
	/* A connection of the pool's threads may close while its entry is
	 * still taken, hence room for more than CONN_MAX. */
	web_deadline_start(CONN_MAX + POOL_THREADS * 2, HEAD_S * 1000LL);
	/* The logger first: MHD logs through whatever it has so far. */
	d = MHD_start_daemon(
		MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO |
			MHD_USE_ERROR_LOG,
		0, NULL, NULL, answer, NULL, MHD_OPTION_EXTERNAL_LOGGER,
		mhd_log, NULL, MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
		MHD_OPTION_THREAD_POOL_SIZE, (unsigned int)POOL_THREADS,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned int)CONN_MAX,
		MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned int)PER_IP_MAX,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)CONN_TIMEOUT_S,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)MEMORY_MAX,
		MHD_OPTION_NOTIFY_COMPLETED, completed, NULL,
		MHD_OPTION_NOTIFY_CONNECTION, web_deadline_connection, NULL,
		MHD_OPTION_END);
	if (!d) {
		fprintf(stderr, "pgjob: web: the HTTP server did not start\n");
		web_deadline_stop();
		close(fd);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		cleanup();
		return 1;
	}
	log_info("web: console at http://%s:%d/ (database %s; %s)", host, port,
		 srv.database ? srv.database : "?",
		 srv.login_required
			 ? "users log in"
			 : "open: no web.users, every local user of this host "
			   "is an operator (docs/console.md)");
	do {
		if (sigwait(&stop, &sig) != 0)
			sig = SIGTERM;
	} while (sig != SIGINT && sig != SIGTERM);
	log_info("web: %s: stopping", sig == SIGINT ? "SIGINT" : "SIGTERM");
	/* Closes the listening socket and every connection, and joins the
	 * threads: after it, no request is running. */
	MHD_stop_daemon(d);
	web_deadline_stop();
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	cleanup();
	return 0;
}
