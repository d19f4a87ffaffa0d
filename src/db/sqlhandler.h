/*
 * sqlhandler: an sql handler's job, run in one transaction on the worker's
 * connection (docs/handlers.md, "sql"); its turn on that connection is the
 * worker's (src/worker/sqlhandler.c).
 */
#ifndef PGJOBD_SQLHANDLER_H
#define PGJOBD_SQLHANDLER_H

#include <stdint.h>

struct dbev;
struct job;

/* How an sql handler's transaction ended. */
enum queue_sql_end {
	QUEUE_SQL_DONE,	     /* the statement and the job's end committed */
	QUEUE_SQL_FAILED,    /* the statement failed: all rolled back */
	QUEUE_SQL_LEASE,     /* the lease was lost: nothing ran */
	QUEUE_SQL_CONN_LOST, /* unknown: the connection broke */
	QUEUE_SQL_TIMED_OUT, /* FAILED by statement_timeout */
};
/* error (borrowed for the call) is set for FAILED and CONN_LOST. */
typedef void queue_sql_fn(void *arg, enum queue_sql_end end, const char *error);

/*
 * Runs an sql handler: in one transaction, lock the job row and check its
 * lease (pgjob.lock_lease), run statement with $1 = payload (jsonb) and
 * $2 = job id under statement_timeout = timeout_ms, and mark the job done.
 */
int queue_run_sql(struct dbev *d, const struct job *job, const char *statement,
		  int64_t timeout_ms, queue_sql_fn *cb, void *arg);

#endif
