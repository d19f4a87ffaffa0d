/*
 * cron: cron expressions, and the time of their next tick in UTC or in an
 * IANA time zone.  Pure: no event loop, no database, no global state, no
 * setenv("TZ").
 *
 * The scheduler asks cron_due() for the ticks after the last one it
 * enqueued, and names each tick by cron_format_utc() in its unique key.
 * docs/schedules.md is the user's description of the same rules.
 */
#ifndef PGJOBD_CRON_H
#define PGJOBD_CRON_H

#include <stdint.h>

/* How far cron_next() looks: five years of 366 days. */
#define CRON_HORIZON_SECONDS (5 * 366 * 86400LL)

/* The buffer size for cron_format_utc(): "2025-03-30T01:00:00Z" and more. */
#define CRON_TIME_LEN 32

struct cron; /* a parsed expression; opaque */

/*
 * Parses a standard five-field expression: minute hour day-of-month month
 * day-of-week.  Each field is a comma-separated list of items: * (every
 * value), a value, a range (1-5), or any of them with a step: 1-30/5, and
 * 5/15 for 5-59/15; a * followed by /15 is every 15 minutes.  Months may be
 * jan..dec and days sun..sat, in any case; 7 is Sunday too, and a day range
 * may end on Sunday (fri-sun).  The shortcuts @yearly, @annually, @monthly,
 * @weekly, @daily, @midnight and @hourly stand alone.  As in Vixie cron, a
 * day matches when either day field does if both are restricted, and by the
 * other one alone when one of them starts with '*'.  Dates that never exist
 * (0 0 31 2 *) are an error.
 *
 * Returns the expression (caller frees with cron_free()), or NULL with *err
 * set to a new message that the caller frees with free(): what is wrong and
 * in which field, such as "minute: 61 is out of range 0-59" or
 * "expected 5 fields, got 4".  On success *err is NULL.
 */
struct cron *cron_parse(const char *expr, char **err);
void cron_free(struct cron *c);

/*
 * The first tick strictly after t (Unix seconds, UTC), with the fields read
 * on the wall clock of time zone tz (NULL or "UTC": UTC; otherwise an IANA
 * name such as "Europe/Paris").  Returns 0 and sets *next, or -1 when there
 * is no tick within CRON_HORIZON_SECONDS (0 0 29 2 * after 2096, as 2100
 * is not a leap year), when tz is unknown, or when t is outside the years 1
 * to 9999.
 *
 * Daylight saving time, as in Vixie cron: an expression whose minute or hour
 * field starts with '*' is periodic, others are fixed-time.  In the repeated
 * hour when clocks go back, a periodic expression ticks on both passes, a
 * fixed-time one only on the first.  In the skipped hour when clocks go
 * forward, a periodic expression has no ticks; a fixed-time tick that falls
 * there happens once, at the end of the gap (the instant of the change).
 */
int cron_next(const struct cron *c, const char *tz, int64_t t, int64_t *next);

/*
 * The ticks due after last (Unix seconds) up to now_us (microseconds since
 * the Unix epoch, as the database's clock gives it), for a scheduler round.
 * A tick is due once its second has begun: now_us is floored, never
 * rounded, so a tick is never due before its time.  With all, every due
 * tick, oldest first, the first max of them; otherwise only the latest.
 * Writes them to ticks[0..max) and returns how many, or -1 when tz is
 * unknown here (cron_next()).
 */
int cron_due(const struct cron *c, const char *tz, int64_t last, int64_t now_us,
	     int all, int64_t *ticks, int max);

/*
 * 1 if tz names a zone that cron_next() can use, else 0: "UTC", or the name
 * of a valid TZif file under /usr/share/zoneinfo (TZ_ZONEINFO_DIR in tz.h).
 * Names with a component that starts with '.' are refused, and so are the
 * right/ zones, which count leap seconds.
 */
int cron_tz_valid(const char *tz);

/* Writes t as "YYYY-MM-DDTHH:MM:SSZ" (UTC), the form of a tick's key. */
void cron_format_utc(int64_t t, char out[CRON_TIME_LEN]);

#endif
