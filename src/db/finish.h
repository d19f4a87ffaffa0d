/*
 * finish: the statement that writes the ends of a batch of attempts, each
 * a compare-and-set on its lease (id, lease_token, state 'running').
 */
#ifndef PGJOBD_FINISH_H
#define PGJOBD_FINISH_H

#include <stddef.h>
#include <stdint.h>

#include "common/job.h"

struct dbev;
struct db_status;

/* The end of one attempt, as queue_finish() writes it. */
struct queue_finish {
	int64_t id;
	int64_t token;
	enum job_state state; /* done, available (retry), dead */
	const char *result;   /* JSON text or NULL */
	const char *error;    /* or NULL: keep the last error */
	int64_t delay_ms;     /* available: run again after this long */
	int refund;	      /* give the attempt back (shutdown, snooze) */
	/* A snooze (state available, refund set, no error): counted on the
	 * row; past QUEUE_MAX_SNOOZES it is written dead instead. */
	int snooze;
	/* A failure retried at once by the worker that held it (state
	 * available, delay 0; docs/daemon.md, "Retries"): the job stays
	 * running, its failed attempt gets its row, and the next attempt is
	 * counted and leased (attempted_at, a new lease token, the lease
	 * for lease_ms) in the same statement, without going back to its
	 * queue.  The token written is token + 1.  The error and figures go
	 * to the attempt's row only: the caller gives the error to the job's
	 * next end that has none (worker/held.c, carried_error). */
	int again;
	int64_t lease_ms;
	/* What the attempt used (sql/upgrade/012_attempt_usage.sql): wall time
	 * and CPU time in ms, peak RSS in KiB; -1: not measured (NULL). */
	int64_t wall_ms, cpu_ms, max_rss_kb;
	/* A failure's exit status (exec) or HTTP status (http), -1: none
	 * (sql/upgrade/013_attempts.sql: last_status, and its attempt's row).
	 */
	int64_t status;
};

/* The most snoozes a job may have (docs/handlers.md, "Snoozing"); the
 * same as text for the statements. */
#define QUEUE_MAX_SNOOZES   1000
#define QUEUE_MAX_SNOOZES_S "1000"

/* The ids whose end was written, sorted (borrowed for the call); an end
 * whose id is missing had lost its lease.  capped (sorted, a subset of
 * written): the snoozes written dead, past QUEUE_MAX_SNOOZES.  Look one up
 * with queue_id_in(). */
typedef void queue_finish_fn(void *arg, const struct db_status *st,
			     const int64_t *written, size_t n,
			     const int64_t *capped, size_t ncapped);

/*
 * Writes the nf ends f in one statement, each only where id, token and state
 * 'running' still match.  With retention_ms 0, a job that ends done is
 * deleted, not kept; otherwise a plain one is moved to pgjob.jobs_done
 * (sql/upgrade/019_jobs_done.sql), the others written in place.
 */
int queue_finish(struct dbev *d, const struct queue_finish *f, size_t nf,
		 int64_t retention_ms, queue_finish_fn *cb, void *arg);
int queue_id_in(const int64_t *sorted, size_t n, int64_t id);

/*
 * The text of the finish statement of that name (pgjob_finish,
 * pgjob_finish_delete, and their _range and _again forms), malloc'd, with
 * *nparams set; NULL for another name.  For queue_prepare() and
 * queue_statement().
 */
char *queue_finish_sql(const char *name, int *nparams);

#endif
