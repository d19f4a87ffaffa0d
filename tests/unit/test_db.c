/* Unit tests for db: conninfo redaction and error classification, and for
 * queue's array literals (no server needed). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

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
		cmocka_unit_test(test_classify_without_result),
		cmocka_unit_test(test_arrays),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
