/*
 * Unit tests for the web console's access (src/web/auth.c): yescrypt hashes,
 * the session table, and the bounds on failed logins, per address and for
 * everyone.  The HTTP side of the same rules: test_web_http.py.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "web/auth.h"

static char *alice_hash, *bob_hash;
static struct web_user_conf users[2];
static struct web_conf conf = {.session_ttl_ms = 3600 * 1000};

static int
setup(void **state)
{
	const char *err;

	log_init("test", LOG_ERROR, 0);
	alice_hash = auth_hash_password("alice pw", &err);
	bob_hash = auth_hash_password("bob pw", &err);
	users[0] = (struct web_user_conf){"alice", alice_hash, true, 1, 1};
	users[1] = (struct web_user_conf){"bob", bob_hash, false, 2, 1};
	conf.users = users;
	conf.nusers = 2;
	return auth_init(&conf);
}

static int
teardown(void **state)
{
	auth_shutdown();
	free(alice_hash);
	free(bob_hash);
	return 0;
}

static void
test_hashes(void **state)
{
	const char *err;
	char *again = auth_hash_password("alice pw", &err);

	assert_non_null(alice_hash);
	assert_memory_equal(alice_hash, "$y$", 3);
	/* Salted: the same password, another hash; both verify. */
	assert_string_not_equal(again, alice_hash);
	assert_true(auth_verify("alice pw", again));
	assert_true(auth_verify("alice pw", alice_hash));
	assert_false(auth_verify("alice pw ", alice_hash));
	assert_false(auth_verify("", alice_hash));
	assert_false(auth_verify("alice pw", "not a hash"));
	free(again);
	assert_true(auth_equal("abc", "abc"));
	assert_false(auth_equal("abc", "abd"));
	assert_false(auth_equal("abc", "abcd"));
}

static void
test_sessions(void **state)
{
	struct auth_session a, b, found;
	int retry = 0;

	/* Anonymous sessions: kept nowhere, their CSRF token a keyed hash of
	 * their token; as many as anyone likes. */
	assert_int_equal(auth_session_new(&a), 0);
	assert_int_equal(auth_session_new(&b), 0);
	assert_int_equal(strlen(a.token), AUTH_TOKEN_LEN);
	assert_int_equal(strlen(a.csrf), AUTH_TOKEN_LEN);
	assert_string_not_equal(a.token, b.token);
	assert_string_not_equal(a.csrf, b.csrf);
	assert_string_not_equal(a.token, a.csrf);
	assert_true(a.anonymous);
	for (int i = 0; i < 5000; i++)
		assert_int_equal(auth_session_new(&b), 0);
	assert_int_equal(auth_session_find(a.token, &found), 0);
	assert_string_equal(found.csrf, a.csrf);
	assert_int_equal(found.role, AUTH_NONE);
	assert_string_equal(found.user, "");
	/* Not a prefix, not another length, not upper case. */
	assert_int_equal(auth_session_find("", &found), -1);
	char other[AUTH_TOKEN_LEN + 1];
	memcpy(other, a.token, sizeof(other));
	other[AUTH_TOKEN_LEN - 1] = '\0';
	assert_int_equal(auth_session_find(other, &found), -1);
	memcpy(other, a.token, sizeof(other));
	other[0] = 'G';
	assert_int_equal(auth_session_find(other, &found), -1);

	/* A user's session ends with its logout; its token is then worth an
	 * anonymous session, which has no user. */
	assert_int_equal(auth_login("10.0.9.1", "alice", "alice pw", a.token,
				    &b, &retry),
			 AUTH_LOGIN_OK);
	assert_false(b.anonymous);
	assert_int_equal(auth_session_find(b.token, &found), 0);
	assert_string_equal(found.user, "alice");
	assert_string_equal(found.csrf, b.csrf);
	auth_session_end(b.token);
	assert_int_equal(auth_session_find(b.token, &found), 0);
	assert_string_equal(found.user, "");
	assert_int_equal(found.role, AUTH_NONE);
	assert_string_not_equal(found.csrf, b.csrf);
}

static void
test_login(void **state)
{
	struct auth_session pre, s, found;
	int retry = 0;

	assert_int_equal(auth_session_new(&pre), 0);
	assert_int_equal(auth_login("10.0.0.1", "alice", "alice pw", pre.token,
				    &s, &retry),
			 AUTH_LOGIN_OK);
	assert_string_equal(s.user, "alice");
	assert_int_equal(s.role, AUTH_OPERATOR);
	/* The new session has new tokens. */
	assert_string_not_equal(s.token, pre.token);
	assert_string_not_equal(s.csrf, pre.csrf);
	assert_int_equal(auth_session_find(s.token, &found), 0);
	assert_int_equal(
		auth_login("10.0.0.1", "bob", "bob pw", NULL, &s, &retry),
		AUTH_LOGIN_OK);
	assert_int_equal(s.role, AUTH_READ_ONLY);
	assert_int_equal(
		auth_login("10.0.0.1", "bob", "alice pw", NULL, &s, &retry),
		AUTH_LOGIN_FAILED);
	assert_int_equal(
		auth_login("10.0.0.1", "carol", "alice pw", NULL, &s, &retry),
		AUTH_LOGIN_FAILED);
}

/* After test_login: 2 failures counted globally, from 10.0.0.1. */
static void
test_bounds(void **state)
{
	struct auth_session s;
	int retry = 0, failures = 2;

	/* 5 free failures, then the address is blocked, even for the right
	 * password; another address is not. */
	for (int i = 0; i < 5; i++, failures++)
		assert_int_equal(auth_login("10.0.0.2", "alice", "guess", NULL,
					    &s, &retry),
				 AUTH_LOGIN_FAILED);
	assert_int_equal(
		auth_login("10.0.0.2", "alice", "alice pw", NULL, &s, &retry),
		AUTH_LOGIN_THROTTLED);
	assert_true(retry >= 1 && retry <= 30);
	assert_int_equal(
		auth_login("10.0.0.3", "alice", "alice pw", NULL, &s, &retry),
		AUTH_LOGIN_OK);
	/* A success forgets the address's failures. */
	for (int i = 0; i < 4; i++, failures++)
		assert_int_equal(auth_login("10.0.0.3", "alice", "guess", NULL,
					    &s, &retry),
				 AUTH_LOGIN_FAILED);
	char addr[32];
	/* Everyone together: 20 failures a minute, again for those that
	 * failed only; alice's name has 4 of them. */
	for (int a = 20; failures < 20; a++) {
		snprintf(addr, sizeof(addr), "10.0.1.%d", a);
		assert_int_equal(
			auth_login(addr, "carol", "guess", NULL, &s, &retry),
			AUTH_LOGIN_FAILED);
		failures++;
	}
	assert_int_equal(
		auth_login("10.0.1.20", "alice", "alice pw", NULL, &s, &retry),
		AUTH_LOGIN_THROTTLED);
	assert_int_equal(
		auth_login("10.0.2.2", "alice", "alice pw", NULL, &s, &retry),
		AUTH_LOGIN_OK);
}

/* Many addresses guessing at one name. */
static void
test_name_bound(void **state)
{
	struct auth_session s;
	int retry = 0;

	auth_shutdown();
	assert_int_equal(auth_init(&conf), 0);
	/* At one name: 10 failures a minute, for addresses that failed
	 * (the tables are new: no failure yet). */
	char addr[32];
	for (int a = 10; a < 15; a++) {
		snprintf(addr, sizeof(addr), "10.0.1.%d", a);
		for (int i = 0; i < 2; i++)
			assert_int_equal(auth_login(addr, "bob", "guess", NULL,
						    &s, &retry),
					 AUTH_LOGIN_FAILED);
	}
	assert_int_equal(
		auth_login("10.0.1.10", "bob", "bob pw", NULL, &s, &retry),
		AUTH_LOGIN_THROTTLED);
	assert_true(retry >= 1 && retry <= 60);
	/* An address that has not failed logs in. */
	assert_int_equal(
		auth_login("10.0.2.1", "bob", "bob pw", NULL, &s, &retry),
		AUTH_LOGIN_OK);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hashes),
		cmocka_unit_test(test_sessions),
		cmocka_unit_test(test_login),
		cmocka_unit_test(test_bounds),
		cmocka_unit_test(test_name_bound),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
