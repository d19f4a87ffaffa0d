/*
 * stats: the counters that workers keep for the supervisor's /metrics.
 *
 * One anonymous MAP_SHARED mapping, made by the supervisor before it forks
 * any worker.  Each worker writes only its own entry (indexed by its place
 * in the supervisor's table, so a restarted worker continues its
 * predecessor's counters and Prometheus sees no reset); the supervisor only
 * reads.  Writes are relaxed atomic adds and stores: the hot path pays a
 * few uncontended increments and no system call.
 */
#ifndef PGJOBD_STATS_H
#define PGJOBD_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "common/util.h"

#define STATS_MAX_WORKERS 256
#define STATS_MAX_KINDS	  64
/* Queue series: the config's queues each (up to one less than this), and
 * one that sums every other queue (docs/operations.md, "Metrics"). */
#define STATS_MAX_QUEUES   128
#define STATS_NAME	   64
#define STATS_BUCKETS	   12
#define STATS_MAX_HANDLERS 512 /* exec process groups tracked per worker */

/* Upper bounds of the duration histograms, in seconds. */
extern const double stats_bounds[STATS_BUCKETS];
/* Upper bounds of the peak RSS histogram, in bytes. */
extern const double stats_rss_bounds[STATS_BUCKETS];

/* --- handler durations up to the largest timeout, time in queue -------
 * ----------------------------------------------------------- */

/* The handler duration histogram: stats_bounds, then up to 4 more bounds
 * that reach the largest configured timeout (stats_dur_bounds()). */
#define STATS_DUR_BUCKETS (STATS_BUCKETS + 4)
/* The time-in-queue histogram: claim time minus run_at, 10 ms to 1 day. */
#define STATS_WAIT_BUCKETS 14
extern const double stats_wait_bounds[STATS_WAIT_BUCKETS];
#define STATS_MAX_SCHEDULES 64

/*
 * Fills b (STATS_DUR_BUCKETS places) with the duration bounds for a
 * largest configured timeout of max_timeout_s, and returns how many it
 * used: stats_bounds alone when they reach it, else stats_bounds and
 * 1 to 4 bounds in geometric steps of at least 2x up to max_timeout_s
 * (rounded up to a second), so that the last finite bucket covers it.
 */
size_t stats_dur_bounds(double max_timeout_s, double *b);
/* ----------------------------------------------------------------------- */

/* One (kind, queue) a worker has run jobs of. */
struct stats_kind {
	char kind[STATS_NAME];
	char queue[STATS_NAME];
	uint64_t claimed, done, retried, dead, lost;
	/* Handler durations, per bucket of struct stats' dur_bounds. */
	uint64_t dur[STATS_DUR_BUCKETS];
	uint64_t dur_count, dur_sum_us;
	/* What attempts used (docs/operations.md, "Metrics"): CPU time of
	 * the attempts that measured it, and the peak RSS of each exec
	 * attempt (its child's), a histogram by stats_rss_bounds. */
	uint64_t cpu_ms;
	uint64_t rss[STATS_BUCKETS];
	uint64_t rss_count, rss_sum_kb;
	/* Attempts that the handler's timeout ended (counted in
	 * retried or dead too); time in queue, per stats_wait_bounds. */
	uint64_t timed_out;
	uint64_t wait[STATS_WAIT_BUCKETS];
	uint64_t wait_count, wait_sum_us;
};

/* The limits a due job can wait for, as /metrics labels them. */
#define STATS_LIMITS 5
extern const char *const stats_limit_names[STATS_LIMITS];

/* Queue depth as one worker per instance last read it. */
struct stats_queue {
	char name[STATS_NAME];
	int64_t due, running;
	int64_t oldest_due_ms;
	/* Flow control (pgjob.limit_waiting()): limited has a row in
	 * pgjob.limits; due jobs held back by each limit; tokens left in
	 * thousandths, -1 without a rate. */
	int64_t limited, paused;
	int64_t waiting[STATS_LIMITS];
	int64_t tokens_milli;
	/* Available jobs not due yet (run_at in the future), and
	 * of kinds this instance's config has no handler for. */
	int64_t scheduled, unhandled;
	/* 1: due, scheduled or unhandled passed 10,000 jobs and were
	 * estimated (src/db/monitor.c). */
	int64_t estimated;
	/* 1: the sum of the queues this instance's config does not define,
	 * named "(other)" (its unhandled jobs go unreported: another
	 * instance may handle them). */
	int64_t other;
};

/* Why an export request failed, as /metrics labels it (reason=). */
enum stats_trace_reason {
	STATS_TRACE_CONNECT, /* no connection (refused, no such host) */
	STATS_TRACE_TIMEOUT, /* no answer within the request's bound */
	STATS_TRACE_STATUS,  /* an answer that is not 2xx */
	STATS_TRACE_OTHER,   /* any other transport error */
	STATS_TRACE_REASONS
};
extern const char *const stats_trace_reasons[STATS_TRACE_REASONS];

struct stats_worker {
	int32_t pid;
	int32_t slot; /* 0: none held */
	int32_t connected;
	int32_t tasks_held;
	int64_t last_ok_ms; /* CLOCK_MONOTONIC ms of the last good result */
	uint64_t reconnects;
	uint64_t connect_failures; /* attempts to connect that failed */
	/* Copies of process handlers that ended unasked (a crash, a kill
	 * after a timeout, a protocol violation) or could not start. */
	uint64_t process_crashes;
	uint64_t claim[STATS_BUCKETS]; /* claim round-trip times */
	uint64_t claim_count, claim_sum_us;
	uint32_t nkinds;
	struct stats_kind kinds[STATS_MAX_KINDS];
	/* Process groups of the exec handlers it runs: when a worker dies
	 * without stopping them, the supervisor kills them. */
	int32_t handler_pgids[STATS_MAX_HANDLERS];
	/* Its span export (docs/tracing.md, worker/otlp.c), written by the
	 * sender thread and the loop: spans the endpoint accepted, dropped
	 * (buffer full), sent in requests that failed; the failed requests
	 * by reason (stats_trace_reasons); the requests' times; the spans
	 * waiting in the buffer and its size (0: no export). */
	uint64_t trace_exported, trace_dropped, trace_failed;
	uint64_t trace_failures[STATS_TRACE_REASONS];
	uint64_t trace_send[STATS_BUCKETS];
	uint64_t trace_send_count, trace_send_sum_us;
	int64_t trace_queued, trace_capacity;
};

/* Recent NOTIFYs, shared out among an instance's workers (worker.c). */
#define STATS_NOTIFY_RING 64

/*
 * --- The database health guard (docs/operations.md, "Database health") ---
 * Written by the worker of this instance that holds the pgjob:health lease
 * (worker/health.c), one per cluster; the others' /metrics leave these
 * series out.  Labels are bounded: the holder's kind (3), and the names of
 * pgjob's own tables and indexes; a holder's pid and application_name go
 * to the log line, never into a label.
 */
#define STATS_HEALTH_KINDS   3 /* backend, replication_slot, prepared_xact */
#define STATS_HEALTH_TABLES  32
#define STATS_HEALTH_INDEXES 64

struct stats_health_rel {
	char name[STATS_NAME];
	int64_t dead;	     /* table: dead tuples */
	int64_t vacuum_ms;   /* table: since its last (auto)vacuum; -1 none */
	int64_t bloat_milli; /* index: estimated bloat, thousandths */
};

struct stats_health {
	/* When it was written (CLOCK_MONOTONIC ms; 0: never) and until when
	 * it counts (three intervals later: a worker that lost the lease
	 * stops writing, and its last figures go out of /metrics). */
	int64_t at_ms, valid_ms;
	/* Per kind, the oldest holder: seconds (ms) and transactions; -1
	 * when no holder of the kind holds the horizon back. */
	int64_t xmin_age_ms[STATS_HEALTH_KINDS];
	int64_t xmin_age_xids[STATS_HEALTH_KINDS];
	uint32_t ntables, nindexes;
	struct stats_health_rel tables[STATS_HEALTH_TABLES];
	struct stats_health_rel indexes[STATS_HEALTH_INDEXES];
};

/* The names of the kinds, as the label holder= says them. */
extern const char *const stats_health_kinds[STATS_HEALTH_KINDS];

struct stats {
	uint64_t worker_restarts;
	/* The entry of the worker that reads queue depths for /metrics (one
	 * per instance; the supervisor names it), or -1. */
	int32_t depth_reader;
	int64_t queues_at_ms; /* when queues[] was written; 0: never */
	/* Workflows, read with the depths: when (0: never), running now,
	 * done and failed ever (docs/workflows.md). */
	int64_t workflows_at_ms;
	int64_t workflows_running, workflows_done, workflows_failed;
	uint32_t nqueues;
	struct stats_queue queues[STATS_MAX_QUEUES];
	struct stats_worker w[STATS_MAX_WORKERS];
	/* Per slot: a notification's key (low 48 bits: its transaction id
	 * and sending backend, stats_notify_take()) and how many workers
	 * took it (high 16). */
	uint64_t notify_ring[STATS_NOTIFY_RING];
	/* Per worker entry: when a claim of its rode right behind its last
	 * ends, of jobs with children, its connection's backend (low 32
	 * bits) and how many jobs of a queue the claim may take (high 32);
	 * else 0 (stats_claim_behind()). */
	uint64_t claim_behind[STATS_MAX_WORKERS];
	/* The database health guard (see struct stats_health). */
	struct stats_health health;

	/* --- monitoring: duration bounds, dead jobs, schedules --- */
	/* The handler duration bounds, set by the supervisor before it
	 * forks (stats_dur_bounds()); 0: stats_bounds. */
	uint32_t ndur_bounds;
	double dur_bounds[STATS_DUR_BUCKETS];
	/* Dead jobs per queue, counted by the depth reader once a minute
	 * (src/worker/monitor.c); dead_at_ms: when (0: not yet). */
	int64_t dead_at_ms;
	uint32_t ndead;
	struct {
		char name[STATS_NAME];
		int64_t n;
	} dead[STATS_MAX_QUEUES];
	/* Available jobs per queue that no live worker serves (their kind
	 * and queue: pgjob.unserved()), counted with the dead ones;
	 * unserved_at_ms: when (0: not yet). */
	int64_t unserved_at_ms;
	uint32_t nunserved;
	struct {
		char name[STATS_NAME];
		int64_t n;
	} unserved[STATS_MAX_QUEUES];
	/* Schedules that have ticked (pgjob.schedules), read with the
	 * depths: the last tick and the next one after it by its cron (Unix
	 * seconds; next 0: not known on this host). */
	uint32_t nschedules;
	struct {
		char name[STATS_NAME];
		int64_t last_tick_s, next_tick_s;
	} schedules[STATS_MAX_SCHEDULES];
};

/* Maps a zeroed area; NULL (logged) if mmap fails.  Free with
 * stats_destroy(). */
struct stats *stats_create(void);
void stats_destroy(struct stats *s);

/* The entry of (kind, queue) in w, added if new; NULL when w is full. */
struct stats_kind *stats_kind(struct stats_worker *w, const char *kind,
			      const char *queue);

/* Relaxed atomic add and store, safe against a concurrent reader. */
static inline void
stats_add(uint64_t *c, uint64_t n)
{
	__atomic_fetch_add(c, n, __ATOMIC_RELAXED);
}

static inline void
stats_set(int64_t *v, int64_t x)
{
	__atomic_store_n(v, x, __ATOMIC_RELAXED);
}

/* Counts one observation of us microseconds into a histogram. */
void stats_observe(uint64_t *buckets, uint64_t *count, uint64_t *sum_us,
		   int64_t us);
/* Counts an attempt's CPU time (ms, or -1: not measured) and peak RSS
 * (KiB, or -1: not measured) into k. */
void stats_observe_usage(struct stats_kind *k, int64_t cpu_ms,
			 int64_t max_rss_kb);
/* The same into a (kind, queue)'s duration histogram, with s's bounds. */
void stats_observe_dur(const struct stats *s, struct stats_kind *k, int64_t us);
/* The same into its time-in-queue histogram (stats_wait_bounds). */
void stats_observe_wait(struct stats_kind *k, int64_t us);
/* The handler duration bounds in force, *n of them: s's (set by the
 * supervisor, stats_dur_bounds()), else stats_bounds. */
const double *stats_dur_bounds_of(const struct stats *s, size_t *n);

/*
 * Whether this worker takes its turn at notification (xid, be_pid) with
 * room free places: 1 when the workers that took it so far have too little
 * room for its due jobs (it is counted as taken), else 0.  The key includes
 * the backend that sent it, so a notification forged by another session
 * never stands for a real one (docs/security.md, "NOTIFY").
 */
int stats_notify_take(struct stats *s, uint64_t xid, int be_pid, long long due,
		      long long room);

/*
 * Worker entry index sends a claim right behind ends of jobs with children,
 * on its connection to backend be_pid, for up to room jobs: the children
 * those ends make due are its claim's, and the notification of them
 * (sent by be_pid at their commit, before the claim runs) is left to it
 * by every worker of the instance (stats_notify_behind()).  It holds until
 * the worker writes again; be_pid 0: no claim behind the worker's last
 * ends.
 */
void stats_claim_behind(struct stats *s, int index, int be_pid, long long room);
/* Whether a claim rides behind the ends that backend be_pid committed, of
 * a worker of this instance, with room for due jobs. */
int stats_notify_behind(const struct stats *s, int be_pid, long long due);

/* The worker of entry index is gone (the supervisor reaped it): its gauges
 * (slot, connection, tasks) go to zero; its counters stay. */
void stats_worker_gone(struct stats *s, int index);

/*
 * 1 when each of the n workers whose entries are idx[0..n) holds a slot
 * and has reached the database within stale_ms; else 0, with a reason in
 * why (at least 128 bytes) that names the worker by number[i], its
 * worker=N in the log.
 */
int stats_healthy(const struct stats *s, const int *idx, const int *number,
		  int n, int64_t stale_ms, char *why, size_t len);

#endif
