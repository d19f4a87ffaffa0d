/*
 * The benchmarks' no-op plugin.  Like the example plugin it finishes every
 * job at once, and when $LAT_START_LOG names a file it appends
 * "S <seq> <CLOCK_REALTIME us>" for each job whose payload has a "seq": the
 * handler-start stamps that ../shared/bench/peers/harness.sh reads for its
 * wake-up latency figures.  A payload with "fail_first" fails its first
 * attempt (retried at once) and finishes the second: the suite's row for
 * the attempt history at work (docs/performance.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <pgjobd/plugin.h>

static int
bench_init(const char *config_json, void **state)
{
	const char *path = getenv("LAT_START_LOG");
	*state = path && *path ? fopen(path, "a") : NULL;
	return 0;
}

static void
bench_fini(void *state)
{
	if (state)
		fclose(state);
}

static enum pgjobd_outcome
bench_run(void *state, const struct pgjobd_job *job, struct pgjobd_result *out)
{
	const char *seq = state ? strstr(job->payload, "\"seq\":") : NULL;
	if (seq) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		fprintf(state, "S %ld %lld\n", strtol(seq + 6, NULL, 10),
			(long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000);
		fflush(state);
	}
	if (job->attempt == 1 && strstr(job->payload, "\"fail_first\"")) {
		out->error = strdup("failing on purpose: the first attempt");
		out->retry_in_ms = 0;
		return PGJOBD_RETRY;
	}
	return PGJOBD_DONE;
}

const struct pgjobd_plugin pgjobd_bench = {
	.abi_version = PGJOBD_PLUGIN_ABI,
	.name = "bench",
	.init = bench_init,
	.fini = bench_fini,
	.run = bench_run,
};
