/* Unit tests for trace: the W3C traceparent check, which must take what
 * pgjob.trace_context() takes, and an attempt's traceparent. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "common/trace.h"

#define TP "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

static void
test_valid(void **state)
{
	assert_true(trace_valid(TP));
	assert_true(trace_valid(
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-ff"));
	static const char *const bad[] = {
		NULL,
		"",
		"01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
		"00-00000000000000000000000000000000-b7ad6b7169203331-01",
		"00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-1",
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-",
		"00-0af7651916cd43dd8448eb211c80319c_b7ad6b7169203331-01",
		"00-0af7651916cd43dd8448eb211c80319g-b7ad6b7169203331-01",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		assert_false(trace_valid(bad[i]));
}

/* The job's trace id and flags, a new span id each time. */
static void
test_attempt(void **state)
{
	char a[TRACE_LEN + 1], b[TRACE_LEN + 1];
	assert_true(trace_attempt(TP, a));
	assert_true(trace_attempt(TP, b));
	assert_true(trace_valid(a));
	assert_int_equal(memcmp(a, TP, 36), 0);
	assert_string_equal(a + 52, "-01");
	assert_memory_not_equal(a + 36, TP + 36, 16);
	assert_memory_not_equal(a + 36, b + 36, 16);
	assert_false(trace_attempt(NULL, a));
	assert_string_equal(a, "");
	assert_false(trace_attempt("garbage", a));
	assert_string_equal(a, "");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid),
		cmocka_unit_test(test_attempt),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
