/*
 * renew: the renewal of a worker's leases, one statement for all of them.
 */
#ifndef PGJOBD_RENEW_H
#define PGJOBD_RENEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct dbev;
struct db_status;

/* One job's renewal: whether (id, token) still held and was extended, and
 * whether an operator cancelled it while this token held it. */
struct queue_renewal {
	int64_t id, token;
	bool renewed, cancelled;
};
typedef void queue_renew_fn(void *arg, const struct db_status *st,
			    const struct queue_renewal *r, size_t n);

/* Extends the lease of every (ids[i], tokens[i]) still held to now() +
 * lease_ms, and names locked_by (host:slot) its holder: a worker that
 * reconnected on another slot moves its jobs there.  One renewal per job
 * asked for. */
int queue_renew(struct dbev *d, const int64_t *ids, const int64_t *tokens,
		size_t n, int64_t lease_ms, const char *locked_by,
		queue_renew_fn *cb, void *arg);

/* The renewal's text, and its parameters' count.  For queue_prepare() and
 * queue_statement(). */
extern const char queue_renew_sql[];
#define QUEUE_RENEW_NPARAMS 4

#endif
