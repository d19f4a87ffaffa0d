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

#include "db.h"
#include "queue.h"

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

static void
test_classify_without_result(void **state)
{
	assert_int_equal(db_classify(NULL, NULL), DB_LOST);
}

static void
test_arrays(void **state)
{
	const char *v[] = {"a", "b\"c", "d\\e", "f,g {h}"};
	char *s = queue_text_array(v, 4);
	assert_string_equal(s, "{\"a\",\"b\\\"c\",\"d\\\\e\",\"f,g {h}\"}");
	free(s);
	s = queue_text_array(v, 0);
	assert_string_equal(s, "{}");
	free(s);
	/* A NULL pointer is SQL NULL; the string "NULL" stays quoted. */
	const char *w[] = {NULL, "NULL", "x"};
	s = queue_text_array(w, 3);
	assert_string_equal(s, "{NULL,\"NULL\",\"x\"}");
	free(s);
	int64_t n[] = {1, -2, 9007199254740993LL};
	s = queue_int_array(n, 3);
	assert_string_equal(s, "{1,-2,9007199254740993}");
	free(s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_redacted_keyword_form),
		cmocka_unit_test(test_redacted_uri_form),
		cmocka_unit_test(test_redacted_edge_cases),
		cmocka_unit_test(test_redacted_every_secret),
		cmocka_unit_test(test_classify_without_result),
		cmocka_unit_test(test_arrays),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
