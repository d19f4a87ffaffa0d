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
 *
 * The statements themselves are sent by the modules of src/db/ (claim.c,
 * finish.c, renew.c, lease.c, schedule.c, prune.c...), each with a
 * callback of its own types;
 * the sending API with raw results is in db/internal.h.
 */
#ifndef PGJOBD_DBEV_H
#define PGJOBD_DBEV_H

#include <stdint.h>

struct ev_loop;
struct dbev;
struct db_conn;

struct dbev_hooks {
	/* be_pid: the backend that sent it (PGnotify.be_pid). */
	void (*on_notify)(void *arg, const char *channel, const char *payload,
			  int be_pid);
	void (*on_lost)(void *arg, const char *why);
	void *arg;
};

/*
 * Takes over conn (a connected, idle connection) and switches it to
 * pipeline mode.  Returns NULL when that fails; conn is then still the
 * caller's.
 */
struct dbev *dbev_new(struct ev_loop *loop, struct db_conn *conn,
		      const struct dbev_hooks *hooks);
/*
 * Connects without blocking the loop (dbev_connect.c): done(arg, d, err) is
 * called once, from the loop, with a new dbev (hooks as dbev_new()'s) or
 * with NULL and err (one line, the target named without secrets, borrowed
 * for the call) after a failure or timeout_ms.  Returns the connection
 * under way, which dbev_connect_cancel() drops before done is called; or
 * NULL with *err set (caller frees), done never called.
 */
struct dbev_connecting;
typedef void dbev_connected_fn(void *arg, struct dbev *d, const char *err);
struct dbev_connecting *dbev_connect(struct ev_loop *loop, const char *conninfo,
				     const char *appname, int64_t timeout_ms,
				     const struct dbev_hooks *hooks,
				     dbev_connected_fn *done, void *arg,
				     char **err);
/* NULL is allowed. */
void dbev_connect_cancel(struct dbev_connecting *c);
/* Stops watching and closes the connection.  Pending callbacks are called
 * with NULL first.  NULL is allowed. */
void dbev_free(struct dbev *d);

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
/*
 * In a result callback: the time the answer took from when its statements
 * could start, that is from when they were sent or from the answer before
 * theirs, whichever came later.  A statement waits in the pipeline behind
 * the ones sent before it: a claim sent behind a slow read has a round trip
 * of seconds, but an answer time of its own.
 */
int64_t dbev_answer_ms(const struct dbev *d);
/* The process of its server session (PQbackendPID), 0 if none. */
int dbev_backend_pid(const struct dbev *d);

#endif
