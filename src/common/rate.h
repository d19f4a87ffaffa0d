/*
 * rate: the grammar of rate limits, "COUNT/PERIOD": 10/s, 600/min, 100/10s,
 * 5/1.5h (docs/queues.md, "The grammar of a rate").  This reader checks a
 * config file without a database; pgjob.parse_rate() reads what is set
 * with SQL.  Both answer the one table of cases tests/fixtures/rates.txt
 * (unit.test_rate, int.test_rate_sql), the grammar's owner: a rate set
 * with SQL means what the same text means in the config.
 */
#ifndef PGJOBD_RATE_H
#define PGJOBD_RATE_H

#include <stddef.h>
#include <stdint.h>

struct rate {
	int n;		   /* starts (tokens) per period; 0: no rate */
	int64_t period_ms; /* 1 .. DURATION_MAX_MS */
};

/*
 * Parses s.  Returns 0, or -1 with *why set to a static reason: "not
 * COUNT/PERIOD", "unknown unit", "the count must be at least 1", "the
 * period is out of range".
 */
int rate_parse(const char *s, struct rate *r, const char **why);

/* r as the shortest spelling ("10/s", "600/min", "3/1500ms"), into buf of
 * RATE_LEN bytes; returns buf. */
#define RATE_LEN 48
const char *rate_format(const struct rate *r, char *buf, size_t len);

#endif
