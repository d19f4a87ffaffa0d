/*
 * Unit tests for cron: parse errors with their exact text, next-tick tables
 * in UTC and in zones with daylight saving time both ways, and a comparison
 * with the C library's own reading of tzdata around every change of offset
 * in a set of awkward zones.  test_tz.c tests the zone reader on its own.
 *
 * Needs tzdata (/usr/share/zoneinfo), as pgjobd does to use time zones.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/cron.h"

/* "2025-03-30T01:00:00Z" as Unix seconds, by the C library. */
static int64_t
at(const char *iso)
{
	struct tm tm = {0};

	assert_int_equal(sscanf(iso, "%d-%d-%dT%d:%d:%dZ", &tm.tm_year,
				&tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
				&tm.tm_min, &tm.tm_sec),
			 6);
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	return (int64_t)timegm(&tm);
}

static struct cron *
parse_ok(const char *expr)
{
	char *err = NULL;
	struct cron *c = cron_parse(expr, &err);

	if (!c)
		fail_msg("\"%s\" did not parse: %s", expr, err);
	assert_null(err);
	return c;
}

/* ---- parsing ---- */

struct bad {
	const char *expr, *err;
};

static const struct bad bad_exprs[] = {
	/* Field count. */
	{"", "expected 5 fields, got 0"},
	{"   \t ", "expected 5 fields, got 0"},
	{"* * * *", "expected 5 fields, got 4"},
	{"0 3 * * * *", "expected 5 fields, got 6"},
	{"0 0 3 * * * 2025", "expected 5 fields, got 7"},
	/* Out of range, in each field. */
	{"61 * * * *", "minute: 61 is out of range 0-59"},
	{"60 * * * *", "minute: 60 is out of range 0-59"},
	{"* 24 * * *", "hour: 24 is out of range 0-23"},
	{"* * 0 * *", "day-of-month: 0 is out of range 1-31"},
	{"* * 32 * *", "day-of-month: 32 is out of range 1-31"},
	{"* * * 0 *", "month: 0 is out of range 1-12"},
	{"* * * 13 *", "month: 13 is out of range 1-12"},
	{"* * * * 8", "day-of-week: 8 is out of range 0-7"},
	{"0-60 * * * *", "minute: 60 is out of range 0-59"},
	{"1,2,99 * * * *", "minute: 99 is out of range 0-59"},
	{"99999999999999999999 * * * *",
	 "minute: 99999999999999999999 is out of range 0-59"},
	/* Not numbers, or not names. */
	{"x * * * *", "minute: \"x\" is not a number"},
	{"* -1 * * *", "hour: missing a value in \"-1\""},
	{"5x * * * *", "minute: \"5x\" is not a number"},
	{"* * * * 1.5", "day-of-week: \"1.5\" is not a number or a day name"},
	{"jan * * * *", "minute: \"jan\" is not a number"},
	{"* * mon * *", "day-of-month: \"mon\" is not a number"},
	{"* * * foo *", "month: \"foo\" is not a number or a month name"},
	{"* * * january *",
	 "month: \"january\" is not a number or a month name"},
	{"* * * * sun-fro", "day-of-week: \"fro\" is not a number or a day "
			    "name"},
	{"* * * mon *", "month: \"mon\" is not a number or a month name"},
	{"* * * * jan", "day-of-week: \"jan\" is not a number or a day name"},
	{"? * * * *", "minute: \"?\" is not a number"},
	{"* * L * *", "day-of-month: \"L\" is not a number"},
	{"* * * * 5#3", "day-of-week: \"5#3\" is not a number or a day name"},
	{"*-5 * * * *", "minute: \"*\" is not a number"},
	/* Empty items and missing values. */
	{"1,,2 * * * *", "minute: missing a value in \"1,,2\""},
	{"1, * * * *", "minute: missing a value in \"1,\""},
	{",1 * * * *", "minute: missing a value in \",1\""},
	{"1- * * * *", "minute: missing a value in \"1-\""},
	{"-5 * * * *", "minute: missing a value in \"-5\""},
	{"*/ * * * *", "minute: missing a value in \"*/\""},
	{"/5 * * * *", "minute: missing a value in \"/5\""},
	/* Ranges and steps. */
	{"30-10 * * * *", "minute: range 30-10 ends before it starts"},
	{"* * * dec-jan *", "month: range dec-jan ends before it starts"},
	{"* * * * 6-1", "day-of-week: range 6-1 ends before it starts"},
	{"1-2-3 * * * *", "minute: \"2-3\" is not a number"},
	{"*/0 * * * *", "minute: step 0 is out of range 1-59"},
	{"*/60 * * * *", "minute: step 60 is out of range 1-59"},
	{"* */24 * * *", "hour: step 24 is out of range 1-23"},
	{"* * */31 * *", "day-of-month: step 31 is out of range 1-30"},
	{"* * * */12 *", "month: step 12 is out of range 1-11"},
	{"* * * * */7", "day-of-week: step 7 is out of range 1-6"},
	{"*/x * * * *", "minute: step \"x\" is not a number"},
	{"1/2/3 * * * *", "minute: step \"2/3\" is not a number"},
	{"*/-1 * * * *", "minute: step \"-1\" is not a number"},
	{"0-10/0 * * * *", "minute: step 0 is out of range 1-59"},
	/* The first error wins, field by field. */
	{"99 99 * * *", "minute: 99 is out of range 0-59"},
	{"0 99 0 * *", "hour: 99 is out of range 0-23"},
	/* Dates that never exist, when the day of week cannot help. */
	{"0 0 31 2 *", "day-of-month: no such day in the months given"},
	{"0 0 30 feb *", "day-of-month: no such day in the months given"},
	{"0 0 31 4,6,9,11 *", "day-of-month: no such day in the months given"},
	{"0 0 30,31 2 */2", "day-of-month: no such day in the months given"},
	/* Shortcuts. */
	{"@reboot", "unknown shortcut \"@reboot\" (use @yearly, @annually, "
		    "@monthly, @weekly, @daily, @midnight or @hourly)"},
	{"@", "unknown shortcut \"@\" (use @yearly, @annually, @monthly, "
	      "@weekly, @daily, @midnight or @hourly)"},
	{"@dailyx", "unknown shortcut \"@dailyx\" (use @yearly, @annually, "
		    "@monthly, @weekly, @daily, @midnight or @hourly)"},
	{"@daily 0", "expected nothing after @daily"},
	{"@hourly *", "expected nothing after @hourly"},
	{"0 @daily * * *", "hour: \"@daily\" is not a number"},
};

static void
test_parse_errors(void **state)
{
	for (size_t i = 0; i < sizeof(bad_exprs) / sizeof(bad_exprs[0]); i++) {
		const struct bad *b = &bad_exprs[i];
		char *err = NULL;
		struct cron *c = cron_parse(b->expr, &err);

		if (c)
			fail_msg("\"%s\" parsed", b->expr);
		assert_non_null(err);
		if (strcmp(err, b->err))
			fail_msg("\"%s\"\n got: %s\nwant: %s", b->expr, err,
				 b->err);
		free(err);
	}
}

/* Valid spellings, including the ones that are easy to get wrong. */
static void
test_parse_ok(void **state)
{
	static const char *const good[] = {
		"* * * * *",
		"  0   3\t* *  *  ",
		"0 3 * * *\n",
		"0,15,30,45 * * * *",
		"0-59/15 0-23 1-31 1-12 0-7",
		"5/15 * * * *",
		"0 0 1 JAN,Feb,mAr *",
		"0 0 * * MON-FRI",
		"0 0 * * fri-sun",
		"0 0 * * 7",
		"0 0 * * 0,7",
		"0 0 * jan-dec/3 sun-sat/2",
		"59 23 31 12 6",
		"@yearly",
		"@annually",
		"@monthly",
		"@weekly",
		"@daily",
		"@midnight",
		"@hourly",
		"  @DAILY  ",
	};

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		cron_free(parse_ok(good[i]));
	cron_free(NULL);
}

/* ---- next ticks ---- */

/*
 * From "from", the successive ticks of expr in tz, separated by spaces;
 * "none": no next one.
 */
struct chain {
	const char *expr, *tz, *from, *ticks;
};

static void
run_chains(const struct chain *t, size_t n)
{
	char got[CRON_TIME_LEN], want[CRON_TIME_LEN];

	for (size_t i = 0; i < n; i++) {
		struct cron *c = parse_ok(t[i].expr);
		int64_t from = at(t[i].from), next;
		const char *w = t[i].ticks;
		int len, rc = 0;

		for (size_t k = 0;
		     rc == 0 && sscanf(w, "%31s%n", want, &len) == 1;
		     k++, w += len) {
			rc = cron_next(c, t[i].tz, from, &next);
			if (rc == 0)
				cron_format_utc(next, got);
			else
				strcpy(got, "none");
			if (strcmp(got, want))
				fail_msg("\"%s\" in %s after %s: tick %zu is "
					 "%s, want %s",
					 t[i].expr, t[i].tz ? t[i].tz : "NULL",
					 t[i].from, k, got, want);
			from = next;
		}
		cron_free(c);
	}
}

static const struct chain utc_chains[] = {
	/* Every minute: strictly after, from a whole minute or within one. */
	{"* * * * *", NULL, "2025-01-01T00:00:00Z",
	 "2025-01-01T00:01:00Z 2025-01-01T00:02:00Z 2025-01-01T00:03:00Z"},
	{"* * * * *", NULL, "2025-01-01T00:00:30Z", "2025-01-01T00:01:00Z"},
	{"* * * * *", NULL, "2025-01-01T00:00:59Z", "2025-01-01T00:01:00Z"},
	{"* * * * *", NULL, "2024-12-31T23:59:00Z",
	 "2025-01-01T00:00:00Z 2025-01-01T00:01:00Z"},
	/* Steps. */
	{"*/15 * * * *", NULL, "2025-01-01T00:00:00Z",
	 "2025-01-01T00:15:00Z 2025-01-01T00:30:00Z 2025-01-01T00:45:00Z "
	 "2025-01-01T01:00:00Z"},
	{"*/15 * * * *", NULL, "2025-01-01T23:50:00Z", "2025-01-02T00:00:00Z"},
	{"5/20 * * * *", NULL, "2025-01-01T00:00:00Z",
	 "2025-01-01T00:05:00Z 2025-01-01T00:25:00Z 2025-01-01T00:45:00Z "
	 "2025-01-01T01:05:00Z"},
	{"1-30/10 */6 * * *", NULL, "2025-01-01T00:00:00Z",
	 "2025-01-01T00:01:00Z 2025-01-01T00:11:00Z 2025-01-01T00:21:00Z "
	 "2025-01-01T06:01:00Z"},
	/* Daily at 03:00. */
	{"0 3 * * *", NULL, "2025-01-01T00:00:00Z",
	 "2025-01-01T03:00:00Z 2025-01-02T03:00:00Z 2025-01-03T03:00:00Z"},
	{"0 3 * * *", NULL, "2025-01-01T02:59:59Z", "2025-01-01T03:00:00Z"},
	{"0 3 * * *", NULL, "2025-01-01T03:00:00Z", "2025-01-02T03:00:00Z"},
	/* Weekdays 1-5, from a Friday after the tick. */
	{"0 9 * * 1-5", NULL, "2025-01-03T10:00:00Z",
	 "2025-01-06T09:00:00Z 2025-01-07T09:00:00Z 2025-01-08T09:00:00Z "
	 "2025-01-09T09:00:00Z 2025-01-10T09:00:00Z 2025-01-13T09:00:00Z"},
	{"0 9 * * mon-fri", NULL, "2025-01-03T10:00:00Z",
	 "2025-01-06T09:00:00Z 2025-01-07T09:00:00Z"},
	/* Weekends, with 7 and a range that ends on Sunday. */
	{"0 0 * * 6,7", NULL, "2025-01-01T00:00:00Z",
	 "2025-01-04T00:00:00Z 2025-01-05T00:00:00Z 2025-01-11T00:00:00Z"},
	{"0 0 * * fri-sun", NULL, "2025-01-01T00:00:00Z",
	 "2025-01-03T00:00:00Z 2025-01-04T00:00:00Z 2025-01-05T00:00:00Z "
	 "2025-01-10T00:00:00Z"},
	{"0 0 * * 0", NULL, "2025-01-01T00:00:00Z", "2025-01-05T00:00:00Z"},
	/* Both days restricted: the 13th OR a Friday. */
	{"0 0 13 * 5", NULL, "2025-06-01T00:00:00Z",
	 "2025-06-06T00:00:00Z 2025-06-13T00:00:00Z 2025-06-20T00:00:00Z "
	 "2025-06-27T00:00:00Z 2025-07-04T00:00:00Z 2025-07-11T00:00:00Z "
	 "2025-07-13T00:00:00Z 2025-07-18T00:00:00Z"},
	{"0 0 1 * mon", NULL, "2025-09-01T00:00:00Z",
	 "2025-09-08T00:00:00Z 2025-09-15T00:00:00Z 2025-09-22T00:00:00Z "
	 "2025-09-29T00:00:00Z 2025-10-01T00:00:00Z 2025-10-06T00:00:00Z"},
	/* One of them *: only the other counts. */
	{"0 0 13 * *", NULL, "2025-06-01T00:00:00Z",
	 "2025-06-13T00:00:00Z 2025-07-13T00:00:00Z"},
	{"0 0 * * 5", NULL, "2025-06-01T00:00:00Z",
	 "2025-06-06T00:00:00Z 2025-06-13T00:00:00Z"},
	/* A stepped * counts as * (Vixie): odd days that are Fridays. */
	{"0 0 */2 * 5", NULL, "2025-06-01T00:00:00Z",
	 "2025-06-13T00:00:00Z 2025-06-27T00:00:00Z 2025-07-11T00:00:00Z "
	 "2025-07-25T00:00:00Z"},
	/* February 29th, leap years only, 2100 not one. */
	{"0 0 29 2 *", NULL, "2025-01-01T00:00:00Z",
	 "2028-02-29T00:00:00Z 2032-02-29T00:00:00Z 2036-02-29T00:00:00Z"},
	{"0 0 29 2 *", NULL, "2095-06-01T00:00:00Z",
	 "2096-02-29T00:00:00Z none"},
	{"0 0 29 2 *", NULL, "2024-02-29T00:00:00Z", "2028-02-29T00:00:00Z"},
	/* Dates that exist in some months only; with a weekday, either. */
	{"0 0 31 2,3 *", NULL, "2025-01-01T00:00:00Z",
	 "2025-03-31T00:00:00Z 2026-03-31T00:00:00Z"},
	{"0 0 31 2 mon", NULL, "2025-01-01T00:00:00Z",
	 "2025-02-03T00:00:00Z 2025-02-10T00:00:00Z"},
	/* Not within the five years: Feb 29 on a Saturday or Sunday. */
	{"0 0 29 2 */6", NULL, "2028-01-01T00:00:00Z",
	 "2032-02-29T00:00:00Z none"},
	/* Months by name; the 31st skips short months. */
	{"0 12 * jan,jul *", NULL, "2025-01-31T12:00:00Z",
	 "2025-07-01T12:00:00Z 2025-07-02T12:00:00Z"},
	{"0 0 1 JAN-MAR/2 *", NULL, "2025-01-01T00:00:00Z",
	 "2025-03-01T00:00:00Z 2026-01-01T00:00:00Z"},
	{"0 0 31 * *", NULL, "2025-01-31T00:00:00Z",
	 "2025-03-31T00:00:00Z 2025-05-31T00:00:00Z 2025-07-31T00:00:00Z "
	 "2025-08-31T00:00:00Z 2025-10-31T00:00:00Z 2025-12-31T00:00:00Z "
	 "2026-01-31T00:00:00Z"},
	/* Shortcuts. */
	{"@hourly", NULL, "2025-01-01T10:30:00Z",
	 "2025-01-01T11:00:00Z 2025-01-01T12:00:00Z"},
	{"@daily", NULL, "2025-12-31T00:00:00Z",
	 "2026-01-01T00:00:00Z 2026-01-02T00:00:00Z"},
	{"@midnight", NULL, "2025-12-31T00:00:00Z", "2026-01-01T00:00:00Z"},
	{"@weekly", NULL, "2025-01-01T00:00:00Z",
	 "2025-01-05T00:00:00Z 2025-01-12T00:00:00Z"},
	{"@monthly", NULL, "2025-01-15T00:00:00Z",
	 "2025-02-01T00:00:00Z 2025-03-01T00:00:00Z"},
	{"@yearly", NULL, "2025-06-01T00:00:00Z",
	 "2026-01-01T00:00:00Z 2027-01-01T00:00:00Z"},
	{"@annually", NULL, "2025-06-01T00:00:00Z", "2026-01-01T00:00:00Z"},
	/* Year rollover. */
	{"59 23 31 12 *", NULL, "2025-12-31T23:59:00Z",
	 "2026-12-31T23:59:00Z 2027-12-31T23:59:00Z"},
	{"0 0 1 1 *", NULL, "2025-12-31T23:59:59Z", "2026-01-01T00:00:00Z"},
	{"*/10 * * * *", NULL, "2025-12-31T23:55:00Z", "2026-01-01T00:00:00Z"},
	/* "UTC" is UTC, without tzdata. */
	{"0 3 * * *", "UTC", "2025-07-01T00:00:00Z", "2025-07-01T03:00:00Z"},
	/* Far from 1970 both ways. */
	{"0 0 1 1 *", NULL, "1969-06-01T00:00:00Z", "1970-01-01T00:00:00Z"},
	{"0 0 29 2 *", NULL, "1900-01-01T00:00:00Z", "1904-02-29T00:00:00Z"},
	{"0 0 29 2 *", NULL, "2399-01-01T00:00:00Z", "2400-02-29T00:00:00Z"},
	{"@yearly", NULL, "9998-06-01T00:00:00Z", "9999-01-01T00:00:00Z"},
};

static void
test_next_utc(void **state)
{
	run_chains(utc_chains, sizeof(utc_chains) / sizeof(utc_chains[0]));
}

/*
 * Europe/Berlin: 2025-03-30 02:00 CET -> 03:00 CEST (01:00Z), 2025-10-26
 * 03:00 CEST -> 02:00 CET (01:00Z).  America/New_York: 2025-03-09 02:00 EST
 * -> 03:00 EDT (07:00Z), 2025-11-02 02:00 EDT -> 01:00 EST (06:00Z).
 */
static const struct chain zone_chains[] = {
	/* Fixed-time in the spring gap: at its end, once. */
	{"30 2 * * *", "Europe/Berlin", "2025-03-28T00:00:00Z",
	 "2025-03-28T01:30:00Z 2025-03-29T01:30:00Z 2025-03-30T01:00:00Z "
	 "2025-03-31T00:30:00Z"},
	{"0 2 * * *", "Europe/Berlin", "2025-03-29T12:00:00Z",
	 "2025-03-30T01:00:00Z 2025-03-31T00:00:00Z"},
	{"0,30 2 * * *", "Europe/Berlin", "2025-03-30T00:00:00Z",
	 "2025-03-30T01:00:00Z 2025-03-31T00:00:00Z 2025-03-31T00:30:00Z"},
	{"30 2 * * *", "Europe/Berlin", "2025-03-30T01:00:00Z",
	 "2025-03-31T00:30:00Z"},
	/* 03:00 exists on both days. */
	{"0 3 * * *", "Europe/Berlin", "2025-03-29T12:00:00Z",
	 "2025-03-30T01:00:00Z 2025-03-31T01:00:00Z"},
	{"0 3 * * *", "Europe/Berlin", "2025-10-25T12:00:00Z",
	 "2025-10-26T02:00:00Z 2025-10-27T02:00:00Z"},
	/* Periodic in the spring gap: nothing there. */
	{"*/30 * * * *", "Europe/Berlin", "2025-03-30T00:00:00Z",
	 "2025-03-30T00:30:00Z 2025-03-30T01:00:00Z 2025-03-30T01:30:00Z"},
	{"* 2 * * *", "Europe/Berlin", "2025-03-30T00:58:00Z",
	 "2025-03-31T00:00:00Z 2025-03-31T00:01:00Z"},
	{"* 1 * * *", "Europe/Berlin", "2025-03-30T00:58:00Z",
	 "2025-03-30T00:59:00Z 2025-03-30T23:00:00Z"},
	/* Fixed-time in the autumn repeat: the first pass only. */
	{"30 2 * * *", "Europe/Berlin", "2025-10-24T00:00:00Z",
	 "2025-10-24T00:30:00Z 2025-10-25T00:30:00Z 2025-10-26T00:30:00Z "
	 "2025-10-27T01:30:00Z"},
	{"30 2 * * *", "Europe/Berlin", "2025-10-26T01:10:00Z",
	 "2025-10-27T01:30:00Z"},
	{"0-59/20 2 * * *", "Europe/Berlin", "2025-10-26T00:00:00Z",
	 "2025-10-26T00:20:00Z 2025-10-26T00:40:00Z 2025-10-27T01:00:00Z"},
	/* Periodic in the autumn repeat: both passes, by the clock. */
	{"*/30 * * * *", "Europe/Berlin", "2025-10-26T00:00:00Z",
	 "2025-10-26T00:30:00Z 2025-10-26T01:00:00Z 2025-10-26T01:30:00Z "
	 "2025-10-26T02:00:00Z"},
	{"0 * * * *", "Europe/Berlin", "2025-10-25T23:00:00Z",
	 "2025-10-26T00:00:00Z 2025-10-26T01:00:00Z 2025-10-26T02:00:00Z"},
	{"* 2 * * *", "Europe/Berlin", "2025-10-26T00:58:00Z",
	 "2025-10-26T00:59:00Z 2025-10-26T01:00:00Z 2025-10-26T01:01:00Z"},
	{"@hourly", "Europe/Berlin", "2025-10-26T00:30:00Z",
	 "2025-10-26T01:00:00Z 2025-10-26T02:00:00Z"},
	/* Midnight moves with the offset. */
	{"@daily", "Europe/Berlin", "2025-03-28T12:00:00Z",
	 "2025-03-28T23:00:00Z 2025-03-29T23:00:00Z 2025-03-30T22:00:00Z"},
	/* The same after 2037, from the POSIX rule in the file's footer. */
	{"30 2 * * *", "Europe/Berlin", "2040-03-24T00:00:00Z",
	 "2040-03-24T01:30:00Z 2040-03-25T01:00:00Z 2040-03-26T00:30:00Z"},
	{"30 2 * * *", "Europe/Berlin", "2040-10-27T00:00:00Z",
	 "2040-10-27T00:30:00Z 2040-10-28T00:30:00Z 2040-10-29T01:30:00Z"},
	/* New York: the repeat is 01:00-01:59, the gap 02:00-02:59. */
	{"30 1 * * *", "America/New_York", "2025-11-01T12:00:00Z",
	 "2025-11-02T05:30:00Z 2025-11-03T06:30:00Z"},
	{"30 2 * * *", "America/New_York", "2025-03-08T12:00:00Z",
	 "2025-03-09T07:00:00Z 2025-03-10T06:30:00Z"},
	{"*/20 * * * *", "America/New_York", "2025-11-02T05:40:00Z",
	 "2025-11-02T06:00:00Z 2025-11-02T06:20:00Z"},
	{"*/20 * * * *", "America/New_York", "2025-03-09T06:40:00Z",
	 "2025-03-09T07:00:00Z 2025-03-09T07:20:00Z"},
	{"0 0 * * *", "America/New_York", "2025-01-01T00:00:00Z",
	 "2025-01-01T05:00:00Z 2025-01-02T05:00:00Z"},
	{"0 9 * * 1-5", "America/New_York", "2025-03-07T15:00:00Z",
	 "2025-03-10T13:00:00Z 2025-03-11T13:00:00Z"},
	{"30 2 * * *", "America/New_York", "2045-03-11T12:00:00Z",
	 "2045-03-12T07:00:00Z 2045-03-13T06:30:00Z"},
	{"30 1 * * *", "America/New_York", "2045-11-04T12:00:00Z",
	 "2045-11-05T05:30:00Z 2045-11-06T06:30:00Z"},
	/* Sydney: summer time ends in April, starts in October. */
	{"30 2 * * *", "Australia/Sydney", "2025-04-04T12:00:00Z",
	 "2025-04-04T15:30:00Z 2025-04-05T15:30:00Z 2025-04-06T16:30:00Z"},
	{"30 2 * * *", "Australia/Sydney", "2025-10-03T12:00:00Z",
	 "2025-10-03T16:30:00Z 2025-10-04T16:00:00Z 2025-10-05T15:30:00Z"},
	/* Lord Howe moves by half an hour. */
	{"15 2 * * *", "Australia/Lord_Howe", "2025-10-03T12:00:00Z",
	 "2025-10-03T15:45:00Z 2025-10-04T15:30:00Z 2025-10-05T15:15:00Z"},
	{"45 1 * * *", "Australia/Lord_Howe", "2025-04-04T12:00:00Z",
	 "2025-04-04T14:45:00Z 2025-04-05T14:45:00Z 2025-04-06T15:15:00Z"},
	/* Fixed offsets, with and without a past of summer times. */
	{"0 9 * * *", "Asia/Kolkata", "2025-01-01T00:00:00Z",
	 "2025-01-01T03:30:00Z 2025-01-02T03:30:00Z"},
	{"0 12 * * *", "America/Sao_Paulo", "2025-01-01T00:00:00Z",
	 "2025-01-01T15:00:00Z 2025-01-02T15:00:00Z"},
	{"0 0 1 * *", "Etc/GMT-14", "2025-01-01T00:00:00Z",
	 "2025-01-31T10:00:00Z 2025-02-28T10:00:00Z"},
	/* An unknown zone: no tick. */
	{"* * * * *", "Mars/Olympus_Mons", "2025-01-01T00:00:00Z", "none"},
	{"* * * * *", "../../etc/passwd", "2025-01-01T00:00:00Z", "none"},
};

static void
test_next_zones(void **state)
{
	run_chains(zone_chains, sizeof(zone_chains) / sizeof(zone_chains[0]));
}

/* Times out of range, and the five-year horizon exactly. */
static void
test_next_limits(void **state)
{
	struct cron *c = parse_ok("* * * * *");
	struct cron *feb29 = parse_ok("0 0 29 2 *");
	int64_t next;

	assert_int_equal(
		cron_next(c, NULL, at("9999-12-31T23:59:59Z") + 1, &next), -1);
	assert_int_equal(cron_next(c, NULL, INT64_MAX, &next), -1);
	assert_int_equal(cron_next(c, NULL, INT64_MIN, &next), -1);
	assert_int_equal(
		cron_next(c, NULL, at("0001-01-01T00:00:00Z") - 1, &next), -1);
	assert_int_equal(cron_next(c, NULL, at("0001-01-01T00:00:00Z"), &next),
			 0);
	assert_int_equal(next, at("0001-01-01T00:01:00Z"));
	/* 2096-02-29 to 2104-02-29: eight years. */
	assert_int_equal(
		cron_next(feb29, NULL, at("2096-02-29T00:00:00Z"), &next), -1);
	/* A tick exactly at the horizon is found; one second further, not. */
	assert_int_equal(
		cron_next(feb29, NULL,
			  at("2104-02-29T00:00:00Z") - CRON_HORIZON_SECONDS,
			  &next),
		0);
	assert_int_equal(next, at("2104-02-29T00:00:00Z"));
	assert_int_equal(
		cron_next(feb29, NULL,
			  at("2104-02-29T00:00:00Z") - CRON_HORIZON_SECONDS - 1,
			  &next),
		-1);
	cron_free(c);
	cron_free(feb29);
}

static void
test_format_utc(void **state)
{
	static const struct {
		int64_t t;
		const char *s;
	} cases[] = {
		{0, "1970-01-01T00:00:00Z"},
		{-1, "1969-12-31T23:59:59Z"},
		{951782400, "2000-02-29T00:00:00Z"},
		{1743296400, "2025-03-30T01:00:00Z"},
		{4107542399, "2100-02-28T23:59:59Z"},
		{4107542400, "2100-03-01T00:00:00Z"},
		{253402300799, "9999-12-31T23:59:59Z"},
		{-62135596800, "0001-01-01T00:00:00Z"},
	};
	char out[CRON_TIME_LEN];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cron_format_utc(cases[i].t, out);
		assert_string_equal(out, cases[i].s);
		assert_int_equal(at(cases[i].s), cases[i].t);
	}
}

/*
 * The scheduler's due ticks: the database's clock is floored to the second,
 * so 0.3 s before midnight the midnight tick is not due yet (rounding made
 * it due at 23:59:59.5, and a job computing "yesterday" got the wrong
 * day); at the exact second it is.
 */
static void
test_due(void **state)
{
	struct cron *c = parse_ok("* * * * *");
	const int64_t mid = at("2026-12-01T00:00:00Z"), us = 1000000;
	int64_t t[3];

	assert_int_equal(
		cron_due(c, NULL, mid - 180, mid * us - 300000, 0, t, 3), 1);
	assert_int_equal(t[0], mid - 60);
	assert_int_equal(cron_due(c, NULL, mid - 60, mid * us - 1, 1, t, 3), 0);
	assert_int_equal(cron_due(c, NULL, mid - 60, mid * us, 1, t, 3), 1);
	assert_int_equal(t[0], mid);
	/* all: oldest first, up to max; latest: the last one only. */
	assert_int_equal(cron_due(c, "UTC", mid - 300, mid * us + 5, 1, t, 3),
			 3);
	assert_int_equal(t[0], mid - 240);
	assert_int_equal(t[2], mid - 120);
	assert_int_equal(cron_due(c, "UTC", mid - 300, mid * us, 0, t, 3), 1);
	assert_int_equal(t[0], mid);
	/* Before 1970 too: -60.000001 s is floored to -61, not cut to -60. */
	assert_int_equal(cron_due(c, NULL, -180, -60 * us - 1, 1, t, 3), 1);
	assert_int_equal(t[0], -120);
	assert_int_equal(
		cron_due(c, "Mars/Olympus", mid - 120, mid * us, 1, t, 3), -1);
	cron_free(c);
}

static void
test_tz_valid(void **state)
{
	static const struct {
		const char *tz;
		int ok;
	} cases[] = {
		{"UTC", 1},
		{"Etc/UTC", 1},
		{"Europe/Berlin", 1},
		{"America/New_York", 1},
		{"America/Argentina/Buenos_Aires", 1},
		{"Etc/GMT+5", 1},
		{"Etc/GMT-14", 1},
		{"EST5EDT", 1},
		{"Asia/Kolkata", 1},
		{"Europe/berlin", 0}, /* case matters */
		{"Mars/Olympus_Mons", 0},
		{"Europe", 0}, /* a directory */
		{"Europe/", 0},
		{"", 0},
		{"/usr/share/zoneinfo/UTC", 0},
		{"../zoneinfo/UTC", 0},
		{"Europe/../UTC", 0},
		{"./UTC", 0},
		{"Europe//Berlin", 0},
		{".hidden", 0},
		{"Europe/Berlin ", 0},
		{"Europe/Ber\nlin", 0},
		{"zone.tab", 0},  /* not a TZif file */
		{"tzdata.zi", 0}, /* nor this */
		{"right/UTC", 0}, /* leap seconds */
		{"CET-1CEST", 0}, /* a POSIX TZ string, not a name */
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (cron_tz_valid(cases[i].tz) != cases[i].ok)
			fail_msg("cron_tz_valid(\"%s\") is not %d", cases[i].tz,
				 cases[i].ok);
	assert_int_equal(cron_tz_valid(NULL), 0);
}

/* ---- against the C library ---- */

/* UTC offset at u by the C library, for the zone in TZ. */
static int32_t
libc_off(int64_t u)
{
	time_t t = (time_t)u;
	struct tm tm;

	assert_non_null(localtime_r(&t, &tm));
	return (int32_t)tm.tm_gmtoff;
}

/* Whether local time l matches c: the UTC path, tested above. */
static int
matches(const struct cron *c, int64_t l)
{
	int64_t next;

	return cron_next(c, NULL, l - 60, &next) == 0 && next == l;
}

/*
 * Whether minute u is a tick, by the rules in cron.h, from the C library's
 * offsets: the local time matches and, for a fixed-time expression, did not
 * happen before (up to three hours before); or u ends a gap that held a
 * matching local time.
 */
static int
oracle(const struct cron *c, int periodic, int64_t u)
{
	int32_t off = libc_off(u), before = libc_off(u - 1), o;
	int64_t l = u + off;

	if (matches(c, l)) {
		if (periodic)
			return 1;
		for (int k = 1; k <= 12; k++) {
			o = libc_off(u - k * 900);
			if (o > off && libc_off(l - o) == o && l - o < u)
				return 0;
		}
		return 1;
	}
	if (periodic || before >= off)
		return 0;
	for (int64_t g = u + before; g < l; g += 60)
		if (matches(c, g))
			return 1;
	return 0;
}

/* The instants in [from, to) where the offset changes, by the C library. */
static size_t
libc_changes(int64_t from, int64_t to, int64_t *out, size_t max)
{
	size_t n = 0;

	for (int64_t u = from + 3600; u < to && n < max; u += 3600) {
		int64_t lo = u - 3600, hi = u;

		if (libc_off(lo) == libc_off(hi))
			continue;
		while (hi - lo > 1) { /* libc_off(lo) != libc_off(hi) */
			int64_t mid = lo + (hi - lo) / 2;

			if (libc_off(mid) == libc_off(lo))
				lo = mid;
			else
				hi = mid;
		}
		out[n++] = hi;
	}
	return n;
}

/* Compares cron_next() with the oracle minute by minute in [from, to). */
static void
compare_window(const struct cron *c, const char *expr, int periodic,
	       const char *zone, int64_t from, int64_t to)
{
	int64_t t = from, next, want;
	char a[CRON_TIME_LEN], b[CRON_TIME_LEN];

	for (;;) {
		for (want = (t / 60 + 1) * 60; want < to; want += 60)
			if (oracle(c, periodic, want))
				break;
		if (cron_next(c, zone, t, &next) < 0)
			fail_msg("\"%s\" in %s: no tick", expr, zone);
		if (want >= to && next >= to)
			return;
		if (next != want) {
			cron_format_utc(next, a);
			cron_format_utc(want, b);
			if (want >= to)
				strcpy(b, "none in the window");
			fail_msg("\"%s\" in %s: got %s, want %s", expr, zone, a,
				 b);
		}
		t = next;
	}
}

static void
test_against_libc(void **state)
{
	static const char *const zones[] = {
		"Europe/Berlin",       "America/New_York",  "Australia/Sydney",
		"Australia/Lord_Howe", "Europe/Dublin",	    "America/Santiago",
		"Pacific/Chatham",     "Africa/Casablanca", "Antarctica/Troll",
		"America/Sao_Paulo",   "Asia/Kolkata",
	};
	static const struct {
		const char *expr;
		int periodic;
	} exprs[] = {
		{"* * * * *", 1},   {"*/7 * * * *", 1},
		{"0 * * * *", 1},   {"* 2 * * *", 1},
		{"30 2 * * *", 0},  {"15,45 0-3 * * *", 0},
		{"0 0 * * *", 0},   {"0,30 1-2 * * 0", 0},
		{"59 23 * * *", 0}, {"0 0-4/2 * * *", 0},
	};
	static const int years[] = {2025, 2041};
	int64_t changes[4];
	char from[32];

	for (size_t z = 0; z < sizeof(zones) / sizeof(zones[0]); z++) {
		setenv("TZ", zones[z], 1);
		tzset();
		for (size_t y = 0; y < sizeof(years) / sizeof(years[0]); y++) {
			size_t n;
			int64_t y0;

			snprintf(from, sizeof(from), "%d-01-01T00:00:00Z",
				 years[y]);
			y0 = at(from);
			n = libc_changes(y0, y0 + 366 * 86400LL, changes, 4);
			/* And a day without a change. */
			changes[n++] = y0 + 40 * 86400;
			for (size_t i = 0; i < n; i++)
				for (size_t e = 0;
				     e < sizeof(exprs) / sizeof(exprs[0]);
				     e++) {
					struct cron *c =
						parse_ok(exprs[e].expr);

					compare_window(c, exprs[e].expr,
						       exprs[e].periodic,
						       zones[z],
						       changes[i] - 6 * 3600,
						       changes[i] + 6 * 3600);
					cron_free(c);
				}
		}
	}
	unsetenv("TZ");
	tzset();
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_errors),
		cmocka_unit_test(test_parse_ok),
		cmocka_unit_test(test_next_utc),
		cmocka_unit_test(test_next_zones),
		cmocka_unit_test(test_next_limits),
		cmocka_unit_test(test_format_utc),
		cmocka_unit_test(test_due),
		cmocka_unit_test(test_tz_valid),
		cmocka_unit_test(test_against_libc),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
