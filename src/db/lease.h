/*
 * lease: slots (the worker's identity, a session advisory lock), the
 * worker's row in pgjob.workers (with what it offers the cluster's duties),
 * and named leases with fencing tokens.  Slots are identity and liveness, not
 * safety: the job's lease token is what keeps a job from running twice.
 */
#ifndef PGJOBD_LEASE_H
#define PGJOBD_LEASE_H

#include <libpq-fe.h>
#include <stdint.h>

#include "db/dbev.h"

struct config;

/*
 * Takes the lowest free slot 1..max_slots with pg_try_advisory_lock(
 * lock_class, n) in one statement.  Returns the slot, 0 when every slot is
 * taken, or -1 on a database error (*err set; caller frees).
 */
int lease_slot_acquire(PGconn *conn, int64_t lock_class, int max_slots,
		       char **err);

/* What the worker writes about itself into pgjob.workers. */
struct lease_worker {
	int slot;
	const char *host;
	int pid;
	int supervisor_pid;
	const char *version;
	const char *kinds; /* a text[] literal */
};

/*
 * Upserts the worker's row (heartbeat now()).  What a previous holder of
 * the slot said it could do (tasks, schedules) is cleared: the duty writes
 * this worker's own right after (duty_set_db()).  Returns 0 or -1 (*err).
 */
int lease_worker_register(PGconn *conn, const struct lease_worker *w,
			  char **err);
/*
 * Writes into the worker's row (slot, pid) what its config offers the
 * cluster's duties: its tasks with their partition counts, and its
 * schedules' definitions, each schedule's queue resolved (the scheduler
 * lease's holder may have no handler for the kind).  defined_at is the
 * value a previous call returned, or NULL the first time: the row's
 * defined_at is then now().  The result has one row, defined_at as
 * "YYYY-MM-DDTHH:MM:SS.ffffffZ", or none when the row is not this
 * worker's.  cfg is borrowed for the call; NULL writes nothing offered (a
 * stopping worker withdraws, so that others take over its share).
 */
int lease_worker_publish(struct dbev *d, int slot, int pid,
			 const struct config *cfg, const char *defined_at,
			 dbev_result_fn cb, void *arg);
/*
 * For each task of cfg, the live workers (a heartbeat within window_ms)
 * that run it with the same number of partitions, this one included once
 * it has published: rows (task index from 1, count).
 */
int lease_task_workers(struct dbev *d, const struct config *cfg,
		       int64_t window_ms, dbev_result_fn cb, void *arg);
/* Sends the heartbeat for slot (pid guards against a slot's new owner). */
int lease_worker_heartbeat(struct dbev *d, int slot, int pid, dbev_result_fn cb,
			   void *arg);
/* Deletes the worker's row on a clean exit (synchronous, best effort). */
void lease_worker_unregister(PGconn *conn, int slot, int pid);

/*
 * Named leases in pgjob.leases, with fencing tokens.  Each sends one
 * statement; the result has one row (the token) when it succeeded, none
 * when it did not.
 *
 * lease_acquire takes the lease when it is free, expired, or already this
 * holder's (after a reconnect), and always gives it a new token.
 * lease_renew extends it only while (holder, token) still hold it.
 * lease_release gives it up at once, so another worker can take it.
 */
int lease_acquire(struct dbev *d, const char *name, const char *holder,
		  int64_t ms, dbev_result_fn cb, void *arg);
int lease_renew(struct dbev *d, const char *name, const char *holder,
		int64_t token, int64_t ms, dbev_result_fn cb, void *arg);
int lease_release(struct dbev *d, const char *name, const char *holder,
		  int64_t token, dbev_result_fn cb, void *arg);

#endif
