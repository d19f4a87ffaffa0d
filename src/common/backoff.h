/*
 * backoff: retry delays, and the pace of statements that cost more as the
 * server gets behind; pure and unit-tested.
 */
#ifndef PGJOBD_BACKOFF_H
#define PGJOBD_BACKOFF_H

#include <stdint.h>

/*
 * The delay before attempt + 1 of a failed job: min(base * 2^(attempt - 1),
 * max), less up to 25 % jitter (rnd is uniform in [0, 1)), so never more
 * than max.  attempt counts from 1.  The one formula: docs/daemon.md,
 * "Retries", says the same.
 */
int64_t backoff_job_delay(int64_t base_ms, int64_t max_ms, int attempt,
			  double rnd);

/* Full jitter: a delay uniform in [0, min(max, base * 2^n)). */
int64_t backoff_full_jitter(int64_t base_ms, int64_t max_ms, int n, double rnd);

/*
 * What a statement run under a time limit (statement_timeout) cost, for
 * pacing the next one: its whole limit when the server stopped it
 * (stopped), its round trip when that came within the limit, and -1 (not
 * known) when the answer came later than the limit without a stop: the
 * delay was the network's (a partition, a frozen proxy), and pacing by it
 * would put the next one minutes away.  The worker's sweep and its read
 * of the queue depths come 50 costs apart.
 */
int64_t backoff_limited_cost(int64_t took_ms, int64_t limit_ms, int stopped);

/*
 * What a worker says when a statement under a time limit was stopped for
 * the stops-th time in a row (stops >= 1), its last warning of it at
 * warned_ms (0: none yet) and now at now_ms: one stop is an info line
 * (a machine turned busy at once can make one statement slow), a second
 * in a row a warning, every ten minutes at most, nothing between.
 */
enum backoff_say { BACKOFF_SAY_NOTHING, BACKOFF_SAY_INFO, BACKOFF_SAY_WARN };
enum backoff_say backoff_stop_say(int stops, int64_t warned_ms, int64_t now_ms);

/* A uniform double in [0, 1) from a per-process generator. */
double backoff_random(void);

#endif
