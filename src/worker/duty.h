/*
 * duty: the once-per-cluster work that a worker does while it holds a lease
 * row in pgjob.leases: the scheduler (enqueues each cron tick once), the
 * pruning of finished jobs, and leased tasks (long-running commands, one
 * holder per partition).
 *
 * Every worker runs one; the leases decide who does what.  A lease has a
 * fencing token that grows at every change of holder: the scheduler's
 * writes and a task's own transactions (pgjob.fence) check it.
 */
#ifndef PGJOBD_DUTY_H
#define PGJOBD_DUTY_H

#include <stdint.h>

struct config;
struct dbev;
struct ev_loop;
struct duty;
struct stats;

/*
 * A new duty runner for one worker.  holder names the worker in lease rows
 * (copied).  period_ms is how often it renews and rebalances (a third of a
 * lease).  cfg is borrowed for the duty's life.
 */
struct duty *duty_new(struct ev_loop *loop, const struct config *cfg,
		      const char *holder, int64_t period_ms);
/* Kills every task command at once and frees the runner. */
void duty_free(struct duty *d);
/* The worker's connection is up (db, slot) or lost (db NULL): a lost
 * connection forgets every lease and kills every task command now, since
 * their renewals can no longer be made. */
void duty_set_db(struct duty *d, struct dbev *db, int slot);
/* Shutdown: stop the task commands and give their leases back as they
 * exit. */
void duty_stop(struct duty *d);
/* Where the health duty writes its figures for /metrics (borrowed; NULL:
 * nowhere). */
void duty_set_stats(struct duty *d, struct stats *stats);
/* Task commands still running. */
int duty_running(const struct duty *d);

#endif
