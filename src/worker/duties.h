/*
 * duties: what the cluster duties of one worker share.
 *
 *   duty.c       the driver: a tick every second, a period every third of
 *                a lease; what the worker offers the cluster (its row)
 *   scheduler.c  the scheduler lease; every live worker's schedules ticked
 *   tasks.c      leased task partitions, up to this worker's share
 *   pruning.c    the pruning lease; finished jobs, request keys, old rows
 *   health.c     the health lease; the xmin horizon, dead tuples, bloat
 *
 * All state here is about leases this worker believes it holds; the
 * database decides, and a stale belief costs at most one refused write.
 */
#ifndef PGJOBD_DUTIES_H
#define PGJOBD_DUTIES_H

#include <stddef.h>
#include <stdint.h>

#include <ev.h>

struct config;
struct dbev;
struct part;
struct stats;
struct xmin_seen;

/* Lines logged once while their cause lasts (scheduler_note()). */
struct notes {
	char **v;
	size_t n;
};

struct duty {
	struct ev_loop *loop;
	const struct config *cfg;
	char *holder; /* "host/pid", in lease rows */
	int pid;
	int64_t period_ms;
	struct dbev *db;
	int slot;
	ev_timer tick;
	int64_t last_period;
	int published;	  /* this worker's row says what it can do */
	char *defined_at; /* when it first said so (UTC, database clock) */
	int stopping;
	/* scheduler.c */
	struct notes seen, noted;
	int64_t sched_token;
	int sched_busy;	   /* a round of the scheduler is in flight */
	int sched_pending; /* its tick enqueues not yet answered */
	/* pruning.c */
	int64_t prune_token;
	int64_t last_prune;
	/* tasks.c */
	struct part *parts;
	int acquiring; /* a task partition acquire is in flight */
	/* health.c: the lease, the last check, the warning in force (its
	 * holder's key, when it was last logged), and since when each
	 * holder without a start time was seen (a lower bound of its age). */
	struct stats *stats; /* /metrics, or NULL */
	int64_t health_token;
	int64_t last_health;
	int health_busy, health_failed;
	char *warn_key;
	int64_t warned_at;
	struct xmin_seen *xseen;
	size_t nxseen;
};

/* How long the duties' leases last: three periods. */
static inline int64_t
duty_lease_ms(const struct duty *d)
{
	return 3 * d->period_ms;
}

/* scheduler.c */
/* Renews or takes the scheduler lease (every period). */
void scheduler_period(struct duty *d);
/* Ticks every due schedule, when this worker holds the lease (every
 * tick). */
void scheduler_round(struct duty *d);
/* Stopping: gives the lease back. */
void scheduler_stop(struct duty *d);
/* The connection is gone, and the lease with it. */
void scheduler_forget(struct duty *d);
void scheduler_free(struct duty *d);

/* pruning.c */
/* Renews or takes the pruning lease and, holding it, prunes a batch. */
void pruning_period(struct duty *d);
void pruning_stop(struct duty *d);

/* health.c */
/* Renews or takes the health lease (every period). */
void health_period(struct duty *d);
/* Holding it, reads the database's health every health.interval (every
 * tick). */
void health_round(struct duty *d);
void health_stop(struct duty *d);
/* The connection is gone, and the lease with it. */
void health_forget(struct duty *d);
void health_free(struct duty *d);

/* tasks.c */
/* Renews the partitions held and takes or sheds to this worker's share. */
void tasks_period(struct duty *d);
/* Stopping: stops every command, giving each lease back as it exits. */
void tasks_stop(struct duty *d);
/* The connection is gone: every command is killed now. */
void tasks_lost(struct duty *d);
int tasks_running(const struct duty *d);
/* Frees every partition; their commands are killed. */
void tasks_free(struct duty *d);

#endif
