/*
 * pooler: whether a worker's connection is a session of its own.  A worker
 * keeps state in its server session between transactions (the slot's
 * advisory lock, LISTEN, its settings).  A connection pooler in transaction
 * or statement mode (PgBouncer's pool_mode) hands each transaction to
 * whichever server connection is free: the lock and the LISTEN stay behind
 * on a server connection that other clients then use.  Such a pool is fine
 * for enqueuing (pgjob enqueue, pgjob.enqueue()), never for a worker.
 */
#ifndef PGJOBD_POOLER_H
#define PGJOBD_POOLER_H

struct db_conn;

/* What pooler_check() found. */
enum pooler {
	POOLER_ERROR = -1, /* a statement failed: retry with a new connection */
	POOLER_DIRECT = 0, /* PostgreSQL itself: a session of our own */
	POOLER_SHARED = 1, /* a pool that shares server sessions: refuse */
	POOLER_SESSION = 2, /* a pooler that kept our session: warn */
	POOLER_UNKNOWN = 3, /* a pooler whose mode the probe could not
			       check (no connection or answer in time):
			       warn, as for POOLER_SESSION */
};

/*
 * Checks the pristine connection c (nothing in it yet that a probe could
 * disturb), through which a worker is about to start its session.  It may
 * open one short probe connection to the same host and port with the same
 * parameters.  Returns POOLER_DIRECT with *msg NULL; otherwise *msg is one
 * line for the log, saying what was found and, for POOLER_SHARED, what to
 * do (caller frees).
 */
enum pooler pooler_check(struct db_conn *c, char **msg);

#endif
