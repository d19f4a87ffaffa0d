/*
 * auth: password hashes, sessions and login bounds of the web console
 * (auth.h).  Every table here is shared by the server's threads and guarded
 * by one mutex; a password is hashed outside it (yescrypt takes tens of
 * milliseconds and megabytes on purpose), so that one login does not hold
 * up the requests of others.
 */
#include "web/auth.h"

#include <crypt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "common/log.h"
#include "common/text.h"
#include "common/util.h"

/*
 * Bounds.  Sessions: at most SESSIONS_MAX at once; a full table first drops
 * the expired, then the oldest session that has not logged in (anyone can
 * make those with GET /api/session, so they must never push out a user's).
 * A session before its login lasts PRELOGIN_TTL_MS.
 */
#define SESSIONS_MAX	1024
#define PRELOGIN_TTL_MS (15 * 60 * 1000LL)
/*
 * Failed logins: per client address, FAILURES_FREE of them, then each one
 * blocks the address for BLOCK_FIRST_MS, doubling up to BLOCK_MAX_MS; and
 * no more than GLOBAL_FAILURES in any GLOBAL_WINDOW_MS from everyone, so
 * that many addresses cannot guess faster together.  CLIENTS_MAX addresses
 * are remembered (the oldest forgotten first).
 */
#define FAILURES_FREE	 5
#define BLOCK_FIRST_MS	 (30 * 1000LL)
#define BLOCK_MAX_MS	 (15 * 60 * 1000LL)
#define GLOBAL_FAILURES	 20
#define GLOBAL_WINDOW_MS (60 * 1000LL)
#define CLIENTS_MAX	 4096

struct session {
	struct auth_session s;
	int64_t expires_ms, used_ms;
	bool live;
};

struct client {
	char addr[64];
	int failures;
	int64_t blocked_until_ms, last_ms;
	bool live;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static const struct web_conf *conf;
static char *dummy_hash;
static struct session *sessions; /* SESSIONS_MAX */
static struct client *clients;	 /* CLIENTS_MAX */
/* The times of the last GLOBAL_FAILURES failed logins, a ring. */
static int64_t global_failures[GLOBAL_FAILURES];
static size_t global_next;

static int64_t
now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool
auth_equal(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned char diff = la != lb;

	for (size_t i = 0; i < la && i < lb; i++)
		diff |= (unsigned char)(a[i] ^ b[i]);
	return diff == 0;
}

/* n random bytes as hex into out (2n + 1 bytes).  0, or -1 (logged). */
static int
random_hex(char *out, size_t n)
{
	unsigned char raw[64];
	static const char hex[] = "0123456789abcdef";

	if (n > sizeof(raw) || getrandom(raw, n, 0) != (ssize_t)n) {
		log_error("web: getrandom");
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hex[raw[i] >> 4];
		out[2 * i + 1] = hex[raw[i] & 15];
	}
	out[2 * n] = '\0';
	explicit_bzero(raw, sizeof(raw));
	return 0;
}

char *
auth_hash_password(const char *password, const char **err)
{
	char setting[CRYPT_GENSALT_OUTPUT_SIZE];
	struct crypt_data *cd;
	char *h, *out = NULL;

	/* Count 0: libxcrypt's default cost for yescrypt. */
	if (!crypt_gensalt_rn("$y$", 0, NULL, 0, setting, sizeof(setting))) {
		*err = "crypt_gensalt: no yescrypt in this libcrypt";
		return NULL;
	}
	cd = xcalloc(1, sizeof(*cd));
	h = crypt_rn(password, setting, cd, sizeof(*cd));
	if (!h || h[0] == '*')
		*err = "crypt: hashing failed";
	else
		out = xstrdup(h);
	explicit_bzero(cd, sizeof(*cd));
	free(cd);
	return out;
}

int
auth_verify(const char *password, const char *hash)
{
	struct crypt_data *cd = xcalloc(1, sizeof(*cd));
	const char *h = crypt_rn(password, hash, cd, sizeof(*cd));
	int ok = h && h[0] != '*' && auth_equal(h, hash);

	explicit_bzero(cd, sizeof(*cd));
	free(cd);
	return ok;
}

int
auth_init(const struct web_conf *web)
{
	char password[33];
	const char *err;

	conf = web;
	sessions = xcalloc(SESSIONS_MAX, sizeof(*sessions));
	clients = xcalloc(CLIENTS_MAX, sizeof(*clients));
	if (web->nusers == 0)
		return 0;
	/* An unknown user's login is checked against this, so that it
	 * costs what a known user's does. */
	if (random_hex(password, 16) < 0)
		return -1;
	dummy_hash = auth_hash_password(password, &err);
	if (!dummy_hash) {
		log_errorx("web: %s", err);
		return -1;
	}
	return 0;
}

void
auth_shutdown(void)
{
	if (sessions)
		explicit_bzero(sessions, SESSIONS_MAX * sizeof(*sessions));
	free(sessions);
	free(clients);
	free(dummy_hash);
	sessions = NULL;
	clients = NULL;
	dummy_hash = NULL;
}

/* The place for a new session (lock held): a free one, else an expired
 * one, else the oldest before its login, else the oldest of all. */
static struct session *
session_slot(int64_t now)
{
	struct session *oldest_anon = NULL, *oldest = NULL;

	for (size_t i = 0; i < SESSIONS_MAX; i++) {
		struct session *e = &sessions[i];
		if (!e->live || e->expires_ms <= now)
			return e;
		if (e->s.role == AUTH_NONE &&
		    (!oldest_anon || e->used_ms < oldest_anon->used_ms))
			oldest_anon = e;
		if (!oldest || e->used_ms < oldest->used_ms)
			oldest = e;
	}
	return oldest_anon ? oldest_anon : oldest;
}

static int64_t
session_ttl(enum auth_role role)
{
	int64_t ttl = conf->session_ttl_ms;
	/* A login form left open: short.  In an open console the anonymous
	 * session is the operator's own. */
	if (role == AUTH_NONE && ttl > PRELOGIN_TTL_MS)
		ttl = PRELOGIN_TTL_MS;
	return ttl;
}

/* Adds a session of user (NULL: none) with role (lock held). */
static int
session_add(const char *user, enum auth_role role, struct auth_session *out)
{
	int64_t now = now_ms();
	struct session *e;

	memset(out, 0, sizeof(*out));
	if (random_hex(out->token, AUTH_TOKEN_LEN / 2) < 0 ||
	    random_hex(out->csrf, AUTH_TOKEN_LEN / 2) < 0)
		return -1;
	if (user)
		snprintf(out->user, sizeof(out->user), "%s", user);
	out->role = role;
	e = session_slot(now);
	*e = (struct session){
		.s = *out,
		.expires_ms = now + session_ttl(role),
		.used_ms = now,
		.live = true,
	};
	return 0;
}

int
auth_session_new(enum auth_role role, struct auth_session *out)
{
	pthread_mutex_lock(&lock);
	int rc = session_add(NULL, role, out);
	pthread_mutex_unlock(&lock);
	return rc;
}

/* The live session of token (lock held), or NULL. */
static struct session *
session_get(const char *token, int64_t now)
{
	if (strlen(token) != AUTH_TOKEN_LEN)
		return NULL;
	for (size_t i = 0; i < SESSIONS_MAX; i++) {
		struct session *e = &sessions[i];
		if (e->live && auth_equal(e->s.token, token)) {
			if (e->expires_ms > now)
				return e;
			e->live = false;
			return NULL;
		}
	}
	return NULL;
}

int
auth_session_find(const char *token, struct auth_session *out)
{
	int64_t now = now_ms();
	struct session *e;

	pthread_mutex_lock(&lock);
	if ((e = session_get(token, now))) {
		e->used_ms = now;
		e->expires_ms = now + session_ttl(e->s.role);
		*out = e->s;
	}
	pthread_mutex_unlock(&lock);
	return e ? 0 : -1;
}

void
auth_session_end(const char *token)
{
	struct session *e;

	pthread_mutex_lock(&lock);
	if ((e = session_get(token, now_ms())))
		memset(e, 0, sizeof(*e));
	pthread_mutex_unlock(&lock);
}

/* The entry of addr (lock held); a new one, replacing the least recently
 * failed, when it has none. */
static struct client *
client_get(const char *addr)
{
	struct client *oldest = NULL;

	for (size_t i = 0; i < CLIENTS_MAX; i++) {
		struct client *c = &clients[i];
		if (c->live && strcmp(c->addr, addr) == 0)
			return c;
		if (!oldest || !c->live ||
		    (oldest->live && c->last_ms < oldest->last_ms))
			oldest = c;
	}
	*oldest = (struct client){.live = true};
	snprintf(oldest->addr, sizeof(oldest->addr), "%s", addr);
	return oldest;
}

/* Seconds until ms has passed, at least 1. */
static int
seconds_until(int64_t ms, int64_t now)
{
	int64_t s = (ms - now + 999) / 1000;
	return s < 1 ? 1 : (int)s;
}

/* Whether addr may try a login now (lock held); else sets *retry_after. */
static bool
login_allowed(const char *addr, int64_t now, int *retry_after)
{
	struct client *c = client_get(addr);
	/* The oldest of the last GLOBAL_FAILURES failures. */
	int64_t oldest = global_failures[global_next];

	if (c->failures >= FAILURES_FREE && now < c->blocked_until_ms) {
		*retry_after = seconds_until(c->blocked_until_ms, now);
		return false;
	}
	if (oldest && now - oldest < GLOBAL_WINDOW_MS) {
		*retry_after = seconds_until(oldest + GLOBAL_WINDOW_MS, now);
		return false;
	}
	return true;
}

/* Counts a failure of addr (lock held). */
static void
login_failed(const char *addr, int64_t now)
{
	struct client *c = client_get(addr);

	c->failures++;
	c->last_ms = now;
	if (c->failures >= FAILURES_FREE) {
		int64_t block = BLOCK_FIRST_MS;
		for (int i = FAILURES_FREE;
		     i < c->failures && block < BLOCK_MAX_MS; i++)
			block *= 2;
		if (block > BLOCK_MAX_MS)
			block = BLOCK_MAX_MS;
		c->blocked_until_ms = now + block;
	}
	global_failures[global_next] = now;
	global_next = (global_next + 1) % GLOBAL_FAILURES;
}

static const struct web_user_conf *
find_user(const char *name)
{
	for (size_t i = 0; i < conf->nusers; i++)
		if (strcmp(conf->users[i].name, name) == 0)
			return &conf->users[i];
	return NULL;
}

enum auth_login
auth_login(const char *addr, const char *user, const char *password,
	   const char *old_token, struct auth_session *out, int *retry_after)
{
	const struct web_user_conf *u = find_user(user);
	int64_t now = now_ms();
	bool allowed;
	int ok;

	pthread_mutex_lock(&lock);
	allowed = login_allowed(addr, now, retry_after);
	pthread_mutex_unlock(&lock);
	char *name = text_safe(user, NULL, NULL);
	if (strlen(name) > 64)
		strcpy(name + 61, "...");
	if (!allowed) {
		log_warnx("web: login of user \"%s\" from %s refused: too "
			  "many failed logins, retry in %ds",
			  name, addr, *retry_after);
		free(name);
		return AUTH_LOGIN_THROTTLED;
	}
	/* Outside the lock: this is the slow part, and an unknown user's
	 * costs the same. */
	ok = auth_verify(password, u ? u->password_hash : dummy_hash) && u;

	pthread_mutex_lock(&lock);
	enum auth_login rc = AUTH_LOGIN_OK;
	if (!ok) {
		login_failed(addr, now_ms());
		rc = AUTH_LOGIN_FAILED;
	} else {
		client_get(addr)->failures = 0;
		struct session *old =
			old_token ? session_get(old_token, now) : NULL;
		if (old)
			memset(old, 0, sizeof(*old));
		if (session_add(u->name,
				u->operator? AUTH_OPERATOR : AUTH_READ_ONLY,
				out) < 0)
			rc = AUTH_LOGIN_ERROR;
	}
	pthread_mutex_unlock(&lock);
	if (rc == AUTH_LOGIN_FAILED)
		log_warnx("web: login of user \"%s\" from %s failed: %s", name,
			  addr, u ? "wrong password" : "no such user");
	else if (rc == AUTH_LOGIN_OK)
		log_info("web: user \"%s\" logged in from %s (%s)", name, addr,
			 u->operator? "operator" : "read-only");
	free(name);
	return rc;
}
