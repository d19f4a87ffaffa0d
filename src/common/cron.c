/*
 * cron: cron expressions and their next tick, in UTC or an IANA time zone.
 *
 * An expression is parsed once into one bit set per field.  cron_next() walks
 * forward on the local wall clock a whole month, day, hour or minute at a
 * time, so even an expression that matches once in four years (0 0 29 2 *)
 * costs a few thousand steps at most over the five-year horizon.
 *
 * Time zones come from tz.c, a reader of tzdata's files that hands over the
 * UTC offset in effect and the span of time that keeps it, rather than from
 * setenv("TZ") + tzset() + localtime_r()/mktime(): tz.c says why.  The zone is
 * read again at every cron_next() (a few kilobytes, once per tick of a
 * schedule), so a tzdata upgrade takes effect without a restart.
 *
 * Rules, as in Vixie cron (cron.h and docs/schedules.md say the same):
 * - Day of month and day of week: when both are restricted, a day matches if
 *   either does; when either field starts with '*' (with a step or not), a
 *   day must match both, so only the other one counts.
 * - Daylight saving time: an expression is periodic when its minute or hour
 *   field starts with '*', fixed-time otherwise.  When clocks go back, the
 *   local times of the repeated hour happen twice: periodic expressions tick
 *   on both passes, fixed-time ones on the first only.  When clocks go
 *   forward, the local times of the gap never happen: periodic expressions
 *   have no ticks there, and fixed-time ones tick once at the end of the gap,
 *   the instant of the change, so that a nightly job at 02:30 still runs on
 *   the night the clocks skip from 02:00 to 03:00.
 */
#include "common/cron.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/tz.h"
#include "common/util.h"

#define TIME_MIN (-62135596800LL) /* 0001-01-01T00:00:00Z */
#define TIME_MAX 253402300799LL	  /* 9999-12-31T23:59:59Z */
#define DAY	 86400

enum { MINUTE, HOUR, DOM, MONTH, DOW, NFIELDS };

struct cron {
	uint64_t bits[NFIELDS];	 /* bit v set: value v matches */
	bool dom_star, dow_star; /* the field's text starts with '*' */
	bool periodic;		 /* the minute or hour field starts with '*' */
};

static const char *const month_names[] = {"jan", "feb", "mar", "apr", "may",
					  "jun", "jul", "aug", "sep", "oct",
					  "nov", "dec", NULL};
static const char *const day_names[] = {"sun", "mon", "tue", "wed",
					"thu", "fri", "sat", NULL};

static const struct field {
	const char *name;
	int min, max;		  /* the values that may be written */
	int top;		  /* the last value that * and 5/15 reach */
	const char *const *names; /* names[i] stands for min + i */
	const char *what;	  /* "a month name", in messages */
} fields[NFIELDS] = {
	{"minute", 0, 59, 59, NULL, NULL},
	{"hour", 0, 23, 23, NULL, NULL},
	{"day-of-month", 1, 31, 31, NULL, NULL},
	{"month", 1, 12, 12, month_names, "a month name"},
	/* 7 is Sunday as well as 0; * covers each day once. */
	{"day-of-week", 0, 7, 6, day_names, "a day name"},
};

static const struct {
	const char *name, *expr;
} shortcuts[] = {
	{"@yearly", "0 0 1 1 *"},  {"@annually", "0 0 1 1 *"},
	{"@monthly", "0 0 1 * *"}, {"@weekly", "0 0 * * 0"},
	{"@daily", "0 0 * * *"},   {"@midnight", "0 0 * * *"},
	{"@hourly", "0 * * * *"},
};

/* ---- parsing ---- */

static bool
is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool
is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
	       c == '\f';
}

/* Digits only, saturated at 10000 so that no number can overflow. */
static bool
read_number(const char *s, size_t n, int *out)
{
	int v = 0;

	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (!is_digit(s[i]))
			return false;
		if (v < 10000)
			v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return true;
}

/*
 * One value of field f, a number or a name, from s[0..n).  text is the whole
 * field, for the message when the value is missing.
 */
static int
parse_value(const struct field *f, const char *text, const char *s, size_t n,
	    int *out, char **err)
{
	if (n == 0) {
		*err = xasprintf("%s: missing a value in \"%s\"", f->name,
				 text);
		return -1;
	}
	if (read_number(s, n, out)) {
		if (*out >= f->min && *out <= f->max)
			return 0;
		*err = xasprintf("%s: %.*s is out of range %d-%d", f->name,
				 (int)n, s, f->min, f->max);
		return -1;
	}
	for (size_t i = 0; f->names && n == 3 && f->names[i]; i++) {
		if (!strncasecmp(s, f->names[i], 3)) {
			*out = f->min + (int)i;
			return 0;
		}
	}
	if (f->names)
		*err = xasprintf("%s: \"%.*s\" is not a number or %s", f->name,
				 (int)n, s, f->what);
	else
		*err = xasprintf("%s: \"%.*s\" is not a number", f->name,
				 (int)n, s);
	return -1;
}

/* The step after '/' in s[0..n): 1 up to the span of the field. */
static int
parse_step(const struct field *f, const char *text, const char *s, size_t n,
	   int *step, char **err)
{
	int span = f->top - f->min;

	if (n == 0) {
		*err = xasprintf("%s: missing a value in \"%s\"", f->name,
				 text);
		return -1;
	}
	if (!read_number(s, n, step)) {
		*err = xasprintf("%s: step \"%.*s\" is not a number", f->name,
				 (int)n, s);
		return -1;
	}
	if (*step >= 1 && *step <= span)
		return 0;
	*err = xasprintf("%s: step %.*s is out of range 1-%d", f->name, (int)n,
			 s, span);
	return -1;
}

/* One item of a list, s[0..n): *, a value or a range, with a step or not. */
static int
parse_item(const struct field *f, const char *text, const char *s, size_t n,
	   uint64_t *bits, char **err)
{
	const char *slash = memchr(s, '/', n), *dash;
	size_t rn = slash ? (size_t)(slash - s) : n;
	int lo, hi, step = 1;

	if (slash && parse_step(f, text, slash + 1, n - rn - 1, &step, err) < 0)
		return -1;
	if (rn == 1 && s[0] == '*') {
		lo = f->min;
		hi = f->top;
	} else {
		dash = memchr(s, '-', rn);
		if (parse_value(f, text, s, dash ? (size_t)(dash - s) : rn, &lo,
				err) < 0)
			return -1;
		if (!dash)
			hi = slash ? f->top : lo;
		else if (parse_value(f, text, dash + 1,
				     rn - (size_t)(dash - s) - 1, &hi, err) < 0)
			return -1;
		if (dash && f == &fields[DOW] && hi == 0 && lo > 0)
			hi = 7; /* fri-sun */
		if (lo > hi) {
			*err = xasprintf("%s: range %.*s ends before it starts",
					 f->name, (int)rn, s);
			return -1;
		}
	}
	for (int v = lo; v <= hi; v += step)
		*bits |= 1ULL << v;
	return 0;
}

/* Field i of c from text, a comma-separated list. */
static int
parse_field(struct cron *c, int i, const char *text, char **err)
{
	const struct field *f = &fields[i];
	const char *s = text, *comma;

	for (;;) {
		comma = strchr(s, ',');
		if (parse_item(f, text, s,
			       comma ? (size_t)(comma - s) : strlen(s),
			       &c->bits[i], err) < 0)
			return -1;
		if (!comma)
			break;
		s = comma + 1;
	}
	if (i == DOW && (c->bits[DOW] & 1ULL << 7))
		c->bits[DOW] = (c->bits[DOW] & ~(1ULL << 7)) | 1;
	return 0;
}

/*
 * Whether the month and day-of-month fields name a date that exists in a
 * leap year: when the day of week is *, they must, or the expression (0 0
 * 31 2 *) would parse and never tick.
 */
static bool
dates_exist(const struct cron *c)
{
	for (int m = 1; m <= 12; m++) {
		uint64_t days = ((1ULL << tz_days_in_month(2000, m)) - 1) << 1;

		if ((c->bits[MONTH] >> m & 1) && (c->bits[DOM] & days))
			return true;
	}
	return false;
}

/* A shortcut such as @daily, the whole of the trimmed expression s. */
static struct cron *
parse_shortcut(const char *s, char **err)
{
	size_t n = 0, rest;

	while (s[n] && !is_blank(s[n]))
		n++;
	for (rest = n; is_blank(s[rest]); rest++)
		;
	for (size_t i = 0; i < sizeof(shortcuts) / sizeof(shortcuts[0]); i++) {
		if (strlen(shortcuts[i].name) != n ||
		    strncasecmp(s, shortcuts[i].name, n))
			continue;
		if (s[rest]) {
			*err = xasprintf("expected nothing after %s",
					 shortcuts[i].name);
			return NULL;
		}
		return cron_parse(shortcuts[i].expr, err);
	}
	*err = xasprintf("unknown shortcut \"%.*s\" (use @yearly, @annually, "
			 "@monthly, @weekly, @daily, @midnight or @hourly)",
			 (int)n, s);
	return NULL;
}

struct cron *
cron_parse(const char *expr, char **err)
{
	char *copy, *tok[NFIELDS], *s, *end;
	struct cron *c = NULL;
	int n = 0;

	*err = NULL;
	while (is_blank(*expr))
		expr++;
	if (*expr == '@')
		return parse_shortcut(expr, err);
	/* Split a copy at blanks: tok[i] is field i, NUL-terminated. */
	s = copy = xstrdup(expr);
	while (*s) {
		for (end = s; *end && !is_blank(*end); end++)
			;
		if (n < NFIELDS)
			tok[n] = s;
		n++;
		for (s = end; is_blank(*s); s++)
			;
		*end = '\0';
	}
	if (n != NFIELDS) {
		*err = xasprintf("expected 5 fields, got %d", n);
		goto out;
	}
	c = xcalloc(1, sizeof(*c));
	for (int i = 0; i < NFIELDS; i++) {
		if (parse_field(c, i, tok[i], err) < 0) {
			cron_free(c);
			c = NULL;
			goto out;
		}
	}
	c->dom_star = tok[DOM][0] == '*';
	c->dow_star = tok[DOW][0] == '*';
	c->periodic = tok[MINUTE][0] == '*' || tok[HOUR][0] == '*';
	if (c->dow_star && !dates_exist(c)) {
		*err = xstrdup("day-of-month: no such day in the months given");
		cron_free(c);
		c = NULL;
	}
out:
	free(copy);
	return c;
}

void
cron_free(struct cron *c)
{
	free(c);
}

void
cron_format_utc(int64_t t, char out[CRON_TIME_LEN])
{
	int64_t days = tz_floor_div(t, DAY), secs = t - days * DAY, y;
	int m, d;

	tz_civil_from_days(days, &y, &m, &d);
	snprintf(out, CRON_TIME_LEN, "%04lld-%02d-%02dT%02d:%02d:%02dZ",
		 (long long)y, m, d, (int)(secs / 3600), (int)(secs / 60 % 60),
		 (int)(secs % 60));
}

/* ---- matching on the local wall clock ---- */

/* A minute of local time, always a valid date. */
struct civil {
	int64_t y;
	int mon, d, h, min;
};

static void
next_month(struct civil *v)
{
	v->d = 1;
	v->h = v->min = 0;
	if (++v->mon > 12) {
		v->mon = 1;
		v->y++;
	}
}

static void
next_day(struct civil *v)
{
	v->h = v->min = 0;
	if (++v->d > tz_days_in_month(v->y, v->mon))
		next_month(v);
}

static void
next_hour(struct civil *v)
{
	v->min = 0;
	if (++v->h > 23)
		next_day(v);
}

static bool
day_matches(const struct cron *c, const struct civil *v)
{
	int wd = tz_weekday(tz_days_from_civil(v->y, v->mon, v->d));
	bool dom = c->bits[DOM] >> v->d & 1, dow = c->bits[DOW] >> wd & 1;

	return c->dom_star || c->dow_star ? dom && dow : dom || dow;
}

/*
 * The first minute at or after from that matches c, in seconds of local
 * time counted as if it were UTC, into *at.  Returns -1 when none comes by
 * limit.
 */
static int
next_local(const struct cron *c, int64_t from, int64_t limit, int64_t *at)
{
	int64_t days, secs, last_year;
	struct civil v;
	int m, d;

	from = tz_floor_div(from + 59, 60) * 60;
	days = tz_floor_div(from, DAY);
	secs = from - days * DAY;
	tz_civil_from_days(days, &v.y, &v.mon, &v.d);
	v.h = (int)(secs / 3600);
	v.min = (int)(secs / 60 % 60);
	tz_civil_from_days(tz_floor_div(limit, DAY), &last_year, &m, &d);
	while (v.y <= last_year) {
		if (!(c->bits[MONTH] >> v.mon & 1)) {
			next_month(&v);
		} else if (!day_matches(c, &v)) {
			next_day(&v);
		} else if (!(c->bits[HOUR] >> v.h & 1)) {
			next_hour(&v);
		} else if (!(c->bits[MINUTE] >> v.min & 1)) {
			if (++v.min > 59)
				next_hour(&v);
		} else {
			*at = tz_days_from_civil(v.y, v.mon, v.d) * DAY +
			      v.h * 3600 + v.min * 60;
			return *at <= limit ? 0 : -1;
		}
	}
	return -1;
}

/* ---- the next tick ---- */

/*
 * cron_next() with the zone in hand; see the rules at the top.  Each turn
 * looks for the first tick at or after lo in the span of one UTC offset that
 * holds lo, where local time and UTC map one to one.
 */
static int
search(const struct cron *c, const struct tz_zone *z, int64_t t, int64_t *next)
{
	const int64_t horizon = t + CRON_HORIZON_SECONDS;
	int64_t lo = t + 1, local, u;
	struct tz_span s, after;

	while (lo <= horizon) {
		tz_span(z, lo, &s);
		if (next_local(c, lo + s.off, horizon + s.off, &local) < 0)
			return -1;
		u = local - s.off;
		if (u < s.end) {
			/* Clocks went back at s.start and local came before. */
			if (!c->periodic && local - s.prev_off < s.start) {
				lo = u + 1;
				continue;
			}
			*next = u;
			return 0;
		}
		/* Nothing before s.end: is local in a gap that it opens? */
		tz_span(z, s.end, &after);
		if (!c->periodic && local < s.end + after.off) {
			*next = s.end;
			return 0;
		}
		lo = s.end;
	}
	return -1;
}

int
cron_next(const struct cron *c, const char *tz, int64_t t, int64_t *next)
{
	struct tz_zone *z;
	int rc;

	if (t < TIME_MIN || t > TIME_MAX || !(z = tz_load(tz)))
		return -1;
	rc = search(c, z, t, next);
	tz_free(z);
	return rc;
}

int
cron_due(const struct cron *c, const char *tz, int64_t last, int64_t now_us,
	 int all, int64_t *ticks, int max)
{
	/* Division truncates towards zero: floor by hand before 1970. */
	int64_t now = now_us / 1000000 - (now_us % 1000000 < 0);
	int64_t t = last, next;
	struct tz_zone *z;
	int n = 0;

	if (!(z = tz_load(tz)))
		return -1;
	while (max > 0 && t >= TIME_MIN && t <= TIME_MAX &&
	       search(c, z, t, &next) == 0 && next <= now) {
		if (!all)
			n = 1; /* keep only the latest */
		else if (n == max)
			break;
		else
			n++;
		ticks[n - 1] = next;
		t = next;
	}
	tz_free(z);
	return n;
}

int
cron_tz_valid(const char *tz)
{
	struct tz_zone *z = tz ? tz_load(tz) : NULL;
	int ok = z != NULL;

	tz_free(z);
	return ok;
}
