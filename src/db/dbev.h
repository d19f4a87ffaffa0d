/*
 * dbev: one libpq connection in pipeline mode on a libev loop.
 *
 * Every statement is sent at once with its own sync point, so a worker can
 * have a claim, a renewal and a batch of finishes in flight together, and an
 * error in one never aborts another.  Results come back in order through
 * each statement's callback.  Notifications (LISTEN) are passed on as they
 * arrive.  When the connection breaks, every pending callback gets a NULL
 * result (in order), then on_lost is called once; the owner then frees the
 * dbev and reconnects.
 */
#ifndef PGJOBD_DBEV_H
#define PGJOBD_DBEV_H

#include <libpq-fe.h>
#include <stdint.h>

struct ev_loop;
struct dbev;

/*
 * res is the statement's result, borrowed for the duration of the call
 * (dbev clears it after); NULL when the connection was lost before it came.
 */
typedef void (*dbev_result_fn)(void *arg, PGresult *res);

struct dbev_hooks {
	/* be_pid: the backend that sent it (PGnotify.be_pid). */
	void (*on_notify)(void *arg, const char *channel, const char *payload,
			  int be_pid);
	void (*on_lost)(void *arg, const char *why);
	void *arg;
};

/*
 * Takes over conn (a connected, idle PGconn) and switches it to pipeline
 * mode.  Returns NULL when that fails; conn is then still the caller's.
 */
struct dbev *dbev_new(struct ev_loop *loop, PGconn *conn,
		      const struct dbev_hooks *hooks);
/* Stops watching and PQfinish()es the connection.  Pending callbacks are
 * called with NULL first.  NULL is allowed. */
void dbev_free(struct dbev *d);
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

/*
 * While statements are pending, no answer for ms (0: no limit, the default)
 * counts as a lost connection: a frozen path never closes, and TCP
 * keepalives cannot see it.
 */
void dbev_set_timeout(struct dbev *d, int64_t ms);

/* Statements sent and not yet answered. */
int dbev_pending(const struct dbev *d);
/* Round trips (sync points) completed since the connection was made. */
unsigned long dbev_round_trips(const struct dbev *d);
PGconn *dbev_conn(struct dbev *d);

#endif
