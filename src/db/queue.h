/*
 * queue: all job SQL, as statements beside the code that reads their
 * columns.  Every write after a claim is compare-and-set on lease_token.
 */
#ifndef PGJOBD_QUEUE_H
#define PGJOBD_QUEUE_H

#include <stddef.h>
#include <stdint.h>

#include "db/dbev.h"

struct job;

/*
 * Prepares the claim, finish and renew statements on a new connection;
 * call it before any of them is sent.  serial and per_key: whether any
 * queue the claim asks for is in that mode (its branch is left out if not).
 */
void queue_prepare(struct dbev *d, int serial, int per_key);

/* What one claim asks for: limits[i] jobs of queues[i]. */
struct queue_claim_req {
	const char *const *kinds; /* the kinds this worker handles */
	size_t nkinds;
	const char *const *queues;
	const int *limits;
	const char *const *modes; /* parallel, serial, per_key */
	size_t nqueues;
	const char *locked_by;
	int64_t lease_ms;
	/*
	 * Per queue, where a parallel queue's scan of available jobs starts:
	 * past (priority, run_at, id), a position queue_claim_position()
	 * returned, or at the head where the three are NULL.  With a snapshot
	 * held open somewhere, the index entries of claimed jobs cannot be
	 * cleaned, and a scan from the head reads every one of them.  A
	 * starting point may pass over a job that became available behind
	 * it (a more urgent one, or one another claimer gave back): the
	 * caller scans from the head often enough to bound that delay.
	 * NULL arrays: from the head.
	 */
	const char *const *from_priority;
	const char *const *from_run_at;
	const char *const *from_id;
	/* A payload whose text is longer is not sent: the job comes back
	 * with a NULL payload and its size in payload_bytes. */
	int64_t max_payload_bytes;
};

/* A place in a queue's index of available jobs, as text for the next
 * claim. */
struct queue_position {
	char priority[8];
	char run_at[24]; /* microseconds since the epoch */
	char id[24];
};

/*
 * The position of the last job a claim's parallel branch took from queue:
 * 1 and *pos set, or 0 when it took none.
 */
int queue_claim_position(const void *pgresult, const char *queue,
			 struct queue_position *pos);

/* The end of one attempt, as queue_finish() writes it. */
struct queue_finish {
	int64_t id;
	int64_t token;
	const char *state;  /* done, available (retry), dead, cancelled */
	const char *result; /* JSON text or NULL */
	const char *error;  /* or NULL: keep the last error */
	int64_t delay_ms;   /* available: run again after this long */
	int refund;	    /* give the attempt back (shutdown) */
};

/*
 * Writes the nf ends f in one statement, each only where id, token and state
 * 'running' still match.  With delete_done (retention 0), a job that ends
 * done is deleted, not kept.  Read the result with queue_finished_ids().
 */
int queue_finish(struct dbev *d, const struct queue_finish *f, size_t nf,
		 int delete_done, dbev_result_fn cb, void *arg);
/*
 * Claims due jobs (by priority, then run_at, then id) and running jobs whose
 * lease expired, with FOR UPDATE SKIP LOCKED, in one statement that commits
 * on its own.  Read the result with queue_claim_rows() and
 * queue_claim_position().
 */
int queue_claim(struct dbev *d, const struct queue_claim_req *req,
		dbev_result_fn cb, void *arg);
/*
 * The claimed jobs of a claim's result as new structs (caller frees each
 * and the array with free()); *n is their number.  handler is left NULL
 * for the caller to resolve.
 */
struct job **queue_claim_rows(const void *pgresult, int *n);
/*
 * The ids whose end a finish wrote, sorted (caller frees); a finish whose id
 * is missing had lost its lease.  Look one up with queue_id_in().
 */
int64_t *queue_finished_ids(const void *pgresult, size_t *n);
int queue_id_in(const int64_t *sorted, size_t n, int64_t id);

/*
 * Extends the lease of every (ids[i], tokens[i]) still held to now() +
 * lease_ms.  The result has a row per job: id, renewed (t/f), cancelled
 * (t/f: an operator cancelled it while this token held it), token.
 */
int queue_renew(struct dbev *d, const int64_t *ids, const int64_t *tokens,
		size_t n, int64_t lease_ms, dbev_result_fn cb, void *arg);

/* How an sql handler's transaction ended. */
enum queue_sql_end {
	QUEUE_SQL_DONE,	     /* the statement and the job's end committed */
	QUEUE_SQL_FAILED,    /* the statement failed: all rolled back */
	QUEUE_SQL_LEASE,     /* the lease was lost: nothing ran */
	QUEUE_SQL_CONN_LOST, /* unknown: the connection broke */
};

/*
 * Runs an sql handler: in one transaction, lock the job row and check its
 * lease (pgjob.lock_lease), run statement with $1 = payload (jsonb) and
 * $2 = job id under statement_timeout = timeout_ms, and mark the job done.
 * Read the outcome with queue_sql_result().
 */
int queue_run_sql(struct dbev *d, const struct job *job, const char *statement,
		  int64_t timeout_ms, dbev_group_fn cb, void *arg);
/* The outcome of queue_run_sql()'s results; *error (caller frees) is set
 * for QUEUE_SQL_FAILED and QUEUE_SQL_CONN_LOST. */
enum queue_sql_end queue_sql_result(PGresult **res, int n, char **error);

/* A PostgreSQL array literal of the strings v[0..n), quoted, a NULL
 * pointer as NULL; caller frees. */
char *queue_text_array(const char *const *v, size_t n);
/* The same for integers. */
char *queue_int_array(const int64_t *v, size_t n);

#endif
