/*
 * stats: the shared counters, written by the workers (see stats.h); the
 * supervisor renders them as Prometheus text in src/daemon/prom.c.
 */
#include "common/stats.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "common/log.h"
#include "common/metrics.h"

const double stats_bounds[STATS_BUCKETS] = {
	0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 60};

/* From 1 MiB to 8 GiB: small scripts to big converters. */
const double stats_rss_bounds[STATS_BUCKETS] = {
	1 << 20,	  4 << 20,	    16 << 20,	      32 << 20,
	64 << 20,	  128 << 20,	    256 << 20,	      512 << 20,
	1024.0 * 1048576, 2048.0 * 1048576, 4096.0 * 1048576, 8192.0 * 1048576};
const double stats_wait_bounds[STATS_WAIT_BUCKETS] = {
	0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600, 14400, 86400};

/* The names of the places of struct stats_queue's waiting[] and of struct
 * stats_health's arrays, as /metrics labels them. */
const char *const stats_limit_names[STATS_LIMITS] = {
	"paused", "throttled", "concurrency", "rate", "key_concurrency",
};

const char *const stats_trace_reasons[STATS_TRACE_REASONS] = {
	"connect", "timeout", "status", "other"};

const char *const stats_health_kinds[STATS_HEALTH_KINDS] = {
	"backend", "replication_slot", "prepared_xact"};

/* Whole seconds, rounded up (no libm: the core links without it). */
static double
ceil_s(double x)
{
	double t = (double)(long long)x;
	return t < x ? t + 1 : t;
}

size_t
stats_dur_bounds(double max_timeout_s, double *b)
{
	double last = stats_bounds[STATS_BUCKETS - 1];
	memcpy(b, stats_bounds, sizeof(stats_bounds));
	if (!(max_timeout_s > last))
		return STATS_BUCKETS;
	double top = ceil_s(max_timeout_s > 1e9 ? 1e9 : max_timeout_s);
	/* As many steps of at least 2x as fit in top / last, 1 to 4
	 * (floor(log2(top / last)), clamped); then the ratio r of each
	 * step, r^extra = top / last (by bisection). */
	int extra = 1;
	for (double x = last * 4; x <= top && extra < 4; x *= 2)
		extra++;
	double lo = 1, hi = top / last;
	for (int k = 0; k < 64; k++) {
		double r = (lo + hi) / 2, p = 1;
		for (int i = 0; i < extra; i++)
			p *= r;
		*(p < top / last ? &lo : &hi) = r;
	}
	double x = last;
	for (int i = 0; i < extra; i++) {
		x *= hi;
		b[STATS_BUCKETS + i] = i == extra - 1 ? top : ceil_s(x);
	}
	return STATS_BUCKETS + (size_t)extra;
}

struct stats *
stats_create(void)
{
	void *p = mmap(NULL, sizeof(struct stats), PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		log_error("cannot map the metrics area");
		return NULL;
	}
	return p;
}

void
stats_destroy(struct stats *s)
{
	if (s)
		munmap(s, sizeof(*s));
}

struct stats_kind *
stats_kind(struct stats_worker *w, const char *kind, const char *queue)
{
	uint32_t n = __atomic_load_n(&w->nkinds, __ATOMIC_ACQUIRE);
	for (uint32_t i = 0; i < n; i++)
		if (strcmp(w->kinds[i].kind, kind) == 0 &&
		    strcmp(w->kinds[i].queue, queue) == 0)
			return &w->kinds[i];
	if (n >= STATS_MAX_KINDS)
		return NULL;
	struct stats_kind *k = &w->kinds[n];
	snprintf(k->kind, sizeof(k->kind), "%s", kind);
	snprintf(k->queue, sizeof(k->queue), "%s", queue);
	/* Publish the names before the count that makes them visible. */
	__atomic_store_n(&w->nkinds, n + 1, __ATOMIC_RELEASE);
	return k;
}

/* Counts us microseconds into a histogram of the n bounds b (seconds). */
static void
observe(const double *b, size_t n, uint64_t *buckets, uint64_t *count,
	uint64_t *sum_us, int64_t us)
{
	size_t i = metrics_bucket(b, n, (double)us / 1e6);
	if (i < n)
		stats_add(&buckets[i], 1);
	stats_add(count, 1);
	stats_add(sum_us, us > 0 ? (uint64_t)us : 0);
}

void
stats_observe(uint64_t *buckets, uint64_t *count, uint64_t *sum_us, int64_t us)
{
	observe(stats_bounds, STATS_BUCKETS, buckets, count, sum_us, us);
}

void
stats_observe_usage(struct stats_kind *k, int64_t cpu_ms, int64_t max_rss_kb)
{
	if (cpu_ms >= 0)
		stats_add(&k->cpu_ms, (uint64_t)cpu_ms);
	if (max_rss_kb < 0)
		return;
	size_t b = metrics_bucket(stats_rss_bounds, STATS_BUCKETS,
				  (double)max_rss_kb * 1024.);
	if (b < STATS_BUCKETS)
		stats_add(&k->rss[b], 1);
	stats_add(&k->rss_count, 1);
	stats_add(&k->rss_sum_kb, (uint64_t)max_rss_kb);
}

const double *
stats_dur_bounds_of(const struct stats *s, size_t *n)
{
	uint32_t m = s ? __atomic_load_n(&s->ndur_bounds, __ATOMIC_ACQUIRE) : 0;
	if (m == 0 || m > STATS_DUR_BUCKETS) {
		*n = STATS_BUCKETS;
		return stats_bounds;
	}
	*n = m;
	return s->dur_bounds;
}

void
stats_observe_dur(const struct stats *s, struct stats_kind *k, int64_t us)
{
	size_t n;
	const double *b = stats_dur_bounds_of(s, &n);
	observe(b, n, k->dur, &k->dur_count, &k->dur_sum_us, us);
}

void
stats_observe_wait(struct stats_kind *k, int64_t us)
{
	observe(stats_wait_bounds, STATS_WAIT_BUCKETS, k->wait, &k->wait_count,
		&k->wait_sum_us, us);
}

void
stats_worker_gone(struct stats *s, int index)
{
	if (!s || index < 0 || index >= STATS_MAX_WORKERS)
		return;
	struct stats_worker *w = &s->w[index];
	__atomic_store_n(&w->pid, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&w->slot, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&w->connected, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&w->tasks_held, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&s->claim_behind[index], 0, __ATOMIC_RELAXED);
}

int
stats_healthy(const struct stats *s, const int *idx, const int *number, int n,
	      int64_t stale_ms, char *why, size_t len)
{
	int64_t now = util_now_ms();
	for (int i = 0; i < n; i++) {
		if (idx[i] < 0 || idx[i] >= STATS_MAX_WORKERS)
			continue;
		const struct stats_worker *w = &s->w[idx[i]];
		int slot = __atomic_load_n(&w->slot, __ATOMIC_RELAXED);
		int up = __atomic_load_n(&w->connected, __ATOMIC_RELAXED);
		int64_t ok = __atomic_load_n(&w->last_ok_ms, __ATOMIC_RELAXED);
		if (slot <= 0 || !up) {
			snprintf(why, len,
				 "worker %d holds no slot or has no "
				 "connection\n",
				 number[i]);
			return 0;
		}
		if (now - ok > stale_ms) {
			snprintf(why, len,
				 "worker %d (slot %d) has not reached the "
				 "database for %lld ms\n",
				 number[i], slot, (long long)(now - ok));
			return 0;
		}
	}
	snprintf(why, len, "ok: %d workers hold slots\n", n);
	return 1;
}

void
stats_claim_behind(struct stats *s, int index, int be_pid, long long room)
{
	if (index < 0 || index >= STATS_MAX_WORKERS)
		return;
	if (room > 0xffffffffLL)
		room = 0xffffffffLL;
	uint64_t v = be_pid > 0 && room > 0
			     ? (uint64_t)(uint32_t)be_pid | (uint64_t)room << 32
			     : 0;
	__atomic_store_n(&s->claim_behind[index], v, __ATOMIC_RELEASE);
}

int
stats_notify_behind(const struct stats *s, int be_pid, long long due)
{
	if (be_pid <= 0)
		return 0;
	for (int i = 0; i < STATS_MAX_WORKERS; i++) {
		uint64_t v =
			__atomic_load_n(&s->claim_behind[i], __ATOMIC_ACQUIRE);
		if (v && (uint32_t)v == (uint32_t)be_pid)
			return (long long)(v >> 32) >= due;
	}
	return 0;
}

int
stats_notify_take(struct stats *s, uint64_t xid, int be_pid, long long due,
		  long long room)
{
	const uint64_t mask = (1ULL << 48) - 1;
	/* Mixed so that neither half alone picks the slot. */
	uint64_t key =
		(xid ^ ((uint64_t)(uint32_t)be_pid * 0x9e3779b97f4a7c15ULL)) &
		mask;
	uint64_t *slot = &s->notify_ring[key % STATS_NOTIFY_RING];
	uint64_t old = __atomic_load_n(slot, __ATOMIC_ACQUIRE);

	if (room <= 0)
		return 1;
	for (;;) {
		uint64_t taken = (old & mask) == key ? old >> 48 : 0;
		if ((long long)taken * room >= due || taken == 0xffff)
			return 0;
		uint64_t next = key | (taken + 1) << 48;
		if (__atomic_compare_exchange_n(slot, &old, next, 0,
						__ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE))
			return 1;
	}
}
