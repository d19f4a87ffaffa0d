/*
 * db internal: what the modules of src/db/ share and nothing above them
 * sees: the libpq handles behind the layer's own types, error
 * classification, and dbev's statement sending with raw results.
 */
#ifndef PGJOBD_DB_INTERNAL_H
#define PGJOBD_DB_INTERNAL_H

#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

#include "db/db.h"
#include "db/dbev.h"

/* The libpq connection of c, borrowed. */
PGconn *db_pgconn(struct db_conn *c);
/* Takes conn's libpq connection out of c and frees c. */
PGconn *db_release(struct db_conn *c);

/*
 * Classifies a result (res may be NULL when a send or the connection
 * failed).  SQLSTATE classes 08 and 57P0x, and 25006 (read-only: we reached
 * a standby after a failover), count as DB_LOST.
 */
enum db_error db_classify(PGconn *conn, const PGresult *res);
/*
 * The error of res (or of conn when res is NULL) as one line:
 * "SQLSTATE: message".  Returns a new string; caller frees.
 */
char *db_error_text(PGconn *conn, const PGresult *res);

/*
 * The status of res for a callback: st points into text, which the caller
 * frees with free() once the callback has returned (NULL when it
 * succeeded).  res NULL: the connection was lost.
 */
struct db_status db_status_of(const PGresult *res, char **text);

/* 1 when res came back with rows (or none, but no error). */
int db_tuples_ok(const PGresult *res);

/*
 * Sending on a dbev (see dbev.h).  res is the statement's result, borrowed
 * for the duration of the call (dbev clears it after); NULL when the
 * connection was lost before it came.
 */
typedef void (*dbev_result_fn)(void *arg, PGresult *res);

/*
 * Sends sql with text parameters (copied by libpq before return).  cb is
 * always called exactly once, later, from the loop.  Returns 0, or -1 when
 * the connection is already lost (cb is then still called, with NULL).
 */
int dbev_send(struct dbev *d, const char *sql, int nparams,
	      const char *const *params, dbev_result_fn cb, void *arg);
/*
 * Prepares sql as the named statement on this connection (pipelined: it
 * may be used by dbev_send_prepared() at once).  A failure is logged.
 */
int dbev_prepare(struct dbev *d, const char *name, const char *sql,
		 int nparams);
/* dbev_send() of a statement prepared with dbev_prepare(). */
int dbev_send_prepared(struct dbev *d, const char *name, int nparams,
		       const char *const *params, dbev_result_fn cb, void *arg);

/* One statement of a group sent with dbev_send_group(). */
struct dbev_stmt {
	const char *sql;
	int nparams;
	const Oid *types; /* NULL: the server infers them */
	const char *const *params;
	const char *name; /* a prepared statement's, or NULL: sql */
};

/*
 * res[0..n) are the statements' results, borrowed for the call; an entry
 * is NULL when the connection was lost first.  After an error, the later
 * statements of the group have PGRES_PIPELINE_ABORTED.
 */
typedef void (*dbev_group_fn)(void *arg, PGresult **res, int n);

/*
 * Sends n statements with one sync point after the last, so that they run
 * in one implicit transaction: an error in any of them rolls back all.  No
 * statement may be BEGIN, COMMIT or ROLLBACK.  cb is called once, later.
 * Returns 0, or -1 when the connection is already lost.
 */
int dbev_send_group(struct dbev *d, const struct dbev_stmt *stmts, int n,
		    dbev_group_fn cb, void *arg);

/*
 * Tags the next statement sent (dbev_send*) with failpoints (failpoint.h):
 * send_fp fails it as a connection lost before it is sent, result_fp as one
 * lost after it committed.  0 for none.
 */
void dbev_failpoints(struct dbev *d, int send_fp, int result_fp);

/* The libpq connection under d, borrowed. */
PGconn *dbev_conn(struct dbev *d);

/*
 * A PostgreSQL array literal of the strings v[0..n), each quoted and
 * escaped (the one writer of array literals: no name is ever spliced into
 * one unescaped), a NULL pointer as NULL; caller frees.
 */
char *db_text_array(const char *const *v, size_t n);
/* The same for integers. */
char *db_int_array(const int64_t *v, size_t n);

/*
 * A statement whose answer a module of src/db reads for its caller: the
 * module's reader turns the result into its own types and calls the
 * caller back, and dbev_call() does the rest (the status of the answer,
 * freeing the call).  cb is the caller's callback, of the module's type,
 * kept as a generic function pointer and cast back by the reader.
 */
struct db_call {
	void (*cb)(void);
	void *arg;
	size_t n;     /* a count the reader needs (queues, tasks) */
	char **names; /* n strings it needs, owned by the call, or NULL */
};
typedef void db_read_fn(const struct db_call *c, const struct db_status *st,
			const PGresult *res);
/* The call of cb (any callback type) with arg. */
#define DB_CALL(cb, arg)                                                       \
	((struct db_call){(void (*)(void))(cb), (arg), 0, NULL})
/*
 * Sends sql (prepared: the name of a prepared statement) with text
 * parameters; when the answer comes (NULL: the connection was lost), calls
 * read with it and its status, then frees what c owns.  c is copied.
 */
int dbev_call(struct dbev *d, const char *sql, int prepared, int nparams,
	      const char *const *params, db_read_fn *read,
	      const struct db_call *c);

/* A result callback that ignores the result. */
void dbev_ignore(void *arg, PGresult *res);

/* qsort() and bsearch() order of int64_t (of the first of a pair). */
int db_cmp_int64(const void *a, const void *b);

/*
 * Row j's element of the array parameter param (of SQL type type), in a
 * statement whose $1 is the ids it writes, sorted: j.id's position in $1,
 * found by width_bucket(), a binary search, and read there (finish.c says
 * why not a join).  Fixed-width elements without NULLs are read in
 * constant time.
 */
#define DB_ID_POS	      "width_bucket(j.id, $1::bigint[])"
#define DB_AT_ID(param, type) "(" param "::" type ")[" DB_ID_POS "]"

/*
 * A time limit on the next statement sent: statement_timeout set for the
 * session before it (dbev_time_limit()) and reset after it
 * (dbev_time_limit_end()).  Each statement has its own sync, the pipeline
 * keeps their order, and the three go out in one call, so the limit covers
 * that statement alone; past it, the statement fails with
 * SQLSTATE_QUERY_CANCELED.
 */
void dbev_time_limit(struct dbev *d, int64_t ms);
void dbev_time_limit_end(struct dbev *d);

/*
 * claimed.c: the answer of either claim (claim.c, claim_limited.c), read
 * into a struct queue_claimed for the caller's queue_claim_fn; c->names are
 * the queues asked for, in order.  turn_wait_ms: how long the claim waited
 * for its turn, -1 when it took none (queue_claimed_read()).
 */
db_read_fn queue_claimed_read;
void queue_claimed_read_turn(const struct db_call *c,
			     const struct db_status *st, const PGresult *res,
			     int turn_wait_ms);

#endif
