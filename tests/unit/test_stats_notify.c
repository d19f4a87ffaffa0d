/* Unit tests for how an instance's workers share out NOTIFYs
 * (src/common/stats.c: stats_notify_take(), stats_claim_behind(),
 * stats_notify_behind()), on the shared area the supervisor maps. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/stats.h"

/* One claim per instance for a job that comes alone; as many workers as
 * the jobs need room; a worker without room claims in any case. */
static void
test_notify_take(void **state)
{
	(void)state;
	struct stats *s = stats_create();
	assert_non_null(s);
	assert_int_equal(stats_notify_take(s, 100, 7, 1, 10), 1);
	assert_int_equal(stats_notify_take(s, 100, 7, 1, 10), 0);
	/* Another backend's notification of the same transaction id: its
	 * own key (a forged one never stands for a real one). */
	assert_int_equal(stats_notify_take(s, 100, 8, 1, 10), 1);
	/* 25 jobs, 10 places a worker: three workers. */
	assert_int_equal(stats_notify_take(s, 200, 7, 25, 10), 1);
	assert_int_equal(stats_notify_take(s, 200, 7, 25, 10), 1);
	assert_int_equal(stats_notify_take(s, 200, 7, 25, 10), 1);
	assert_int_equal(stats_notify_take(s, 200, 7, 25, 10), 0);
	assert_int_equal(stats_notify_take(s, 300, 7, 1, 0), 1);
	assert_int_equal(stats_notify_take(s, 300, 7, 1, 0), 1);
	stats_destroy(s);
}

/* A claim behind a worker's ends takes the notification of those ends
 * (its backend's) while it has room for their jobs, until the worker's
 * next ends go out without one; another backend's notification is not
 * its, nor one with more jobs than its claim may take. */
static void
test_claim_behind(void **state)
{
	(void)state;
	struct stats *s = stats_create();
	assert_non_null(s);
	assert_int_equal(stats_notify_behind(s, 4242, 1), 0);
	stats_claim_behind(s, 3, 4242, 5);
	assert_int_equal(stats_notify_behind(s, 4242, 1), 1);
	assert_int_equal(stats_notify_behind(s, 4242, 5), 1);
	assert_int_equal(stats_notify_behind(s, 4242, 6), 0);
	assert_int_equal(stats_notify_behind(s, 4243, 1), 0);
	assert_int_equal(stats_notify_behind(s, 0, 1), 0);
	/* Another worker's claim behind its own ends. */
	stats_claim_behind(s, 200, 5151, 1000);
	assert_int_equal(stats_notify_behind(s, 5151, 1000), 1);
	/* Its next ends went out without one: the notifications of 4242
	 * are everyone's again. */
	stats_claim_behind(s, 3, 0, 0);
	assert_int_equal(stats_notify_behind(s, 4242, 1), 0);
	assert_int_equal(stats_notify_behind(s, 5151, 1), 1);
	/* A worker gone (the supervisor reaped it): its claim with it. */
	stats_worker_gone(s, 200);
	assert_int_equal(stats_notify_behind(s, 5151, 1), 0);
	/* Out of range: nothing written. */
	stats_claim_behind(s, -1, 77, 1);
	stats_claim_behind(s, STATS_MAX_WORKERS, 77, 1);
	assert_int_equal(stats_notify_behind(s, 77, 1), 0);
	/* A room past 32 bits is capped, not wrapped to a small one. */
	stats_claim_behind(s, 0, 88, 1LL << 40);
	assert_int_equal(stats_notify_behind(s, 88, 4000000000LL), 1);
	stats_destroy(s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_notify_take),
		cmocka_unit_test(test_claim_behind),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
