/*
 * trace: checking a traceparent and making an attempt's.
 */
#include "common/trace.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static bool
lowhex(const char *s, int n, bool nonzero)
{
	bool any = false;
	for (int i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return false;
		any |= c != '0';
	}
	return any || !nonzero;
}

bool
trace_valid(const char *tp)
{
	return tp && strlen(tp) == TRACE_LEN && strncmp(tp, "00-", 3) == 0 &&
	       lowhex(tp + 3, 32, true) && tp[35] == '-' &&
	       lowhex(tp + 36, 16, true) && tp[52] == '-' &&
	       lowhex(tp + 53, 2, false);
}

/*
 * 8 random bytes, never all zero (an invalid span id): splitmix64 over a
 * state seeded from getrandom() once per process and thread (seeded again
 * in a child after fork(), by its pid: a child must not repeat its
 * parent's ids).  A getrandom() call per id was a system call per job
 * (the attempt's id is made for every job in a trace, exported or not):
 * about a tenth of a worker's CPU with jobs in traces (2026-12-07).
 * OpenTelemetry's SDKs make span ids with a fast generator too.
 */
static uint64_t
span_id(void)
{
	static _Thread_local uint64_t state;
	static _Thread_local pid_t seeded_by;
	pid_t pid = getpid();
	if (seeded_by != pid) {
		uint64_t seed = 0;
		if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) !=
		    (ssize_t)sizeof(seed)) {
			/* No entropy yet (early boot): unique enough. */
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			seed = ((uint64_t)ts.tv_sec * 1000000007u) ^
			       (uint64_t)ts.tv_nsec ^
			       ((uint64_t)(uintptr_t)&ts << 17);
		}
		state = seed ^ ((uint64_t)pid << 32);
		seeded_by = pid;
	}
	state += 0x9e3779b97f4a7c15u;
	uint64_t v = state;
	v = (v ^ (v >> 30)) * 0xbf58476d1ce4e5b9u;
	v = (v ^ (v >> 27)) * 0x94d049bb133111ebu;
	v ^= v >> 31;
	return v ? v : 1;
}

bool
trace_attempt(const char *stored, char out[TRACE_LEN + 1])
{
	out[0] = '\0';
	if (!trace_valid(stored))
		return false;
	snprintf(out, TRACE_LEN + 1, "00-%.32s-%016llx-%.2s", stored + 3,
		 (unsigned long long)span_id(), stored + 53);
	return true;
}

void
trace_span_id(char out[17])
{
	snprintf(out, 17, "%016llx", (unsigned long long)span_id());
}

/* splitmix64's finaliser: every bit of x moves about half of the result. */
static uint64_t
mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15u;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
	return x ^ (x >> 31);
}

void
trace_enqueue_span_id(const char *trace, int64_t job_id, char out[17])
{
	char half[17];
	snprintf(half, sizeof(half), "%.16s", trace);
	uint64_t hi = strtoull(half, NULL, 16);
	snprintf(half, sizeof(half), "%.16s", trace + 16);
	uint64_t lo = strtoull(half, NULL, 16);
	uint64_t v = mix(mix(hi ^ mix(lo)) ^ (uint64_t)job_id);
	snprintf(out, 17, "%016llx", (unsigned long long)(v ? v : 1));
}
