/*
 * fuzz_cron: cron_parse() and cron_next() on arbitrary input.
 *
 * The input is read as: one byte that picks a time zone from a fixed list,
 * eight bytes of a start time (little-endian, folded into the years 1 to
 * 9999 most of the time, left raw otherwise), and the rest as the
 * expression (a C string: it stops at the first NUL).  A parsed expression
 * is stepped forward a few ticks, each of which must be later than the last
 * and within the horizon.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/cron.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z. */
#define T_MIN (-62135596800LL)
#define T_MAX 253402300799LL

static const char *const zones[] = {
	NULL,
	"UTC",
	"Europe/Paris",
	"America/New_York",
	"Australia/Lord_Howe",
	"Asia/Kathmandu",
	"Pacific/Apia",
	"America/Santiago",
	"Nowhere/Unknown",
};
#define NZONES (sizeof(zones) / sizeof(zones[0]))

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 9)
		return 0;
	const char *tz = zones[data[0] % NZONES];
	uint64_t raw = 0;
	for (int i = 0; i < 8; i++)
		raw |= (uint64_t)data[1 + i] << (8 * i);
	int64_t t;
	if (data[0] & 0x80)
		memcpy(&t, &raw, sizeof(t)); /* raw: out of range too */
	else
		t = T_MIN + (int64_t)(raw % (uint64_t)(T_MAX - T_MIN + 1));

	size_t len = size - 9;
	char *expr = malloc(len + 1);
	if (!expr)
		return 0;
	memcpy(expr, data + 9, len);
	expr[len] = '\0';

	char *err = NULL;
	struct cron *c = cron_parse(expr, &err);
	if ((c == NULL) == (err == NULL))
		abort(); /* exactly one of them */
	free(err);
	if (c) {
		int64_t next;
		for (int i = 0; i < 4; i++) {
			if (cron_next(c, tz, t, &next) < 0)
				break;
			if (next <= t ||
			    next - t > CRON_HORIZON_SECONDS + 86400)
				abort();
			char buf[CRON_TIME_LEN];
			cron_format_utc(next, buf);
			t = next;
		}
		cron_free(c);
	}
	free(expr);
	return 0;
}
