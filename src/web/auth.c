/*
 * auth: password hashes, sessions and login bounds of the web console
 * (auth.h).  Every table here is shared by the server's threads and guarded
 * by one mutex; a password is hashed outside it (yescrypt takes tens of
 * milliseconds and megabytes on purpose), so that one login does not hold
 * up the requests of others.
 */
#include "web/auth.h"

#include <crypt.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
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
 * Sessions: the table holds logged-in sessions only, SESSIONS_MAX at once
 * (a full table drops the expired, then the least recently used).  A
 * session without a user (before a login; an open console's operator) is
 * kept nowhere: its token is 64 hex digits (any such; it has no user and
 * no power but to log in, or, in an open console, what anyone local has),
 * and its CSRF token an HMAC of it under a key made at start, so that
 * anyone may make as many as they like without pushing out anybody's
 * (docs/security.md, "Sessions").
 */
#define SESSIONS_MAX 1024
/*
 * Failed logins: per client address, FAILURES_FREE of them, then each one
 * blocks the address for BLOCK_FIRST_MS, doubling up to BLOCK_MAX_MS.
 * Besides, at most USER_FAILURES in any WINDOW_MS at one user's name, and
 * GLOBAL_FAILURES from everyone, so that many addresses cannot guess
 * faster together; those two refuse only an address that has failed
 * itself, so that the people who know their password still log in while
 * someone else guesses (a lockout of everyone would be the attack).
 * CLIENTS_MAX addresses are remembered (the oldest forgotten first).
 */
#define FAILURES_FREE	5
#define BLOCK_FIRST_MS	(30 * 1000LL)
#define BLOCK_MAX_MS	(15 * 60 * 1000LL)
#define USER_FAILURES	10
#define GLOBAL_FAILURES 20
#define WINDOW_MS	(60 * 1000LL)
#define CLIENTS_MAX	4096

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
/* The times of the last failed logins, rings: everyone's, and each
 * configured user's (conf->users' order). */
struct failures {
	int64_t at[GLOBAL_FAILURES];
	size_t next;
};
_Static_assert(USER_FAILURES <= GLOBAL_FAILURES, "a ring holds either");
static struct failures global_failures, *user_failures;
/* The key of the anonymous sessions' CSRF tokens. */
static unsigned char anon_key[32];

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
	user_failures = xcalloc(web->nusers + 1, sizeof(*user_failures));
	memset(&global_failures, 0, sizeof(global_failures));
	if (getrandom(anon_key, sizeof(anon_key), 0) != sizeof(anon_key)) {
		log_error("web: getrandom");
		return -1;
	}
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
	free(user_failures);
	free(dummy_hash);
	explicit_bzero(anon_key, sizeof(anon_key));
	sessions = NULL;
	clients = NULL;
	user_failures = NULL;
	dummy_hash = NULL;
}

/* The place for a new session (lock held): a free one, else an expired
 * one, else the least recently used. */
static struct session *
session_slot(int64_t now)
{
	struct session *oldest = NULL;

	for (size_t i = 0; i < SESSIONS_MAX; i++) {
		struct session *e = &sessions[i];
		if (!e->live || e->expires_ms <= now)
			return e;
		if (!oldest || e->used_ms < oldest->used_ms)
			oldest = e;
	}
	return oldest;
}

/* Adds a logged-in session of user with role (lock held). */
static int
session_add(const char *user, enum auth_role role, struct auth_session *out)
{
	int64_t now = now_ms();
	struct session *e;

	memset(out, 0, sizeof(*out));
	if (random_hex(out->token, AUTH_TOKEN_LEN / 2) < 0 ||
	    random_hex(out->csrf, AUTH_TOKEN_LEN / 2) < 0)
		return -1;
	snprintf(out->user, sizeof(out->user), "%s", user);
	out->role = role;
	e = session_slot(now);
	*e = (struct session){
		.s = *out,
		.expires_ms = now + conf->session_ttl_ms,
		.used_ms = now,
		.live = true,
	};
	return 0;
}

static bool
is_token(const char *token)
{
	size_t n = strspn(token, "0123456789abcdef");
	return n == AUTH_TOKEN_LEN && !token[n];
}

/* An anonymous session of token: its role and its CSRF token. */
static void
anonymous(const char *token, struct auth_session *out)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int n = 0;

	memset(out, 0, sizeof(*out));
	snprintf(out->token, sizeof(out->token), "%s", token);
	if (!HMAC(EVP_sha256(), anon_key, sizeof(anon_key),
		  (const unsigned char *)token, AUTH_TOKEN_LEN, mac, &n) ||
	    n * 2 < AUTH_TOKEN_LEN)
		abort(); /* no SHA-256: nothing here can work */
	for (size_t i = 0; i < AUTH_TOKEN_LEN / 2; i++) {
		out->csrf[2 * i] = hex[mac[i] >> 4];
		out->csrf[2 * i + 1] = hex[mac[i] & 15];
	}
	out->role = conf->nusers > 0 ? AUTH_NONE : AUTH_OPERATOR;
	out->anonymous = true;
}

int
auth_session_new(struct auth_session *out)
{
	char token[AUTH_TOKEN_LEN + 1];

	if (random_hex(token, AUTH_TOKEN_LEN / 2) < 0)
		return -1;
	anonymous(token, out);
	return 0;
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
		e->expires_ms = now + conf->session_ttl_ms;
		*out = e->s;
	}
	pthread_mutex_unlock(&lock);
	if (e)
		return 0;
	/* Not a user's (any more): an anonymous session, if it is one the
	 * server may have made. */
	if (!is_token(token))
		return -1;
	anonymous(token, out);
	return 0;
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

/* Whether a ring of max failures is full within the window; *until is
 * when it is not. */
static bool
ring_full(const struct failures *f, size_t max, int64_t now, int64_t *until)
{
	/* The oldest of the last max failures. */
	int64_t oldest = f->at[f->next % max];
	*until = oldest + WINDOW_MS;
	return oldest && now < *until;
}

static void
ring_add(struct failures *f, size_t max, int64_t now)
{
	f->at[f->next % max] = now;
	f->next = (f->next + 1) % max;
}

/* Whether addr may try a login as user u (NULL: unknown) now (lock held);
 * else sets *retry_after. */
static bool
login_allowed(const char *addr, const struct web_user_conf *u, int64_t now,
	      int *retry_after)
{
	struct client *c = client_get(addr);
	int64_t until;

	if (c->failures >= FAILURES_FREE && now < c->blocked_until_ms) {
		*retry_after = seconds_until(c->blocked_until_ms, now);
		return false;
	}
	if (c->failures == 0)
		return true;
	if ((u && ring_full(&user_failures[u - conf->users], USER_FAILURES, now,
			    &until)) ||
	    ring_full(&global_failures, GLOBAL_FAILURES, now, &until)) {
		*retry_after = seconds_until(until, now);
		return false;
	}
	return true;
}

/* Counts a failure of addr, as user u (NULL: unknown) (lock held). */
static void
login_failed(const char *addr, const struct web_user_conf *u, int64_t now)
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
	ring_add(&global_failures, GLOBAL_FAILURES, now);
	if (u)
		ring_add(&user_failures[u - conf->users], USER_FAILURES, now);
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
	allowed = login_allowed(addr, u, now, retry_after);
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
		login_failed(addr, u, now_ms());
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
