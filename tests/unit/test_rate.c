/*
 * Unit: the rate grammar as rate.c reads it (a config file's rate: and
 * rate_per_key:), case by case from tests/fixtures/rates.txt, the table
 * that pgjob.parse_rate() answers alike (tests/integration/test_rate_sql.c).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../fixtures/rate_cases.h"
#include "common/rate.h"

/* rate_parse()'s reason as the table names it. */
static const char *
why_kind(const char *why)
{
	if (!strncmp(why, "not COUNT/PERIOD", 16))
		return "syntax";
	if (!strncmp(why, "unknown unit", 12))
		return "unit";
	if (!strncmp(why, "the count must be", 17))
		return "count";
	if (!strcmp(why, "the period is out of range"))
		return "range";
	return why;
}

static void
test_rate_cases(void **state)
{
	static struct rate_case cases[512];
	const char *dir = getenv("PGJOBD_FIXTURES");
	char path[4096];
	int bad, failed = 0;

	assert_non_null(dir);
	snprintf(path, sizeof(path), "%s/rates.txt", dir);
	int n = rate_cases_read(path, cases, 512, &bad);
	if (n < 0)
		fail_msg("%s: cannot read line %d", path, bad);
	assert_true(n >= 50);
	for (int i = 0; i < n; i++) {
		const struct rate_case *c = &cases[i];
		struct rate r = {0};
		const char *why = NULL;
		int rc = rate_parse(c->input, &r, &why);

		if (c->ok &&
		    (rc != 0 || r.n != c->n || r.period_ms != c->period_ms)) {
			print_error("rates.txt:%d: want %lld/%lldms, got %s "
				    "%d/%lldms\n",
				    c->line, c->n, c->period_ms, rc ? why : "",
				    r.n, (long long)r.period_ms);
			failed++;
		} else if (!c->ok &&
			   (rc == 0 || strcmp(why_kind(why), c->why) != 0)) {
			print_error("rates.txt:%d: want error %s, got %s\n",
				    c->line, c->why, rc ? why : "a rate");
			failed++;
		}
	}
	assert_int_equal(failed, 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rate_cases),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
