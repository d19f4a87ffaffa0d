/*
 * size: parsing and printing byte sizes.  See size.h.
 */
#include "common/size.h"

#include <stdio.h>
#include <string.h>

static const struct {
	const char *unit;
	int64_t bytes;
} units[] = {
	{"TiB", (int64_t)1 << 40},
	{"GiB", (int64_t)1 << 30},
	{"MiB", (int64_t)1 << 20},
	{"KiB", (int64_t)1 << 10},
	{"B", 1},
	{"", 1},
};

int
size_parse(const char *s, int64_t *bytes, const char **why)
{
	const char *dummy;
	int64_t n = 0;

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
	if (*s < '0' || *s > '9') {
		*why = "not a number";
		return -1;
	}
	for (; *s >= '0' && *s <= '9'; s++) {
		if (n > (SIZE_MAX_BYTES - (*s - '0')) / 10)
			goto too_large;
		n = n * 10 + (*s - '0');
	}
	/* "512 MiB" reads as well as "512MiB". */
	if (*s == ' ' && s[1])
		s++;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(s, units[i].unit) != 0)
			continue;
		if (n > SIZE_MAX_BYTES / units[i].bytes)
			goto too_large;
		*bytes = n * units[i].bytes;
		return 0;
	}
	*why = "unknown unit (use B, KiB, MiB, GiB or TiB)";
	return -1;
too_large:
	*why = "too large";
	return -1;
}

const char *
size_format(int64_t bytes, char *buf, size_t len)
{
	/* The largest unit that divides it exactly; B for the rest. */
	for (size_t i = 0; bytes > 0 && units[i].bytes > 1; i++)
		if (bytes % units[i].bytes == 0) {
			snprintf(buf, len, "%lld%s",
				 (long long)(bytes / units[i].bytes),
				 units[i].unit);
			return buf;
		}
	snprintf(buf, len, "%lldB", (long long)bytes);
	return buf;
}
