/* Unit tests for the worker's reading of a NOTIFY pgjob payload
 * (src/worker/notify_payload.c: notify_parse()). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "worker/notify_payload.h"

/* NOTIFY payloads of pgjob.jobs_notify(): the two numbers, the key of
 * schema 17 when it is whole, and nothing from anything else. */
static void
test_notify_parse(void **state)
{
	(void)state;
	uint64_t xid;
	long long due;
	struct notify_key k;

	assert_int_equal(notify_parse("812 3", &xid, &due, &k), 0);
	assert_true(xid == 812 && due == 3 && !k.known);
	assert_int_equal(
		notify_parse("812 3 -5 1764633600123456", &xid, &due, &k), 0);
	assert_true(k.known && k.priority == -5 &&
		    k.run_at_us == 1764633600123456LL);
	assert_int_equal(notify_parse("9 1 0 -1000000", &xid, &due, &k), 0);
	assert_true(k.known && k.priority == 0 && k.run_at_us == -1000000);
	/* A tail that is not a whole key: the numbers count, the key not. */
	static const char *const partial[] = {
		"812 3 ",      "812 3 5",    "812 3 5 ",
		"812 3 x 1",   "812 3 5 1x", "812 3 40000 1",
		"812 3 5 1 2", "812 3 - 1",  "812 3 5 1234567890123456789",
	};
	for (size_t i = 0; i < sizeof(partial) / sizeof(*partial); i++) {
		assert_int_equal(notify_parse(partial[i], &xid, &due, &k), 0);
		assert_false(k.known);
	}
	static const char *const bad[] = {"",	    "812",    "812 0", "x 3",
					  "812 3x", "812  3", NULL};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		assert_int_equal(notify_parse(bad[i], &xid, &due, &k), -1);
		assert_false(k.known);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_notify_parse),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
