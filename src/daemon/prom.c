/*
 * prom: the Prometheus text of the counters that the workers keep in the
 * shared area (common/stats.h), for the supervisor's /metrics (report.c):
 * the job counters and histograms summed by kind and queue, the workers,
 * the queue gauges and flow control, workflows, the database health guard,
 * time in queue, dead and unserved jobs, schedules.  The series and their
 * help texts are the contract of docs/operations.md ("Metrics").
 */
#include "daemon/prom.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "common/metrics.h"
#include "common/stats.h"
#include "common/util.h"

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
	const double *bounds = stats_dur_bounds_of(s, &nb);
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
	{"pgjobd_queue_estimated",
	 "1 when the queue's due, scheduled or unhandled jobs passed 10000 "
	 "and were estimated from a sample of the table.",
	 offsetof(struct stats_queue, estimated), 1, 0},
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
	/* Monotonic in the stats, wall time here: how old the figures
	 * above are, which a read stopped after 5 s leaves as they were. */
	int64_t at = __atomic_load_n(&s->queues_at_ms, __ATOMIC_ACQUIRE);
	if (at)
		metrics_gauge(
			out, "pgjobd_queue_read_timestamp_seconds",
			"When the queue figures were last read.", NULL,
			(double)(util_wall_us() / 1000 - (util_now_ms() - at)) /
				1e3);
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

/* The span export's (docs/tracing.md, "Exporting spans"), summed over
 * the workers; all zero when no worker exports. */
static void
render_trace(struct buf *out, const struct stats *s, int n)
{
	struct stats_worker t = {0};
	for (int i = 0; i < n; i++) {
		const struct stats_worker *w = &s->w[i];
		t.trace_exported += ld(&w->trace_exported);
		t.trace_dropped += ld(&w->trace_dropped);
		t.trace_failed += ld(&w->trace_failed);
		for (int r = 0; r < STATS_TRACE_REASONS; r++)
			t.trace_failures[r] += ld(&w->trace_failures[r]);
		for (int b = 0; b < STATS_BUCKETS; b++)
			t.trace_send[b] += ld(&w->trace_send[b]);
		t.trace_send_count += ld(&w->trace_send_count);
		t.trace_send_sum_us += ld(&w->trace_send_sum_us);
		t.trace_queued +=
			__atomic_load_n(&w->trace_queued, __ATOMIC_RELAXED);
		t.trace_capacity +=
			__atomic_load_n(&w->trace_capacity, __ATOMIC_RELAXED);
	}
	metrics_counter(out, "pgjobd_trace_spans_exported_total",
			"Spans the OTLP endpoint accepted.", NULL,
			(double)t.trace_exported);
	metrics_counter(out, "pgjobd_trace_spans_dropped_total",
			"Spans dropped because the export buffer was full.",
			NULL, (double)t.trace_dropped);
	metrics_counter(out, "pgjobd_trace_spans_failed_total",
			"Spans sent in export requests that failed.", NULL,
			(double)t.trace_failed);
	metrics_header(out, "pgjobd_trace_export_failures_total", "counter",
		       "Export requests that failed, by reason.");
	for (int r = 0; r < STATS_TRACE_REASONS; r++) {
		char l[32];
		snprintf(l, sizeof(l), "reason=\"%s\"", stats_trace_reasons[r]);
		metrics_counter(out, "pgjobd_trace_export_failures_total", NULL,
				l, (double)t.trace_failures[r]);
	}
	metrics_histogram(out, "pgjobd_trace_export_seconds",
			  "Export request time, answered or not.", NULL,
			  stats_bounds, t.trace_send, STATS_BUCKETS,
			  (double)t.trace_send_sum_us / 1e6,
			  t.trace_send_count);
	metrics_gauge(out, "pgjobd_trace_buffer_spans",
		      "Spans waiting in the workers' export buffers.", NULL,
		      (double)t.trace_queued);
	metrics_gauge(out, "pgjobd_trace_buffer_capacity_spans",
		      "Size of the workers' export buffers (0: no export).",
		      NULL, (double)t.trace_capacity);
}

void
prom_render(const struct stats *s, int n, int configured, struct buf *out)
{
	static struct sum k[STATS_MAX_KINDS * 4];
	size_t m = sum_kinds(s, n, k, sizeof(k) / sizeof(k[0]));
	render_jobs(out, s, k, m);
	render_workers(out, s, n, configured);
	render_queues(out, s);
	render_workflows(out, s);
	render_health(out, s);
	render_monitoring(out, s, n, k, m);
	render_trace(out, s, n);
}
