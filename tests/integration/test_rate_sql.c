/*
 * Integration: the rate grammar as pgjob.parse_rate() reads it on a real
 * database (what `pgjob limits`, the console and applications set with
 * SQL), case by case from tests/fixtures/rates.txt, the table that rate.c
 * answers alike for a config file (tests/unit/test_rate.c).  Each input
 * goes as a parameter, line breaks and all.
 */
#include "testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../fixtures/rate_cases.h"

/* pgjob.parse_rate()'s message as the table names its reason. */
static const char *
why_kind(const char *msg)
{
	if (strstr(msg, "is not COUNT/PERIOD"))
		return "syntax";
	if (strstr(msg, "unknown unit"))
		return "unit";
	if (strstr(msg, "the count must be at least 1"))
		return "count";
	if (strstr(msg, "the period must be between"))
		return "range";
	return msg;
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

	char *ci = t_db_migrated("t_rate_grammar");
	PGconn *c = t_connect(ci);
	for (int i = 0; i < n; i++) {
		const struct rate_case *k = &cases[i];
		const char *params[1] = {k->input};
		PGresult *r = PQexecParams(c,
					   "select n, period_ms"
					   " from pgjob.parse_rate($1)",
					   1, NULL, params, NULL, NULL, 0);
		int ok = PQresultStatus(r) == PGRES_TUPLES_OK;
		const char *msg =
			PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
		const char *state_ = PQresultErrorField(r, PG_DIAG_SQLSTATE);

		if (k->ok && (!ok || PQntuples(r) != 1 ||
			      atoll(PQgetvalue(r, 0, 0)) != k->n ||
			      atoll(PQgetvalue(r, 0, 1)) != k->period_ms)) {
			print_error("rates.txt:%d: want %lld/%lldms, got %s "
				    "%s/%sms\n",
				    k->line, k->n, k->period_ms,
				    ok ? "" : PQerrorMessage(c),
				    ok ? PQgetvalue(r, 0, 0) : "",
				    ok ? PQgetvalue(r, 0, 1) : "");
			failed++;
		} else if (!k->ok && (ok || !msg || !state_ ||
				      strcmp(state_, "22023") != 0 ||
				      strcmp(why_kind(msg), k->why) != 0)) {
			print_error("rates.txt:%d: want error %s (22023), got "
				    "%s (%s)\n",
				    k->line, k->why,
				    ok ? "a rate" : (msg ? msg : "?"),
				    state_ ? state_ : "-");
			failed++;
		}
		PQclear(r);
	}
	PQfinish(c);
	free(ci);
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
