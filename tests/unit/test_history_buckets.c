/* Unit tests for history: the buckets of the wait and run histograms (the
 * same bounds as pgjob.history_bound()), the cap on distinct (queue, kind)
 * pairs a worker counts per minute, and taking what was counted for a
 * write and adding it back when the write fails. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "common/history.h"

/* Bucket k holds times up to 2^(k/2) ms: 1, 1.41, 2, 2.83, 4 ... */
static void
test_buckets(void **state)
{
	assert_int_equal(history_bucket(-5), 0);
	assert_int_equal(history_bucket(0), 0);
	assert_int_equal(history_bucket(1), 0);
	assert_int_equal(history_bucket(2), 2);
	assert_int_equal(history_bucket(3), 4); /* 2.83 < 3 <= 4 */
	assert_int_equal(history_bucket(4), 4);
	assert_int_equal(history_bucket(5), 5);
	assert_int_equal(history_bucket(256), 16);
	assert_int_equal(history_bucket(257), 17);
	assert_int_equal(history_bucket(362), 17); /* 2^8.5 = 362.04 */
	assert_int_equal(history_bucket(363), 18);
	assert_int_equal(history_bucket(1000), 20); /* 724 < 1000 <= 1024 */
	/* The last bucket is open: a day and more. */
	assert_int_equal(history_bucket(INT64_C(86400000)), 53);
	assert_int_equal(history_bucket(INT64_C(200000000)),
			 HISTORY_BUCKETS - 1);
	assert_int_equal(history_bucket(INT64_MAX), HISTORY_BUCKETS - 1);
	/* Monotonic over a wide range. */
	int prev = 0;
	for (int64_t ms = 0; ms < 5000000; ms += 997) {
		int b = history_bucket(ms);
		assert_true(b >= prev);
		prev = b;
	}
}

static void
test_text(void **state)
{
	uint32_t b[HISTORY_BUCKETS] = {0};
	char buf[HISTORY_TEXT];
	history_text(b, buf);
	assert_string_equal(buf, "{}");
	b[0] = 2;
	b[3] = 4294967295u;
	history_text(b, buf);
	assert_string_equal(buf, "{2,0,0,4294967295}");
	for (int k = 0; k < HISTORY_BUCKETS; k++)
		b[k] = 4294967295u;
	history_text(b, buf);
	assert_true(strlen(buf) < HISTORY_TEXT);
}

/* A flood of kinds: 200 named pairs, the rest in their queue's
 * "(other)"; the next minute counts afresh. */
static void
test_cap(void **state)
{
	struct history h, out;
	history_init(&h);
	char kind[32];
	for (int i = 0; i < 1000; i++) {
		snprintf(kind, sizeof(kind), "k%d", i);
		history_pair(&h, i % 2 ? "q1" : "q2", kind)->done++;
	}
	assert_int_equal(h.named, HISTORY_MAX_PAIRS);
	assert_int_equal(h.n, HISTORY_MAX_PAIRS + 2);
	struct history_pair *o1 = history_pair(&h, "q1", HISTORY_OTHER);
	struct history_pair *o2 = history_pair(&h, "q2", HISTORY_OTHER);
	assert_int_equal(o1->done + o2->done, 800);
	/* A pair counted before the cap is found again, not "(other)". */
	assert_int_equal(history_pair(&h, "q2", "k0")->done, 1);

	history_init(&out);
	assert_int_equal(history_take(&h, &out, 1), HISTORY_MAX_PAIRS + 2);
	int64_t sum = 0;
	size_t i = 0;
	struct history_pair *p;
	while ((p = history_next(&out, &i)) != NULL)
		sum += p->done;
	assert_int_equal(sum, 1000);
	/* The first take: its minute's cap still holds, and a new kind
	 * counts as "(other)". */
	assert_int_equal(h.named, HISTORY_MAX_PAIRS);
	history_pair(&h, "q1", "new")->done++;
	assert_int_equal(h.named, HISTORY_MAX_PAIRS);
	assert_int_equal(history_pair(&h, "q1", HISTORY_OTHER)->done, 1);
	history_free(&out);
	/* The minute changed: the pairs went, and a new kind is named
	 * again. */
	history_init(&out);
	history_take(&h, &out, 2);
	assert_int_equal(out.minute, 1);
	assert_int_equal(h.n, 0);
	history_pair(&h, "q1", "new")->done++;
	assert_int_equal(h.named, 1);
	history_free(&out);
	history_free(&h);
}

/* A failed write's counts come back; nothing counted: nothing taken. */
static void
test_take_and_add_back(void **state)
{
	struct history h, out, none;
	history_init(&h);
	history_take(&h, &(struct history){0}, 7); /* the minute is 7 */
	struct history_pair *p = history_pair(&h, "q", "k");
	p->failed = 2;
	p->retried = 1;
	history_wait(p, 3);
	history_run(p, 300);
	history_init(&out);
	assert_int_equal(history_take(&h, &out, 7), 1);
	/* Same minute: the pair stays, zeroed. */
	assert_int_equal(h.n, 1);
	assert_false(history_pair_used(history_pair(&h, "q", "k")));
	history_init(&none);
	assert_int_equal(history_take(&h, &none, 7), 0);
	history_add_back(&h, &out);
	p = history_pair(&h, "q", "k");
	assert_int_equal(p->failed, 2);
	assert_int_equal(p->retried, 1);
	assert_int_equal(p->wait[history_bucket(3)], 1);
	assert_int_equal(p->run[history_bucket(300)], 1);
	assert_int_equal(p->nrun, 1);
	history_free(&none);
	history_free(&out);
	history_free(&h);
}

/*
 * The pairs taken go to the minute their cap was counted in: the first
 * take after a minute began carries what was named before it, under the
 * old minute's cap, and stamps it with that minute; what is named after
 * it counts afresh, in the new one.  Stamped with the minute of the write,
 * both went to the new minute: up to twice the cap's named pairs in one
 * minute from one worker (test_history's flood of kinds saw 240).
 */
static void
test_take_stamps_the_counted_minute(void **state)
{
	(void)state;
	struct history h, out;
	history_init(&h);
	history_init(&out);
	history_pair(&h, "q", "a")->done = 1;
	assert_int_equal(history_take(&h, &out, 7), 1);
	assert_int_equal(out.minute, 7); /* the first take: its own */
	history_free(&out);
	for (int i = 0; i < HISTORY_MAX_PAIRS + 10; i++) {
		char k[16];
		snprintf(k, sizeof(k), "k%d", i);
		history_pair(&h, "q", k)->done = 1;
	}
	/* Minute 8 began before this take: the pairs are minute 7's, "a"
	 * (named before the first take, counted nothing since) among the
	 * cap's: 199 named in this take, and over the two takes of minute
	 * 7, 200. */
	history_init(&out);
	history_take(&h, &out, 8);
	assert_int_equal(out.minute, 7);
	assert_int_equal(out.named, HISTORY_MAX_PAIRS - 1);
	assert_int_equal(out.n, HISTORY_MAX_PAIRS); /* and one "(other)" */
	history_free(&out);
	/* Named afresh after it, in minute 8. */
	history_pair(&h, "q", "z")->done = 1;
	assert_int_equal(h.named, 1);
	history_init(&out);
	assert_int_equal(history_take(&h, &out, 8), 1);
	assert_int_equal(out.minute, 8);
	history_free(&out);
	history_free(&h);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_buckets),
		cmocka_unit_test(test_text),
		cmocka_unit_test(test_cap),
		cmocka_unit_test(test_take_and_add_back),
		cmocka_unit_test(test_take_stamps_the_counted_minute),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
