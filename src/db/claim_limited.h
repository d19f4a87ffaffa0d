/*
 * claim_limited: the statements of flow control (docs/queues.md): the
 * claim of a queue with a row in pgjob.limits, under its limits; the
 * config's limits published again; a queue throttled.
 */
#ifndef PGJOBD_CLAIM_LIMITED_H
#define PGJOBD_CLAIM_LIMITED_H

#include <stddef.h>
#include <stdint.h>

#include "db/claimed.h"

struct dbev;

/* A claim of one limited queue. */
struct queue_limited_req {
	const char *queue;
	int want;
	const char *const *kinds;
	size_t nkinds;
	const char *mode;
	const char *locked_by;
	int64_t lease_ms;
	int64_t max_payload_bytes;
};

/*
 * Claims up to want jobs of a queue that has a row in pgjob.limits, under
 * its limits (pgjob.claim_limited()), in one statement that commits on its
 * own.  The answer is a struct queue_claimed of one queue, whose flow says
 * why fewer came, or that the queue has no limits any more.
 */
int queue_claim_limited(struct dbev *d, const struct queue_limited_req *req,
			queue_claim_fn *cb, void *arg);

/* Publishes a config's limits again (pgjob.publish_limits(); see
 * session_publish_limits()), answer ignored. */
int queue_publish_limits(struct dbev *d, const char *limits_json);

/* Throttles queue: none of its jobs starts in the next ms milliseconds
 * (pgjob.throttle(); an http 429 or 503 of an adaptive queue). */
int queue_throttle(struct dbev *d, const char *queue, int64_t ms);

/* The limited claim's text (a call of pgjob.claim_limited()), and its
 * parameters' count.  For queue_prepare(). */
extern const char queue_claim_limited_sql[];
#define QUEUE_CLAIM_LIMITED_NPARAMS 7

#endif
