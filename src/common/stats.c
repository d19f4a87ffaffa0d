/*
 * stats: shared counters and their Prometheus rendering.
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

/* The handler duration bounds in force: s's, or stats_bounds. */
static const double *
dur_bounds(const struct stats *s, size_t *n)
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
	const double *b = dur_bounds(s, &n);
	observe(b, n, k->dur, &k->dur_count, &k->dur_sum_us, us);
}

void
stats_observe_wait(struct stats_kind *k, int64_t us)
{
	observe(stats_wait_bounds, STATS_WAIT_BUCKETS, k->wait, &k->wait_count,
		&k->wait_sum_us, us);
}

static uint64_t
ld(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

/* The (kind, queue) pairs of all workers, summed, in first-seen order. */
struct sum {
	const char *kind, *queue;
	struct stats_kind t;
};

static size_t
sum_kinds(const struct stats *s, int n, struct sum *out, size_t max)
{
	size_t m = 0;
	for (int i = 0; i < n; i++) {
		const struct stats_worker *w = &s->w[i];
		uint32_t nk = __atomic_load_n(&w->nkinds, __ATOMIC_ACQUIRE);
		for (uint32_t k = 0; k < nk; k++) {
			const struct stats_kind *x = &w->kinds[k];
			size_t j = 0;
			while (j < m && (strcmp(out[j].kind, x->kind) ||
					 strcmp(out[j].queue, x->queue)))
				j++;
			if (j == m) {
				if (m == max)
					continue;
				memset(&out[m], 0, sizeof(out[m]));
				out[m].kind = x->kind;
				out[m].queue = x->queue;
				m++;
			}
			struct stats_kind *t = &out[j].t;
			t->claimed += ld(&x->claimed);
			t->done += ld(&x->done);
			t->retried += ld(&x->retried);
			t->dead += ld(&x->dead);
			t->lost += ld(&x->lost);
			for (int b = 0; b < STATS_DUR_BUCKETS; b++)
				t->dur[b] += ld(&x->dur[b]);
			t->dur_count += ld(&x->dur_count);
			t->dur_sum_us += ld(&x->dur_sum_us);
			/* What attempts used. */
			t->cpu_ms += ld(&x->cpu_ms);
			for (int b = 0; b < STATS_BUCKETS; b++)
				t->rss[b] += ld(&x->rss[b]);
			t->rss_count += ld(&x->rss_count);
			t->rss_sum_kb += ld(&x->rss_sum_kb);
			t->timed_out += ld(&x->timed_out);
			for (int b = 0; b < STATS_WAIT_BUCKETS; b++)
				t->wait[b] += ld(&x->wait[b]);
			t->wait_count += ld(&x->wait_count);
			t->wait_sum_us += ld(&x->wait_sum_us);
		}
	}
	return m;
}

/* What attempts used, per kind and queue; l is a scratch buffer. */
static void
render_usage(struct buf *out, const struct sum *k, size_t m, struct buf *l)
{
	metrics_header(out, "pgjobd_handler_cpu_seconds_total", "counter",
		       "CPU time (user and system) of the attempts that "
		       "measured it: an exec handler's command, a plugin's "
		       "call.");
	for (size_t j = 0; j < m; j++) {
		buf_reset(l);
		metrics_label(l, "kind", k[j].kind);
		metrics_label(l, "queue", k[j].queue);
		metrics_counter(out, "pgjobd_handler_cpu_seconds_total", NULL,
				l->data, (double)k[j].t.cpu_ms / 1e3);
	}
	metrics_header(out, "pgjobd_handler_max_rss_bytes", "histogram",
		       "Peak resident set size of each exec handler attempt.");
	for (size_t j = 0; j < m; j++) {
		buf_reset(l);
		metrics_label(l, "kind", k[j].kind);
		metrics_label(l, "queue", k[j].queue);
		metrics_histogram(
			out, "pgjobd_handler_max_rss_bytes", NULL, l->data,
			stats_rss_bounds, k[j].t.rss, STATS_BUCKETS,
			(double)k[j].t.rss_sum_kb * 1024., k[j].t.rss_count);
	}
}

static void
render_jobs(struct buf *out, const struct stats *s, const struct sum *k,
	    size_t m)
{
	size_t nb;
	const double *bounds = dur_bounds(s, &nb);
	static const struct {
		const char *name, *help;
		size_t off;
	} c[] = {
		{"pgjobd_jobs_claimed_total", "Jobs claimed.",
		 offsetof(struct stats_kind, claimed)},
		{"pgjobd_jobs_done_total", "Jobs finished done.",
		 offsetof(struct stats_kind, done)},
		{"pgjobd_jobs_retried_total", "Failed attempts set to retry.",
		 offsetof(struct stats_kind, retried)},
		{"pgjobd_jobs_dead_total", "Jobs that ended dead.",
		 offsetof(struct stats_kind, dead)},
		{"pgjobd_jobs_lost_lease_total",
		 "Attempts whose lease was lost: found at a renewal, or an end "
		 "the database refused.",
		 offsetof(struct stats_kind, lost)},
		{"pgjobd_jobs_timed_out_total",
		 "Failed attempts that the handler's timeout ended (also "
		 "counted in retried or dead).",
		 offsetof(struct stats_kind, timed_out)},
	};
	struct buf l = {0};
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		metrics_header(out, c[i].name, "counter", c[i].help);
		for (size_t j = 0; j < m; j++) {
			buf_reset(&l);
			metrics_label(&l, "kind", k[j].kind);
			metrics_label(&l, "queue", k[j].queue);
			const uint64_t *v =
				(const uint64_t *)((const char *)&k[j].t +
						   c[i].off);
			metrics_counter(out, c[i].name, NULL, l.data,
					(double)*v);
		}
	}
	metrics_header(out, "pgjobd_handler_duration_seconds", "histogram",
		       "Handler run time per attempt.");
	for (size_t j = 0; j < m; j++) {
		buf_reset(&l);
		metrics_label(&l, "kind", k[j].kind);
		metrics_label(&l, "queue", k[j].queue);
		metrics_histogram(out, "pgjobd_handler_duration_seconds", NULL,
				  l.data, bounds, k[j].t.dur, nb,
				  (double)k[j].t.dur_sum_us / 1e6,
				  k[j].t.dur_count);
	}
	render_usage(out, k, m, &l);
	buf_free(&l);
}

static void
render_workers(struct buf *out, const struct stats *s, int n, int configured)
{
	struct stats_worker t = {0};
	int slots = 0;
	uint64_t tasks = 0;
	for (int i = 0; i < n; i++) {
		const struct stats_worker *w = &s->w[i];
		slots += __atomic_load_n(&w->slot, __ATOMIC_RELAXED) > 0 &&
			 __atomic_load_n(&w->connected, __ATOMIC_RELAXED);
		tasks += (uint64_t)__atomic_load_n(&w->tasks_held,
						   __ATOMIC_RELAXED);
		t.reconnects += ld(&w->reconnects);
		for (int b = 0; b < STATS_BUCKETS; b++)
			t.claim[b] += ld(&w->claim[b]);
		t.claim_count += ld(&w->claim_count);
		t.claim_sum_us += ld(&w->claim_sum_us);
	}
	metrics_histogram(out, "pgjobd_claim_seconds",
			  "Claim statement round-trip time.", NULL,
			  stats_bounds, t.claim, STATS_BUCKETS,
			  (double)t.claim_sum_us / 1e6, t.claim_count);
	metrics_counter(out, "pgjobd_worker_restarts_total",
			"Workers the supervisor restarted.", NULL,
			(double)ld(&s->worker_restarts));
	metrics_counter(out, "pgjobd_reconnects_total",
			"Database connections lost and made again.", NULL,
			(double)t.reconnects);
	metrics_gauge(out, "pgjobd_workers", "Worker processes configured.",
		      NULL, configured);
	metrics_gauge(out, "pgjobd_slots_held",
		      "Workers holding a slot on a live connection.", NULL,
		      slots);
	metrics_gauge(out, "pgjobd_tasks_held",
		      "Leased task partitions held by this instance.", NULL,
		      (double)tasks);
}

/* The queue gauges: one family per column of struct stats_queue. */
static const struct {
	const char *name, *help;
	size_t off; /* of an int64_t in struct stats_queue */
	double scale;
	int mine; /* 1: not for "(other)", the sum of the others' queues */
} queue_gauges[] = {
	{"pgjobd_queue_due", "Available jobs that are due, per queue.",
	 offsetof(struct stats_queue, due), 1, 0},
	{"pgjobd_queue_running", "Running jobs, per queue, across the cluster.",
	 offsetof(struct stats_queue, running), 1, 0},
	{"pgjobd_queue_oldest_due_seconds",
	 "Age of the oldest due job, per queue.",
	 offsetof(struct stats_queue, oldest_due_ms), 1e-3, 0},
	/* Scheduled and unhandled jobs. */
	{"pgjobd_queue_scheduled",
	 "Available jobs not due yet (run_at in the future), per queue.",
	 offsetof(struct stats_queue, scheduled), 1, 0},
	{"pgjobd_queue_unhandled",
	 "Available jobs of kinds this instance's config has no handler for, "
	 "per queue.",
	 offsetof(struct stats_queue, unhandled), 1, 1},
};

const char *const stats_limit_names[STATS_LIMITS] = {
	"paused", "throttled", "concurrency", "rate", "key_concurrency",
};

/* The flow-control gauges of the limited queues (docs/queues.md). */
static void
render_flow(struct buf *out, const struct stats *s, uint32_t n)
{
	struct buf l = {0};
	metrics_header(out, "pgjobd_queue_paused", "gauge",
		       "1 while the queue is paused (pgjob pause).");
	for (uint32_t i = 0; i < n; i++) {
		if (!s->queues[i].limited)
			continue;
		buf_reset(&l);
		metrics_label(&l, "queue", s->queues[i].name);
		metrics_gauge(out, "pgjobd_queue_paused", NULL, l.data,
			      (double)s->queues[i].paused);
	}
	metrics_header(out, "pgjobd_queue_waiting", "gauge",
		       "Due jobs held back, per queue and by the limit that "
		       "holds them.");
	for (uint32_t i = 0; i < n; i++) {
		if (!s->queues[i].limited)
			continue;
		for (int k = 0; k < STATS_LIMITS; k++) {
			buf_reset(&l);
			metrics_label(&l, "queue", s->queues[i].name);
			metrics_label(&l, "limit", stats_limit_names[k]);
			metrics_gauge(out, "pgjobd_queue_waiting", NULL, l.data,
				      (double)s->queues[i].waiting[k]);
		}
	}
	metrics_header(out, "pgjobd_queue_tokens", "gauge",
		       "Tokens left in the rate limit's bucket, per queue.");
	for (uint32_t i = 0; i < n; i++) {
		if (!s->queues[i].limited || s->queues[i].tokens_milli < 0)
			continue;
		buf_reset(&l);
		metrics_label(&l, "queue", s->queues[i].name);
		metrics_gauge(out, "pgjobd_queue_tokens", NULL, l.data,
			      (double)s->queues[i].tokens_milli / 1000.);
	}
	buf_free(&l);
}

static void
render_queues(struct buf *out, const struct stats *s)
{
	uint32_t n = __atomic_load_n(&s->nqueues, __ATOMIC_ACQUIRE);
	struct buf l = {0};
	for (size_t g = 0; g < sizeof(queue_gauges) / sizeof(*queue_gauges);
	     g++) {
		metrics_header(out, queue_gauges[g].name, "gauge",
			       queue_gauges[g].help);
		for (uint32_t i = 0; i < n; i++) {
			const int64_t *v =
				(const int64_t *)((const char *)&s->queues[i] +
						  queue_gauges[g].off);
			if (queue_gauges[g].mine && s->queues[i].other)
				continue;
			buf_reset(&l);
			metrics_label(&l, "queue", s->queues[i].name);
			metrics_gauge(out, queue_gauges[g].name, NULL, l.data,
				      (double)*v * queue_gauges[g].scale);
		}
	}
	buf_free(&l);
	render_flow(out, s, n);
}

/* The workflow series, once a worker has read them. */
static void
render_workflows(struct buf *out, const struct stats *s)
{
	if (!__atomic_load_n(&s->workflows_at_ms, __ATOMIC_ACQUIRE))
		return;
	int64_t run = __atomic_load_n(&s->workflows_running, __ATOMIC_RELAXED);
	int64_t done = __atomic_load_n(&s->workflows_done, __ATOMIC_RELAXED);
	int64_t failed =
		__atomic_load_n(&s->workflows_failed, __ATOMIC_RELAXED);
	metrics_gauge(out, "pgjobd_workflows_running",
		      "Workflows with a step that has not ended.", NULL,
		      (double)run);
	metrics_counter(out, "pgjobd_workflows_started_total",
			"Workflows enqueued (running, done and failed).", NULL,
			(double)(run + done + failed));
	metrics_counter(out, "pgjobd_workflows_done_total",
			"Workflows whose every step ended done.", NULL,
			(double)done);
	metrics_counter(out, "pgjobd_workflows_failed_total",
			"Workflows that ended with a step dead or cancelled.",
			NULL, (double)failed);
}

/* --- the database health guard (worker/health.c writes it) ------------ */

const char *const stats_health_kinds[STATS_HEALTH_KINDS] = {
	"backend", "replication_slot", "prepared_xact"};

/*
 * The health series, while the worker of this instance that holds the
 * pgjob:health lease keeps them fresh.  The figures are read without a
 * lock: a scrape during a write may mix two readings, each of them real.
 */
static void
render_health(struct buf *out, const struct stats *s)
{
	const struct stats_health *h = &s->health;
	int64_t at = __atomic_load_n(&h->at_ms, __ATOMIC_ACQUIRE);
	if (!at ||
	    util_now_ms() > __atomic_load_n(&h->valid_ms, __ATOMIC_RELAXED))
		return;
	struct buf l = {0};
	static const struct {
		const char *name, *help;
		double scale;
		int xids;
	} ages[] = {
		{"pgjobd_db_xmin_horizon_age_seconds",
		 "Age of the oldest holder of the xmin horizon of each kind "
		 "(0: none); a slot's counts from when pgjobd first saw it.",
		 1e-3, 0},
		{"pgjobd_db_xmin_horizon_age_xids",
		 "Age in transactions of the xmin the oldest holder of each "
		 "kind holds (0: none).",
		 1, 1},
	};
	for (size_t g = 0; g < sizeof(ages) / sizeof(ages[0]); g++) {
		metrics_header(out, ages[g].name, "gauge", ages[g].help);
		for (int k = 0; k < STATS_HEALTH_KINDS; k++) {
			int64_t v = __atomic_load_n(
				ages[g].xids ? &h->xmin_age_xids[k]
					     : &h->xmin_age_ms[k],
				__ATOMIC_RELAXED);
			buf_reset(&l);
			metrics_label(&l, "holder", stats_health_kinds[k]);
			metrics_gauge(out, ages[g].name, NULL, l.data,
				      v < 0 ? 0 : (double)v * ages[g].scale);
		}
	}
	uint32_t nt = __atomic_load_n(&h->ntables, __ATOMIC_ACQUIRE);
	uint32_t ni = __atomic_load_n(&h->nindexes, __ATOMIC_ACQUIRE);
	metrics_header(
		out, "pgjobd_db_dead_tuples", "gauge",
		"Dead tuples of each pgjob table (pg_stat_user_tables).");
	for (uint32_t i = 0; i < nt && i < STATS_HEALTH_TABLES; i++) {
		buf_reset(&l);
		metrics_label(&l, "table", h->tables[i].name);
		metrics_gauge(out, "pgjobd_db_dead_tuples", NULL, l.data,
			      (double)h->tables[i].dead);
	}
	metrics_header(
		out, "pgjobd_db_last_vacuum_age_seconds", "gauge",
		"Seconds since the last vacuum or autovacuum of each "
		"pgjob table; -1: none since the statistics were reset.");
	for (uint32_t i = 0; i < nt && i < STATS_HEALTH_TABLES; i++) {
		int64_t v = h->tables[i].vacuum_ms;
		buf_reset(&l);
		metrics_label(&l, "table", h->tables[i].name);
		metrics_gauge(out, "pgjobd_db_last_vacuum_age_seconds", NULL,
			      l.data, v < 0 ? -1 : (double)v / 1e3);
	}
	metrics_header(out, "pgjobd_db_index_bloat_ratio", "gauge",
		       "Estimated share (0 to 1) of each pgjob b-tree index's "
		       "pages that its entries do not need.");
	for (uint32_t i = 0; i < ni && i < STATS_HEALTH_INDEXES; i++) {
		buf_reset(&l);
		metrics_label(&l, "index", h->indexes[i].name);
		metrics_gauge(out, "pgjobd_db_index_bloat_ratio", NULL, l.data,
			      (double)h->indexes[i].bloat_milli / 1e3);
	}
	buf_free(&l);
}

/* --- time in queue, dead jobs, schedules, the database ----------------
 * ----------------------------------------------------- */

/* Time in queue per queue: the (kind, queue) sums added up by queue. */
static void
render_wait(struct buf *out, const struct sum *k, size_t m)
{
	struct buf l = {0};
	metrics_header(out, "pgjobd_job_queue_wait_seconds", "histogram",
		       "Time from a job's run_at to its claim, per queue.");
	for (size_t j = 0; j < m; j++) {
		size_t first = 0;
		while (strcmp(k[first].queue, k[j].queue))
			first++;
		if (first < j)
			continue; /* its queue was rendered at first */
		struct stats_kind t = k[j].t;
		for (size_t o = j + 1; o < m; o++) {
			if (strcmp(k[o].queue, k[j].queue))
				continue;
			for (int b = 0; b < STATS_WAIT_BUCKETS; b++)
				t.wait[b] += k[o].t.wait[b];
			t.wait_count += k[o].t.wait_count;
			t.wait_sum_us += k[o].t.wait_sum_us;
		}
		buf_reset(&l);
		metrics_label(&l, "queue", k[j].queue);
		metrics_histogram(out, "pgjobd_job_queue_wait_seconds", NULL,
				  l.data, stats_wait_bounds, t.wait,
				  STATS_WAIT_BUCKETS,
				  (double)t.wait_sum_us / 1e6, t.wait_count);
	}
	buf_free(&l);
}

static void
render_dead_and_schedules(struct buf *out, const struct stats *s)
{
	struct buf l = {0};
	uint32_t n = __atomic_load_n(&s->ndead, __ATOMIC_ACQUIRE);
	uint32_t nq = __atomic_load_n(&s->nqueues, __ATOMIC_ACQUIRE);
	metrics_header(out, "pgjobd_queue_dead", "gauge",
		       "Dead jobs, per queue (counted once a minute, and after "
		       "a job of this instance died).");
	for (uint32_t i = 0; i < n; i++) {
		buf_reset(&l);
		metrics_label(&l, "queue", s->dead[i].name);
		metrics_gauge(out, "pgjobd_queue_dead", NULL, l.data,
			      (double)s->dead[i].n);
	}
	/* The queues of the depths without dead jobs: 0, once counted, so
	 * that an alert sees the series start from 0. */
	for (uint32_t i = 0; i < nq && s->dead_at_ms; i++) {
		uint32_t j = 0;
		while (j < n && strcmp(s->dead[j].name, s->queues[i].name))
			j++;
		if (j < n)
			continue;
		buf_reset(&l);
		metrics_label(&l, "queue", s->queues[i].name);
		metrics_gauge(out, "pgjobd_queue_dead", NULL, l.data, 0);
	}
	n = __atomic_load_n(&s->nschedules, __ATOMIC_ACQUIRE);
	metrics_header(out, "pgjobd_schedule_last_tick_timestamp_seconds",
		       "gauge", "The last tick a schedule enqueued.");
	for (uint32_t i = 0; i < n; i++) {
		buf_reset(&l);
		metrics_label(&l, "schedule", s->schedules[i].name);
		metrics_gauge(
			out, "pgjobd_schedule_last_tick_timestamp_seconds",
			NULL, l.data, (double)s->schedules[i].last_tick_s);
	}
	metrics_header(out, "pgjobd_schedule_next_tick_timestamp_seconds",
		       "gauge",
		       "The tick after a schedule's last one, by its cron.");
	for (uint32_t i = 0; i < n; i++) {
		if (!s->schedules[i].next_tick_s)
			continue;
		buf_reset(&l);
		metrics_label(&l, "schedule", s->schedules[i].name);
		metrics_gauge(
			out, "pgjobd_schedule_next_tick_timestamp_seconds",
			NULL, l.data, (double)s->schedules[i].next_tick_s);
	}
	buf_free(&l);
}

/* Jobs no live worker serves, per queue: like the dead jobs, each queue
 * of the depths at 0 once counted, so that an alert sees it start. */
static void
render_unserved(struct buf *out, const struct stats *s)
{
	struct buf l = {0};
	uint32_t n = __atomic_load_n(&s->nunserved, __ATOMIC_ACQUIRE);
	uint32_t nq = __atomic_load_n(&s->nqueues, __ATOMIC_ACQUIRE);
	metrics_header(out, "pgjobd_queue_unserved", "gauge",
		       "Available jobs whose kind and queue no live worker "
		       "serves, per queue (counted once a minute).");
	for (uint32_t i = 0; i < n; i++) {
		buf_reset(&l);
		metrics_label(&l, "queue", s->unserved[i].name);
		metrics_gauge(out, "pgjobd_queue_unserved", NULL, l.data,
			      (double)s->unserved[i].n);
	}
	for (uint32_t i = 0; i < nq && s->unserved_at_ms; i++) {
		uint32_t j = 0;
		while (j < n && strcmp(s->unserved[j].name, s->queues[i].name))
			j++;
		if (j < n)
			continue;
		buf_reset(&l);
		metrics_label(&l, "queue", s->queues[i].name);
		metrics_gauge(out, "pgjobd_queue_unserved", NULL, l.data, 0);
	}
	buf_free(&l);
}

static void
render_monitoring(struct buf *out, const struct stats *s, int n,
		  const struct sum *k, size_t m)
{
	uint64_t fails = 0, crashes = 0;
	int up = 0;
	for (int i = 0; i < n; i++) {
		fails += ld(&s->w[i].connect_failures);
		crashes += ld(&s->w[i].process_crashes);
		up |= __atomic_load_n(&s->w[i].connected, __ATOMIC_RELAXED);
	}
	render_wait(out, k, m);
	render_dead_and_schedules(out, s);
	render_unserved(out, s);
	metrics_counter(out, "pgjobd_db_connect_failures_total",
			"Attempts to connect to the database (and start a "
			"session) that failed.",
			NULL, (double)fails);
	metrics_counter(out, "pgjobd_process_crashes_total",
			"Programs of process handlers that ended unasked (a "
			"crash, a kill, a protocol violation) or could not "
			"start.",
			NULL, (double)crashes);
	metrics_gauge(out, "pgjobd_db_up",
		      "1 while at least one worker has a live database "
		      "connection.",
		      NULL, up);
}

void
stats_render(const struct stats *s, int n, int configured, struct buf *out)
{
	static struct sum k[STATS_MAX_KINDS * 4];
	size_t m = sum_kinds(s, n, k, sizeof(k) / sizeof(k[0]));
	render_jobs(out, s, k, m);
	render_workers(out, s, n, configured);
	render_queues(out, s);
	render_workflows(out, s);
	render_health(out, s);
	render_monitoring(out, s, n, k, m);
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
