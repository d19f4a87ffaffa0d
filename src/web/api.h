/*
 * api: what the web console asks of the database, as JSON.  web.c (the HTTP
 * server, sessions, access) calls these after it has decided the request
 * may go on; api.c holds the statements.  Neither side sees the other's
 * details: web.c knows nothing of SQL, api.c nothing of HTTP beyond a
 * status code, and nothing of libmicrohttpd.
 *
 * The paths and their answers are listed in docs/console.md ("The API").
 * Every string an application or a handler wrote (payloads, results,
 * errors, kinds, queues, keys) reaches the browser only as a JSON string,
 * made valid UTF-8; the page puts it in the document as text, never as
 * markup.
 */
#ifndef PGJOBD_WEB_API_H
#define PGJOBD_WEB_API_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "db/db.h"

/* The query string of a GET, as the server parsed it (decoded). */
struct web_query {
	/* The value of key, or NULL when absent. */
	const char *(*get)(void *ctx, const char *key);
	void *ctx;
};

/* Who asks: decided by web.c from the session. */
struct web_user {
	const char *name; /* "" for the anonymous user of an open console */
	int operator;	  /* 1: may act; 0: read-only */
};

/* An answer.  body is owned by the response (malloc'd); NULL for none. */
struct web_response {
	int status; /* HTTP status: 200, 400, 404, 409, 500, 503 ... */
	const char *content_type; /* static; "application/json" by default */
	char *body;
	size_t len;
	/* Extra header for downloads (static or NULL), e.g.
	 * "attachment; filename=\"job-42-payload.json\"". */
	const char *content_disposition;
};

/*
 * GET /api/<path> (path without the "/api/" prefix, e.g. "overview",
 * "jobs", "job/42").  Fills out; returns 0, or -1 when db failed in a way
 * that means the connection is gone (web.c then reconnects).  An unknown
 * path is a 404 in out, not -1.
 */
int web_api_get(struct db_conn *db, const char *path, const struct web_query *q,
		struct web_response *out);

/*
 * POST /api/<path> with a parsed JSON body (never NULL: {} when empty).
 * web.c has already checked the session, the CSRF token and that u is an
 * operator; api.c checks it again (u->operator) and refuses with 403.
 * Returns as web_api_get().
 */
int web_api_post(struct db_conn *db, const struct web_user *u, const char *path,
		 const cJSON *body, struct web_response *out);

/*
 * The settings a connection needs before web_api_get()/web_api_post() run
 * on it: sent once, after connecting (web.c does; so do the tests and the
 * benchmark).  Returns 0, or -1 with *err set (caller frees).
 */
int web_api_session(struct db_conn *db, char **err);

#endif
