/*
 * tz: IANA time zones for cron, read from the TZif files of tzdata (RFC
 * 8536), and the proleptic Gregorian calendar that both modules count days
 * with.  Pure apart from reading one file in tz_load(): no setenv("TZ"), no
 * localtime_r(), no global state.
 */
#ifndef PGJOBD_TZ_H
#define PGJOBD_TZ_H

#include <stddef.h>
#include <stdint.h>

/* Zone name N is read from TZ_ZONEINFO_DIR "/" N (Debian package tzdata). */
#define TZ_ZONEINFO_DIR "/usr/share/zoneinfo"

#define TZ_NEVER   INT64_MIN /* a span that has no start */
#define TZ_FOREVER INT64_MAX /* a span that has no end */

struct tz_zone; /* opaque */

/*
 * A stretch of time with one UTC offset: [start, end) in Unix seconds.
 * Local time is UTC + off.  prev_off is the offset before start (off when
 * start is TZ_NEVER): prev_off > off at the end of summer time, when an hour
 * of local time repeats, and prev_off < off at its start, when one is skipped.
 */
struct tz_span {
	int64_t start, end;
	int32_t off;	  /* seconds east of UTC */
	int32_t prev_off; /* seconds east of UTC */
};

/*
 * Loads a zone: NULL or "UTC" is built in; any other name must be a relative
 * path of letters, digits and "/_+-." whose components do not start with '.',
 * to a TZif file.  Zones that count leap seconds (right/...) are refused.
 * Returns the zone (caller frees with tz_free()) or NULL.
 */
struct tz_zone *tz_load(const char *name);
/* The same from the bytes of a TZif file (tests use it); NULL if malformed. */
struct tz_zone *tz_parse(const void *data, size_t len);
void tz_free(struct tz_zone *z);

/*
 * The span of z that holds t.  After the file's last transition, the POSIX
 * TZ rule of its footer ("CET-1CEST,M3.5.0,M10.5.0/3") gives the spans, so
 * "slim" files work as well as "fat" ones.  t must lie within a few
 * thousand years of now (cron keeps to the years 1 to 10004): the rule's
 * arithmetic would overflow near the ends of int64_t.
 */
void tz_span(const struct tz_zone *z, int64_t t, struct tz_span *s);

/* ---- the calendar: days counted from 1970-01-01 ---- */

/* a / b rounded down, for b > 0. */
int64_t tz_floor_div(int64_t a, int64_t b);
int tz_is_leap(int64_t y);
int tz_days_in_month(int64_t y, int month);
int64_t tz_days_from_civil(int64_t y, int month, int day);
void tz_civil_from_days(int64_t days, int64_t *y, int *month, int *day);
/* 0 = Sunday. */
int tz_weekday(int64_t days);

#endif
