/*
 * duration: the one grammar of durations, for the config, the command
 * line and what handlers answer (retry_in, Retry-After seconds).
 *
 *   <number>[<unit>]   number: digits, optionally a fraction (1.5);
 *                      unit: ms, s, m, h or d; none: seconds
 *
 * Values are rounded to the nearest millisecond and may not exceed
 * DURATION_MAX_MS (some 31,700 years: past that, no time PostgreSQL can
 * store is that far away).
 */
#ifndef PGJOBD_DURATION_H
#define PGJOBD_DURATION_H

#include <stddef.h>
#include <stdint.h>

#define DURATION_MAX_MS ((int64_t)1000000000000000)

/*
 * Parses s into *ms.  Returns 0, or -1 with *why (may be NULL) set to a
 * static reason: "empty", "negative", "not a number", "unknown unit" or
 * "too large".
 */
int duration_parse(const char *s, int64_t *ms, const char **why);

/* The shortest exact spelling of ms: "30s", "5m", "1500ms", "0s".  Writes
 * into buf (at least DURATION_LEN bytes) and returns it. */
#define DURATION_LEN 32
const char *duration_format(int64_t ms, char *buf, size_t len);

#endif
