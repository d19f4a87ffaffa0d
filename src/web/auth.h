/*
 * auth: who may use the web console.  Password hashes (libxcrypt's
 * yescrypt), the table of sessions (in memory, behind a mutex: every server
 * thread uses it), and the bounds on failed logins, per client address, per
 * user name and for the whole console.  No HTTP here: web.c turns these answers
 * into statuses and headers (docs/security.md, "The web console").
 */
#ifndef PGJOBD_WEB_AUTH_H
#define PGJOBD_WEB_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/config.h"

/* 32 random bytes in hex, and its NUL. */
#define AUTH_TOKEN_LEN 64

enum auth_role {
	AUTH_NONE,	/* a session before its login */
	AUTH_READ_ONLY, /* reads every page, acts on nothing */
	AUTH_OPERATOR,	/* reads and acts */
};

/* A session, as copied out of the table. */
struct auth_session {
	char token[AUTH_TOKEN_LEN + 1]; /* the cookie's value */
	char csrf[AUTH_TOKEN_LEN + 1];	/* X-CSRF-Token of its POSTs */
	char user[65];			/* "" before a login */
	enum auth_role role;
	bool anonymous; /* no user: kept nowhere (auth.c) */
};

/*
 * Takes the users of web (borrowed: they must outlive every other call)
 * and prepares the dummy hash that an unknown user's login is checked
 * against.  Returns 0, or -1 after logging why.
 */
int auth_init(const struct web_conf *web);
/* Frees the tables. */
void auth_shutdown(void);

/*
 * A new yescrypt hash of password.  Returns it (caller frees), or NULL
 * with *err set to a static message.
 */
char *auth_hash_password(const char *password, const char **err);
/* 1 when password matches hash (crypt(3) form), 0 otherwise. */
int auth_verify(const char *password, const char *hash);

/*
 * A new session with no user: before a login, or, in an open console
 * (no web.users), the anonymous operator's.  The server keeps nothing of
 * it.  Fills out; returns 0, or -1 when no random bytes could be had
 * (logged).
 */
int auth_session_new(struct auth_session *out);
/*
 * The session of token: a logged-in one, its expiry pushed back (sliding),
 * else the anonymous session of a token of the right form.  Returns 0
 * with out filled, or -1 when there is none.
 */
int auth_session_find(const char *token, struct auth_session *out);
/* Ends the session of token, if any. */
void auth_session_end(const char *token);

enum auth_login {
	AUTH_LOGIN_OK,
	AUTH_LOGIN_FAILED,    /* unknown user or wrong password: 401 */
	AUTH_LOGIN_THROTTLED, /* too many failures: 429, *retry_after */
	AUTH_LOGIN_ERROR,     /* no random bytes for the session: 500 */
};

/*
 * A login from client address addr (text) as user with password.  On OK,
 * the session of old_token (if any) ends and out is a new one, with new
 * tokens: a session fixed before the login is worth nothing after it.
 * THROTTLED sets *retry_after in seconds.  Logs each failure (the name
 * escaped, never the password).
 */
enum auth_login auth_login(const char *addr, const char *user,
			   const char *password, const char *old_token,
			   struct auth_session *out, int *retry_after);

/* Compares two strings in time that depends only on their lengths. */
bool auth_equal(const char *a, const char *b);

#endif
