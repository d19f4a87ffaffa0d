/*
 * duration: parsing and printing durations.  See duration.h.
 */
#include "common/duration.h"

#include <stdio.h>
#include <string.h>

static int
is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static const struct {
	const char *unit;
	int64_t ms;
} units[] = {
	{"ms", 1},	    {"s", 1000},	 {"m", 60 * 1000},
	{"h", 3600 * 1000}, {"d", 86400 * 1000}, {"", 1000},
};

int
duration_parse(const char *s, int64_t *ms, const char **why)
{
	const char *dummy;
	int64_t n = 0, frac = 0, scale = 1;

	if (!why)
		why = &dummy;
	if (!s || !*s) {
		*why = "empty";
		return -1;
	}
	if (*s == '-') {
		*why = "negative";
		return -1;
	}
	if (!is_digit(*s) && !(*s == '.' && is_digit(s[1]))) {
		*why = "not a number";
		return -1;
	}
	for (; is_digit(*s); s++) {
		if (n > (DURATION_MAX_MS - (*s - '0')) / 10)
			goto too_large;
		n = n * 10 + (*s - '0');
	}
	if (*s == '.') {
		/* Digits past the ninth cannot change a millisecond of any
		 * unit: they are read and dropped. */
		for (s++; is_digit(*s); s++)
			if (scale < 1000000000) {
				frac = frac * 10 + (*s - '0');
				scale *= 10;
			}
	}
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(s, units[i].unit) != 0)
			continue;
		if (n > DURATION_MAX_MS / units[i].ms)
			goto too_large;
		int64_t v = n * units[i].ms +
			    (frac * units[i].ms + scale / 2) / scale;
		if (v > DURATION_MAX_MS)
			goto too_large;
		*ms = v;
		return 0;
	}
	*why = "unknown unit";
	return -1;
too_large:
	*why = "too large";
	return -1;
}

const char *
duration_format(int64_t ms, char *buf, size_t len)
{
	static const struct {
		const char *unit;
		int64_t ms;
	} whole[] = {
		{"d", 86400000}, {"h", 3600000}, {"m", 60000}, {"s", 1000}};

	for (size_t i = 0; ms > 0 && i < sizeof(whole) / sizeof(whole[0]);
	     i++) {
		if (ms % whole[i].ms == 0) {
			snprintf(buf, len, "%lld%s",
				 (long long)(ms / whole[i].ms), whole[i].unit);
			return buf;
		}
	}
	snprintf(buf, len, "%lld%s", (long long)ms, ms ? "ms" : "s");
	return buf;
}
