/*
 * fuzz_web: the web console's request handling (docs/console.md, "The
 * API"), without a database, on what a client chooses: the path, the query
 * string, the session cookie, the X-CSRF-Token header and the JSON body.
 * The input is the request, as lines:
 *
 *   METHOD /api/PATH?QUERY     (GET, HEAD or POST; "/api/" may be left out)
 *   COOKIE                     pgjob_session's value
 *   CSRF                       X-CSRF-Token's value
 *   BODY...                    the rest, the POST's body
 *
 * The session: auth_session_find() on the cookie and auth_equal() on the
 * token (src/web/auth.c), in an open console (no web.users): a session is
 * found exactly for a token of the anonymous form, 64 hex digits.  The query
 * string is decoded as libmicrohttpd decodes it for web.c ('&' between pairs,
 * '+' a space, %XX by MHD_http_unescape()), and the body parsed as web.c does.
 * Then web_api_get() or web_api_post() (api.c: the routing table, the
 * filter of src/web/api_filter.c, the bodies of the actions) as web.c
 * calls them, on a connection that never opens: a connection started
 * (libpq's PQconnectStartParams()) to a socket of this process that
 * listens and never answers.  A request reaches its first statement, which
 * fails there (503), so what is fuzzed is everything before it.
 *
 * Every answer has a status and a body that is JSON jsonb takes (no
 * invalid UTF-8 from a hostile path or value), a 4xx or 503 (nothing
 * succeeds without the database, and a 500 is a bug); a read-only user's
 * POST is always 403.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <microhttpd.h>

#include "common/config.h"
#include "common/pgtext.h"
#include "db/db.h"
#include "web/api.h"
#include "web/auth.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct db_conn *db;
static struct web_conf conf;

/* The connection that never opens: see the top of the file. */
static void
setup(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	char ci[128], *err = NULL;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(fd, 4) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
		perror("fuzz_web: a listening socket");
		abort();
	}
	snprintf(ci, sizeof(ci),
		 "host=127.0.0.1 port=%d dbname=fuzz user=fuzz sslmode=disable",
		 ntohs(a.sin_port));
	if (!(db = db_connect_start(ci, "fuzz_web", &err))) {
		fprintf(stderr, "fuzz_web: %s\n", err);
		abort();
	}
	/* The listening socket stays open (never accepted) for the run. */
	conf.session_ttl_ms = 3600 * 1000LL;
	if (auth_init(&conf) < 0)
		abort();
}

/* The pairs of a query string, decoded (web_query's getter). */
struct query {
	size_t n;
	char *key[64], *val[64];
};

static const char *
query_get(void *ctx, const char *key)
{
	const struct query *q = ctx;
	for (size_t i = 0; i < q->n; i++)
		if (strcmp(q->key[i], key) == 0)
			return q->val[i];
	return NULL;
}

static void
decode(char *s)
{
	for (char *p = s; *p; p++)
		if (*p == '+')
			*p = ' ';
	MHD_http_unescape(s);
}

/* Splits s (modified) into q. */
static void
query_parse(char *s, struct query *q)
{
	q->n = 0;
	while (s && *s && q->n < 64) {
		char *amp = strchr(s, '&'), *eq;
		if (amp)
			*amp = '\0';
		if ((eq = strchr(s, '=')) != NULL)
			*eq++ = '\0';
		decode(s);
		if (eq)
			decode(eq);
		q->key[q->n] = s;
		/* A key without "=" has no value, as libmicrohttpd has it. */
		q->val[q->n++] = eq;
		s = amp ? amp + 1 : NULL;
	}
}

/* The next line of *p (up to end), as a new string; *p moves past it. */
static char *
line(const char **p, const char *end)
{
	const char *nl = memchr(*p, '\n', (size_t)(end - *p));
	const char *stop = nl ? nl : end;
	char *s = malloc((size_t)(stop - *p) + 1);
	if (!s)
		abort();
	memcpy(s, *p, (size_t)(stop - *p));
	s[stop - *p] = '\0';
	*p = nl ? nl + 1 : end;
	return s;
}

/* PGJOBD_FUZZ_VERBOSE=1: each answer on stderr, to see what an input
 * reaches. */
static void
check_answer(const struct web_response *out)
{
	if (getenv("PGJOBD_FUZZ_VERBOSE"))
		fprintf(stderr, "  %d %.*s\n", out->status, (int)out->len,
			out->body ? out->body : "");
	if (!out->body || out->len != strlen(out->body) || !out->content_type)
		abort();
	if (!pgtext_is_jsonb(out->body, out->len))
		abort();
	if (out->status == 500 || out->status < 200 || out->status > 599)
		abort();
	cJSON *j = cJSON_Parse(out->body);
	if (!cJSON_IsObject(j))
		abort();
	if (out->status >= 400 &&
	    !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(j, "error")) &&
	    out->status != 409)
		abort();
	cJSON_Delete(j);
}

static void
check_session(const char *cookie, const char *csrf)
{
	struct auth_session s;
	size_t n = strspn(cookie, "0123456789abcdef");

	if (auth_session_find(cookie, &s) < 0) {
		/* Refused: only a token not of the anonymous form. */
		if (n == AUTH_TOKEN_LEN && !cookie[n])
			abort();
		return;
	}
	/* Found: anonymous (no user logs in here), of the cookie's token,
	 * with a CSRF token of its own form. */
	if (n != AUTH_TOKEN_LEN || cookie[n] || !s.anonymous ||
	    strcmp(s.token, cookie) != 0 ||
	    strspn(s.csrf, "0123456789abcdef") != AUTH_TOKEN_LEN ||
	    s.csrf[AUTH_TOKEN_LEN] || s.role != AUTH_OPERATOR)
		abort();
	/* The header's token is the session's only when it is equal. */
	if (auth_equal(csrf, s.csrf) != (strcmp(csrf, s.csrf) == 0))
		abort();
	auth_session_end(cookie);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data, *end = p + size;
	struct web_response out = {0};
	struct query q;

	if (!db)
		setup();
	char *first = line(&p, end);
	char *cookie = line(&p, end);
	char *csrf = line(&p, end);
	/* The body as web.c has it: its own bytes, NUL after them. */
	size_t blen = (size_t)(end - p);
	char *body = malloc(blen + 1);
	if (!body)
		abort();
	memcpy(body, p, blen);
	body[blen] = '\0';

	check_session(cookie, csrf);

	char *url = strchr(first, ' ');
	char *method = first;
	if (url)
		*url++ = '\0';
	else
		url = first + strlen(first);
	if (strncmp(url, "/api/", 5) == 0)
		url += 5;
	char *qs = strchr(url, '?');
	if (qs)
		*qs++ = '\0';
	query_parse(qs, &q);

	if (strcmp(method, "POST") == 0) {
		cJSON *j = blen ? cJSON_ParseWithLength(body, blen)
				: cJSON_CreateObject();
		struct web_user op = {.name = "", .operator= 1 };
		struct web_user ro = {.name = "reader", .operator= 0 };
		if (cJSON_IsObject(j)) {
			web_api_post(db, &op, url, j, &out);
			check_answer(&out);
			free(out.body);
			out = (struct web_response){0};
			web_api_post(db, &ro, url, j, &out);
			check_answer(&out);
			if (out.status != 403)
				abort();
		}
		cJSON_Delete(j);
	} else {
		struct web_query wq = {.get = query_get, .ctx = &q};
		web_api_get(db, url, &wq, &out);
		check_answer(&out);
	}
	free(out.body);
	free(first);
	free(cookie);
	free(csrf);
	free(body);
	return 0;
}
