/*
 * backoff: retry delays for failed jobs, worker restarts and reconnects.
 */
#include "common/backoff.h"

#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* min(max, base * 2^n) without overflow. */
static int64_t
capped(int64_t base_ms, int64_t max_ms, int n)
{
	int64_t d = base_ms > 0 ? base_ms : 1;
	for (int i = 0; i < n && d < max_ms; i++)
		d *= 2;
	return d < max_ms ? d : max_ms;
}

int64_t
backoff_job_delay(int64_t base_ms, int64_t max_ms, int attempt, double rnd)
{
	int64_t d = capped(base_ms, max_ms, attempt > 1 ? attempt - 1 : 0);
	/* The jitter comes off, so that max holds and jobs that reached it
	 * together still spread out. */
	return d - (int64_t)((double)d * 0.25 * rnd);
}

int64_t
backoff_full_jitter(int64_t base_ms, int64_t max_ms, int n, double rnd)
{
	return (int64_t)((double)capped(base_ms, max_ms, n) * rnd);
}

int64_t
backoff_limited_cost(int64_t took_ms, int64_t limit_ms, int stopped)
{
	if (stopped)
		return limit_ms;
	return took_ms <= limit_ms ? took_ms : -1;
}

enum backoff_say
backoff_stop_say(int stops, int64_t warned_ms, int64_t now_ms)
{
	if (stops < 2)
		return BACKOFF_SAY_INFO;
	if (warned_ms && now_ms - warned_ms < 600000)
		return BACKOFF_SAY_NOTHING;
	return BACKOFF_SAY_WARN;
}

double
backoff_random(void)
{
	static unsigned short seed[3];
	static int seeded;
	if (!seeded) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		seed[0] = (unsigned short)getpid();
		seed[1] = (unsigned short)ts.tv_nsec;
		seed[2] = (unsigned short)(ts.tv_nsec >> 16);
		seeded = 1;
	}
	return erand48(seed);
}
