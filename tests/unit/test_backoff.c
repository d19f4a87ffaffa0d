/* Unit tests for backoff: job retry delays, full jitter, and the cost
 * that paces a statement under a time limit. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/backoff.h"

static void
test_job_delay_doubles_and_caps(void **state)
{
	/* base 30s, max 30m: 30s, 60s, 120s, ... capped at 1800s. */
	assert_int_equal(backoff_job_delay(30000, 1800000, 1, 0), 30000);
	assert_int_equal(backoff_job_delay(30000, 1800000, 2, 0), 60000);
	assert_int_equal(backoff_job_delay(30000, 1800000, 3, 0), 120000);
	assert_int_equal(backoff_job_delay(30000, 1800000, 7, 0), 1800000);
	assert_int_equal(backoff_job_delay(30000, 1800000, 1000, 0), 1800000);
	/* Jitter takes off at most a quarter. */
	assert_int_equal(backoff_job_delay(1000, 60000, 1, 0.999), 751);
	assert_int_equal(backoff_job_delay(1000, 60000, 0, 0), 1000);
}

/* The cap holds whatever the jitter: never a delay over backoff.max. */
static void
test_job_delay_never_over_max(void **state)
{
	for (int attempt = 1; attempt < 40; attempt++)
		for (double r = 0; r < 1; r += 0.125) {
			int64_t d =
				backoff_job_delay(30000, 1800000, attempt, r);
			assert_true(d <= 1800000);
			assert_true(d >= 30000 * 3 / 4);
		}
	assert_true(backoff_job_delay(30000, 1800000, 7, 0.999) < 1800000);
}

static void
test_full_jitter(void **state)
{
	assert_int_equal(backoff_full_jitter(100, 10000, 0, 0.5), 50);
	assert_int_equal(backoff_full_jitter(100, 10000, 3, 0.5), 400);
	assert_int_equal(backoff_full_jitter(100, 10000, 60, 0.5), 5000);
	assert_int_equal(backoff_full_jitter(100, 10000, 5, 0), 0);
}

static void
test_random_range(void **state)
{
	for (int i = 0; i < 10000; i++) {
		double r = backoff_random();
		assert_true(r >= 0 && r < 1);
	}
}

static void
test_limited_cost(void **state)
{
	/* Within the limit: what it took. */
	assert_int_equal(backoff_limited_cost(40, 1000, 0), 40);
	assert_int_equal(backoff_limited_cost(1000, 1000, 0), 1000);
	/* Stopped by the server: the whole limit, whatever the round trip
	 * added (the depths read once paced a stop at 0 and ran again at
	 * its next tick). */
	assert_int_equal(backoff_limited_cost(5003, 5000, 1), 5000);
	assert_int_equal(backoff_limited_cost(30, 5000, 1), 5000);
	/* Late without a stop: the network's delay, not known. */
	assert_int_equal(backoff_limited_cost(9000, 1000, 0), -1);
}

/* One stop is an info line, the second in a row a warning, and the
 * warnings come ten minutes apart at most, however many stops. */
static void
test_stop_say(void **state)
{
	(void)state;
	assert_int_equal(backoff_stop_say(1, 0, 5000), BACKOFF_SAY_INFO);
	assert_int_equal(backoff_stop_say(1, 4000, 5000), BACKOFF_SAY_INFO);
	assert_int_equal(backoff_stop_say(2, 0, 5000), BACKOFF_SAY_WARN);
	assert_int_equal(backoff_stop_say(3, 5000, 5000 + 599999),
			 BACKOFF_SAY_NOTHING);
	assert_int_equal(backoff_stop_say(9, 5000, 5000 + 600000),
			 BACKOFF_SAY_WARN);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_job_delay_doubles_and_caps),
		cmocka_unit_test(test_job_delay_never_over_max),
		cmocka_unit_test(test_full_jitter),
		cmocka_unit_test(test_random_range),
		cmocka_unit_test(test_limited_cost),
		cmocka_unit_test(test_stop_say),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
