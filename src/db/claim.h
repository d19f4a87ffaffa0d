/*
 * claim: the claim of the queues without limits (claim.c): what it asks
 * for; its answer is a struct queue_claimed (claimed.h).
 */
#ifndef PGJOBD_CLAIM_H
#define PGJOBD_CLAIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "db/claimed.h"

struct dbev;

/* What one claim asks for: limits[k] jobs of queues[k]. */
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
	 * past a position an earlier claim returned, or at the head (NULL).
	 * With a snapshot held open somewhere, the index entries of claimed
	 * jobs cannot be cleaned, and a scan from the head reads every one of
	 * them.  A starting point may pass over a job that became available
	 * behind it (a more urgent one, or one another claimer gave back):
	 * the caller scans from the head often enough to bound that delay.
	 * NULL: every queue from the head.
	 */
	const struct queue_position *const *from;
	/*
	 * Per queue, whether the claim takes its turn in the queue (TURN_SQL
	 * in claim.c), and then sets where it stopped (its queue's sequence of
	 * its lane, STOP_SEQ); and whether it may read ahead: start past
	 * where the last claim in its turn stopped, when that claim's worker
	 * handles every kind this one does (claim_sql).  Only for a scan from a
	 * position (from[k]); ahead only where turn.  But never at or past
	 * until[k] (its id is not used): a job a NOTIFY said came, that sorts
	 * after from[k].  NULL: no queue, no bound.
	 */
	const bool *turn;
	const bool *ahead;
	const struct queue_position *const *until;
	/* The claimer's lane: claims of a queue take turns per lane. */
	int lane;
	/*
	 * Whether the claim asks for its queues' sweep tickets: a queue's is
	 * granted when no worker of the same kinds swept it in the last
	 * sweep_every_ms (sql/upgrade/029_sweep_tickets.sql); the claim then
	 * reads it from its head, the answer says so (queue_claimed's ticket),
	 * and the ticket's time is now.
	 */
	bool sweep_ask;
	int64_t sweep_every_ms;
	/* > 0: the claim is stopped after this many ms (statement_timeout,
	 * set before it and reset after it), and fails with
	 * SQLSTATE_QUERY_CANCELED. */
	int64_t timeout_ms;
	/* A payload whose text is longer is not sent: the job comes back
	 * with a NULL payload and its size in payload_bytes. */
	int64_t max_payload_bytes;
};

/*
 * Claims due jobs (by priority, then run_at, then id) and running jobs whose
 * lease expired, with FOR UPDATE SKIP LOCKED, in one statement that commits
 * on its own.  req is copied.
 */
int queue_claim(struct dbev *d, const struct queue_claim_req *req,
		queue_claim_fn *cb, void *arg);

/*
 * The claim's text, with the serial and per_key branches if asked for,
 * malloc'd, with *nparams set.  For queue_prepare() and queue_statement().
 */
char *queue_claim_sql(int serial, int per_key, int *nparams);

#endif
