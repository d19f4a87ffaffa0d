/*
 * rate: "COUNT/PERIOD".  See rate.h.
 */
#include "common/rate.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "common/duration.h"

static const struct {
	const char *name;
	int64_t ms;
} units[] = {
	{"ms", 1},	   {"s", 1000},	    {"sec", 1000},     {"second", 1000},
	{"m", 60000},	   {"min", 60000},  {"minute", 60000}, {"h", 3600000},
	{"hour", 3600000}, {"d", 86400000}, {"day", 86400000},
};

/* ASCII white space, as PostgreSQL's input functions skip it (a YAML
 * block scalar ends with a line break): never a locale's wider idea. */
static const char *
skip_space(const char *s)
{
	while (*s && strchr(" \t\n\v\f\r", *s))
		s++;
	return s;
}

/* Up to max digits at *s into *v; the number of digits read. */
static int
digits(const char **s, int max, int64_t *v)
{
	int n = 0;
	*v = 0;
	while (isdigit((unsigned char)**s) && n < max + 1) {
		*v = *v * 10 + (**s - '0');
		(*s)++;
		n++;
	}
	return n > max ? -1 : n;
}

int
rate_parse(const char *s, struct rate *r, const char **why)
{
	int64_t count, whole = 1, frac = 0, scale = 1;
	*why = "not COUNT/PERIOD (10/s, 600/min, 100/10s)";
	s = skip_space(s);
	if (digits(&s, 9, &count) <= 0)
		return -1;
	s = skip_space(s);
	if (*s++ != '/')
		return -1;
	s = skip_space(s);
	if (isdigit((unsigned char)*s)) {
		if (digits(&s, 15, &whole) <= 0)
			return -1;
		if (*s == '.') {
			s++;
			int n = digits(&s, 6, &frac);
			if (n <= 0)
				return -1;
			while (n-- > 0)
				scale *= 10;
		}
		s = skip_space(s);
	}
	const char *unit = s;
	while (*s >= 'a' && *s <= 'z')
		s++;
	size_t ulen = (size_t)(s - unit);
	if (*skip_space(s) != '\0' || ulen == 0)
		return -1;
	int64_t unit_ms = 0;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (strlen(units[i].name) == ulen &&
		    memcmp(units[i].name, unit, ulen) == 0)
			unit_ms = units[i].ms;
	if (unit_ms == 0) {
		*why = "unknown unit (ms, s, min, h, d)";
		return -1;
	}
	if (count < 1) {
		*why = "the count must be at least 1";
		return -1;
	}
	/* whole * unit_ms + round(frac / scale * unit_ms), checked against
	 * the range before it can overflow (whole < 10^15, unit_ms <
	 * 10^8). */
	if (whole > DURATION_MAX_MS / unit_ms + 1) {
		*why = "the period is out of range";
		return -1;
	}
	long double ms = (long double)whole * unit_ms +
			 (long double)frac * unit_ms / scale;
	int64_t period = (int64_t)(ms + 0.5L);
	if (period < 1 || period > DURATION_MAX_MS) {
		*why = "the period is out of range";
		return -1;
	}
	r->n = (int)count;
	r->period_ms = period;
	*why = NULL;
	return 0;
}

const char *
rate_format(const struct rate *r, char *buf, size_t len)
{
	static const struct {
		const char *unit;
		int64_t ms;
	} out[] = {
		{"d", 86400000}, {"h", 3600000}, {"min", 60000}, {"s", 1000}};
	for (size_t i = 0; i < sizeof(out) / sizeof(out[0]); i++) {
		if (r->period_ms % out[i].ms)
			continue;
		int64_t k = r->period_ms / out[i].ms;
		if (k == 1)
			snprintf(buf, len, "%d/%s", r->n, out[i].unit);
		else
			snprintf(buf, len, "%d/%lld%s", r->n, (long long)k,
				 out[i].unit);
		return buf;
	}
	snprintf(buf, len, "%d/%lldms", r->n, (long long)r->period_ms);
	return buf;
}
