/*
 * Unit tests for tz, the time zone reader behind cron: the calendar against
 * the C library's, spans of one offset from a file's transitions and from its
 * footer's POSIX rule, and malformed files.  test_cron.c checks the same
 * zones through cron_next() against the C library's own reading of them.
 *
 * Needs tzdata (/usr/share/zoneinfo).
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

#include "common/tz.h"

#define ZONE_FILE(name) TZ_ZONEINFO_DIR "/" name

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

/* ---- the calendar ---- */

/* Every day from 1600 to 2500 against gmtime_r(), both ways. */
static void
test_calendar(void **state)
{
	int64_t first = tz_days_from_civil(1600, 1, 1);
	int64_t last = tz_days_from_civil(2500, 12, 31);

	assert_int_equal(tz_days_from_civil(1970, 1, 1), 0);
	assert_int_equal(tz_days_from_civil(2000, 3, 1), 11017);
	assert_int_equal(tz_days_from_civil(1969, 12, 31), -1);
	for (int64_t days = first; days <= last; days++) {
		time_t t = (time_t)(days * 86400);
		struct tm tm;
		int64_t y;
		int m, d;

		assert_non_null(gmtime_r(&t, &tm));
		tz_civil_from_days(days, &y, &m, &d);
		if (y != tm.tm_year + 1900 || m != tm.tm_mon + 1 ||
		    d != tm.tm_mday || tz_weekday(days) != tm.tm_wday)
			fail_msg("day %lld: %lld-%d-%d weekday %d",
				 (long long)days, (long long)y, m, d,
				 tz_weekday(days));
		assert_int_equal(tz_days_from_civil(y, m, d), days);
		if (d == 1 && m > 1)
			assert_int_equal(
				tz_days_in_month(y, m - 1),
				tz_days_from_civil(y, m, 1) -
					tz_days_from_civil(y, m - 1, 1));
	}
	assert_true(tz_is_leap(2000));
	assert_true(tz_is_leap(2024));
	assert_false(tz_is_leap(1900));
	assert_false(tz_is_leap(2100));
	assert_false(tz_is_leap(2025));
	assert_int_equal(tz_days_in_month(2024, 2), 29);
	assert_int_equal(tz_days_in_month(2100, 2), 28);
	assert_int_equal(tz_days_in_month(2025, 12), 31);
	assert_int_equal(tz_floor_div(-1, 60), -1);
	assert_int_equal(tz_floor_div(-60, 60), -1);
	assert_int_equal(tz_floor_div(-61, 60), -2);
	assert_int_equal(tz_floor_div(59, 60), 0);
	assert_int_equal(tz_weekday(-1), 3); /* 1969-12-31, a Wednesday */
}

/* ---- zones ---- */

static void
assert_span(const struct tz_zone *z, const char *t, const char *start,
	    const char *end, int32_t off, int32_t prev_off)
{
	struct tz_span s;

	tz_span(z, at(t), &s);
	assert_int_equal(s.start, start ? at(start) : TZ_NEVER);
	assert_int_equal(s.end, end ? at(end) : TZ_FOREVER);
	assert_int_equal(s.off, off);
	assert_int_equal(s.prev_off, prev_off);
}

static void
test_tz_spans(void **state)
{
	struct tz_zone *z = tz_load(NULL);
	struct tz_span s;

	assert_span(z, "2025-07-01T00:00:00Z", NULL, NULL, 0, 0);
	tz_free(z);
	z = tz_load("Europe/Berlin");
	assert_non_null(z);
	/* From the transitions of the file, then from its footer. */
	assert_span(z, "2025-07-01T00:00:00Z", "2025-03-30T01:00:00Z",
		    "2025-10-26T01:00:00Z", 7200, 3600);
	assert_span(z, "2025-10-26T01:00:00Z", "2025-10-26T01:00:00Z",
		    "2026-03-29T01:00:00Z", 3600, 7200);
	assert_span(z, "2025-10-26T00:59:59Z", "2025-03-30T01:00:00Z",
		    "2025-10-26T01:00:00Z", 7200, 3600);
	assert_span(z, "2041-01-01T00:00:00Z", "2040-10-28T01:00:00Z",
		    "2041-03-31T01:00:00Z", 3600, 7200);
	assert_span(z, "2041-07-01T00:00:00Z", "2041-03-31T01:00:00Z",
		    "2041-10-27T01:00:00Z", 7200, 3600);
	/* Before the first transition: local mean time, +0:53:28. */
	assert_span(z, "1800-01-01T00:00:00Z", NULL, "1893-03-31T23:06:32Z",
		    3208, 3208);
	tz_free(z);
	/* Dublin's footer has a "DST" offset below the standard one. */
	z = tz_load("Europe/Dublin");
	assert_non_null(z);
	assert_span(z, "2041-07-01T00:00:00Z", "2041-03-31T01:00:00Z",
		    "2041-10-27T01:00:00Z", 3600, 0);
	assert_span(z, "2041-12-01T00:00:00Z", "2041-10-27T01:00:00Z",
		    "2042-03-30T01:00:00Z", 0, 3600);
	tz_free(z);
	/* A last change long ago: that span lasts forever. */
	z = tz_load("Asia/Kolkata");
	assert_non_null(z);
	assert_span(z, "2041-01-01T00:00:00Z", "1945-10-14T17:30:00Z", NULL,
		    19800, 23400);
	tz_free(z);
	/* No more summer time since 2019 (a "fat" file may add a no-op). */
	z = tz_load("America/Sao_Paulo");
	assert_non_null(z);
	tz_span(z, at("2030-01-01T00:00:00Z"), &s);
	assert_int_equal(s.start, at("2019-02-17T02:00:00Z"));
	assert_int_equal(s.off, -10800);
	tz_span(z, at("2041-01-01T00:00:00Z"), &s);
	assert_int_equal(s.end, TZ_FOREVER);
	assert_int_equal(s.off, -10800);
	tz_free(z);
}

/* Reads a zone's file into memory. */
static unsigned char *
slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	unsigned char *buf = malloc(1 << 20);

	assert_non_null(f);
	assert_non_null(buf);
	*len = fread(buf, 1, 1 << 20, f);
	fclose(f);
	return buf;
}

/* Every truncation is refused; corrupted bytes never crash (run with ASan). */
static void
test_tz_malformed(void **state)
{
	static const char *const files[] = {
		ZONE_FILE("Europe/Berlin"),
		ZONE_FILE("America/New_York"),
		ZONE_FILE("UTC"),
	};
	struct tz_span s;

	for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++) {
		size_t len;
		unsigned char *buf = slurp(files[f], &len);
		struct tz_zone *z = tz_parse(buf, len);

		assert_non_null(z);
		tz_free(z);
		for (size_t n = 0; n < len; n++)
			if ((z = tz_parse(buf, n)))
				fail_msg("%s cut to %zu bytes parsed", files[f],
					 n);
		for (size_t i = 0; i < len; i++) {
			unsigned char keep = buf[i];

			buf[i] ^= i % 2 ? 0xff : 0x80;
			if ((z = tz_parse(buf, len))) {
				tz_span(z, 0, &s);
				tz_span(z, at("2041-07-01T00:00:00Z"), &s);
				tz_free(z);
			}
			buf[i] = keep;
		}
		free(buf);
	}
	assert_null(tz_parse("TZif", 4));
	assert_null(tz_parse(NULL, 0));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_calendar),
		cmocka_unit_test(test_tz_spans),
		cmocka_unit_test(test_tz_malformed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
