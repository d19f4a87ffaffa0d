/* Unit tests for db: conninfo redaction and error classification, and for
 * queue's array literals (no server needed). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/conninfo.h"
#include "common/util.h"
#include "db/db.h"
#include "db/health.h"
#include "db/internal.h"

static void
test_redacted_keyword_form(void **state)
{
	char *s = db_conninfo_redacted("host=db1,db2 dbname=app user=u "
				       "password=s3cret connect_timeout=5");
	assert_null(strstr(s, "s3cret"));
	assert_null(strstr(s, "password"));
	assert_non_null(strstr(s, "host=db1,db2"));
	assert_non_null(strstr(s, "dbname=app"));
	assert_non_null(strstr(s, "connect_timeout=5"));
	free(s);
}

static void
test_redacted_uri_form(void **state)
{
	char *s = db_conninfo_redacted(
		"postgresql://app:hunter2@db.example:6432/app?sslmode=require");
	assert_null(strstr(s, "hunter2"));
	assert_non_null(strstr(s, "host=db.example"));
	assert_non_null(strstr(s, "port=6432"));
	assert_non_null(strstr(s, "sslmode=require"));
	free(s);
}

static void
test_redacted_edge_cases(void **state)
{
	char *s = db_conninfo_redacted(NULL);
	assert_string_equal(s, "");
	free(s);
	s = db_conninfo_redacted("password='a b' host=x = =");
	/* Unparsable: say so, never echo the input. */
	assert_string_equal(s, "(unparsable conninfo)");
	free(s);
}

/* Every option libpq marks secret (dispchar "*"), not only password. */
static void
test_redacted_every_secret(void **state)
{
	char *s = db_conninfo_redacted("host=db sslmode=verify-full "
				       "sslkey=/k.pem sslpassword=k3ypass "
				       "password=s3cret user=u");
	assert_null(strstr(s, "k3ypass"));
	assert_null(strstr(s, "s3cret"));
	assert_non_null(strstr(s, "sslkey=/k.pem"));
	assert_non_null(strstr(s, "user=u"));
	free(s);
	s = db_conninfo_redacted("postgresql://u:pw1@h/app?sslpassword=k3y"
				 "&pass%77ord=pw2");
	assert_null(strstr(s, "pw1"));
	assert_null(strstr(s, "pw2"));
	assert_null(strstr(s, "k3y"));
	assert_non_null(strstr(s, "dbname=app"));
	free(s);

	/* Whatever the linked libpq calls secret is left out. */
	PQconninfoOption *all = PQconndefaults();
	assert_non_null(all);
	for (PQconninfoOption *o = all; o->keyword; o++) {
		if (!strchr(o->dispchar, '*'))
			continue;
		char in[256];
		snprintf(in, sizeof(in), "host=h %s=xyzzy", o->keyword);
		s = db_conninfo_redacted(in);
		if (strstr(s, "xyzzy"))
			fail_msg("%s is shown: %s", o->keyword, s);
		free(s);
	}
	PQconninfoFree(all);
}

/*
 * The value of option key in conninfo as libpq reads it (a new string), or
 * NULL when it is not set.
 */
static char *
option(const char *conninfo, const char *key)
{
	char *err = NULL, *val = NULL;
	PQconninfoOption *opts = PQconninfoParse(conninfo, &err);
	if (!opts)
		fail_msg("libpq cannot parse \"%s\": %s", conninfo, err);
	for (PQconninfoOption *o = opts; o->keyword; o++)
		if (strcmp(o->keyword, key) == 0 && o->val)
			val = strdup(o->val);
	PQconninfoFree(opts);
	return val;
}

/* 1 when s is made of '*' only. */
static int
all_stars(const char *s)
{
	return *s && strspn(s, "*") == strlen(s);
}

static void
test_scrub(void **state)
{
	static const char *const cases[][2] = {
		{"host=db password=s3cret user=u",
		 "host=db password=****** user=u"},
		{"password = 's3 \\'cret' host=db",
		 "password = *********** host=db"},
		{"host=db sslpassword=k\\ y sslkey=/k.pem",
		 "host=db sslpassword=**** sslkey=/k.pem"},
		{"postgresql://u:pw@db:6432/app?sslpassword=k&pass%77ord=p2"
		 "&application_name=a",
		 "postgresql://u:**@db:6432/app?sslpassword=*&pass%77ord=**"
		 "&application_name=a"},
		{"postgres://u:p@ss@db/app", "postgres://u:****@db/app"},
		{"postgresql://u@db/app?password",
		 "postgresql://u@db/app?password"},
		{"postgresql://u?x:pw@db/app?password=a?b&sslmode=off",
		 "postgresql://u?x:**@db/app?password=***&sslmode=off"},
		{"postgresql://db?application_name=a@b&password=z",
		 "postgresql://db?application_name=a@b&password=*"},
		/* libpq's user name "u?x=", then its query (found by
		 * fuzz_expand: the query's password was left as it was). */
		{"postgresql://u?x=@db?password=s3cret",
		 "postgresql://u?x=@db?password=******"},
		{"host=db user=u", "host=db user=u"},
		{"app", "app"},
		{"", ""},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *s = strdup(cases[i][0]);
		conninfo_scrub(s);
		assert_string_equal(s, cases[i][1]);
		free(s);
	}
	assert_int_equal(conninfo_scrub(NULL), 0);
}

/* libpq reads a scrubbed conninfo as the original, secrets aside. */
static void
test_scrub_as_libpq_reads(void **state)
{
	static const char *const cases[] = {
		"host=db port=5433 password='a b\\' c' dbname=app user=u",
		"  password  =  x\\ y  sslpassword='' host=h",
		"postgresql://u:%41@[::1]:5/app?host=h2&password=z&sslmode=off",
	};
	static const char *const keep[] = {"host", "port", "dbname", "user",
					   "sslmode"};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *s = strdup(cases[i]);
		conninfo_scrub(s);
		for (size_t k = 0; k < sizeof(keep) / sizeof(keep[0]); k++) {
			char *a = option(cases[i], keep[k]);
			char *b = option(s, keep[k]);
			if ((a == NULL) != (b == NULL) || (a && strcmp(a, b)))
				fail_msg("%s: %s became %s", keep[k], a, b);
			free(a);
			free(b);
		}
		char *pw = option(s, "password");
		assert_non_null(pw);
		assert_true(all_stars(pw));
		free(pw);
		free(s);
	}
}

/* Every option the linked libpq marks secret is one the scrub hides. */
static void
test_scrub_knows_libpq_secrets(void **state)
{
	PQconninfoOption *all = PQconndefaults();
	assert_non_null(all);
	for (PQconninfoOption *o = all; o->keyword; o++)
		if (strchr(o->dispchar, '*') && !conninfo_secret(o->keyword))
			fail_msg("conninfo.c does not hide %s", o->keyword);
	PQconninfoFree(all);
}

static void
test_classify_without_result(void **state)
{
	assert_int_equal(db_classify(NULL, NULL), DB_LOST);
}

static void
test_arrays(void **state)
{
	const char *v[] = {"a", "b\"c", "d\\e", "f,g {h}"};
	char *s = db_text_array(v, 4);
	assert_string_equal(s, "{\"a\",\"b\\\"c\",\"d\\\\e\",\"f,g {h}\"}");
	free(s);
	s = db_text_array(v, 0);
	assert_string_equal(s, "{}");
	free(s);
	/* A NULL pointer is SQL NULL; the string "NULL" stays quoted. */
	const char *w[] = {NULL, "NULL", "x"};
	s = db_text_array(w, 3);
	assert_string_equal(s, "{NULL,\"NULL\",\"x\"}");
	free(s);
	/* Escapes at either end, and one after another. */
	const char *e[] = {"\"", "\\\"x\\", "\"\"", ""};
	s = db_text_array(e, 4);
	assert_string_equal(s,
			    "{\"\\\"\",\"\\\\\\\"x\\\\\",\"\\\"\\\"\",\"\"}");
	free(s);
	int64_t n[] = {1, -2, 9007199254740993LL, 0, INT64_MIN, INT64_MAX};
	s = db_int_array(n, 6);
	assert_string_equal(s, "{1,-2,9007199254740993,0,"
			       "-9223372036854775808,9223372036854775807}");
	free(s);
	/* buf_append_int() writes what %lld writes. */
	struct buf b = {0};
	for (long long x = -1000; x <= 1000; x += 7) {
		char want[32];
		snprintf(want, sizeof(want), "%lld", x);
		buf_reset(&b);
		buf_append_int(&b, x);
		assert_string_equal(b.data, want);
	}
	buf_free(&b);
}

/* The literals of doctor's and the log's fixes: a gid is whatever a
 * client chose. */
static void
test_sql_literal(void **state)
{
	static const struct {
		const char *in, *want;
	} cases[] = {
		{"tx-2041", "'tx-2041'"},
		{"", "''"},
		{"it's", "'it''s'"},
		{"a\\b", "E'a\\\\b'"},
		{"gid\x1b[2J\nx'y", "E'gid\\x1b[2J\\x0ax''y'"},
		{"del\x7f", "E'del\\x7f'"},
		{"caf\xc3\xa9", "'caf\xc3\xa9'"},
		{"csi\xc2\x9b"
		 "2J",
		 "E'csi\\u009b2J'"},
		{"a\xc2\x85\xc3\xa9'", "E'a\\u0085\xc3\xa9'''"},
		{"bad\xff", "E'bad\\xff'"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *s = health_sql_literal(cases[i].in);
		assert_string_equal(s, cases[i].want);
		free(s);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_redacted_keyword_form),
		cmocka_unit_test(test_redacted_uri_form),
		cmocka_unit_test(test_redacted_edge_cases),
		cmocka_unit_test(test_redacted_every_secret),
		cmocka_unit_test(test_scrub),
		cmocka_unit_test(test_scrub_as_libpq_reads),
		cmocka_unit_test(test_scrub_knows_libpq_secrets),
		cmocka_unit_test(test_classify_without_result),
		cmocka_unit_test(test_arrays),
		cmocka_unit_test(test_sql_literal),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
