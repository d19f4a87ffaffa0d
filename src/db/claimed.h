/*
 * claimed: what a claim took, of either claim (claim.h, claim_limited.h),
 * and what it said of each queue's flow control: the answer's types, read
 * from the statement's rows in claimed.c.
 */
#ifndef PGJOBD_CLAIMED_H
#define PGJOBD_CLAIMED_H

#include <stdbool.h>
#include <stdint.h>

struct db_status;
struct job;

/* A place in a queue's index of available jobs, as text for the next
 * claim. */
struct queue_position {
	char priority[8];
	char run_at[24]; /* microseconds since the epoch */
	char id[24];
};

/* Why a claim of a limited queue took fewer jobs than it asked for. */
enum queue_wait {
	QUEUE_WAIT_PAUSED,
	QUEUE_WAIT_THROTTLED,	    /* an http 429/503's Retry-After */
	QUEUE_WAIT_CONCURRENCY,	    /* global_concurrency */
	QUEUE_WAIT_RATE,	    /* rate: the bucket is empty */
	QUEUE_WAIT_KEY_CONCURRENCY, /* per_key_concurrency */
	QUEUE_WAIT_KEY_RATE,	    /* rate_per_key */
	QUEUE_WAIT_BUSY, /* the queue's row held, or a claim undone */
	QUEUE_WAIT_N
};
const char *queue_wait_name(enum queue_wait w);

/* What a claim said of a queue's flow control. */
enum queue_flow {
	QUEUE_FLOW_NONE,
	QUEUE_FLOW_LIMITED,   /* it has a row in pgjob.limits: the ordinary
				 claim left it (queue_claim_limited()) */
	QUEUE_FLOW_UNLIMITED, /* it has none any more (queue_claim()) */
	QUEUE_FLOW_WAIT,      /* a limit held the claim back: why */
};
struct queue_flow_said {
	enum queue_flow flow;
	enum queue_wait why;
	int64_t retry_ms; /* WAIT: look again after this long; -1: when
			     something ends, or at the next poll */
};

/*
 * What a claim took.  jobs[0..njobs) are the claimed jobs (handler left
 * NULL for the caller to resolve); the callee owns each (job_free(), or
 * kept) and sets the entries it takes to NULL or not, as it likes: claimed.c
 * frees the arrays, never the jobs.  queue_of[i] is the index in the
 * request of job i's queue (a job's queue may be another than its
 * handler's).  Per queue k of the request,
 * has_pos[k] says whether its parallel branch took a job and pos[k] where
 * it stopped.
 */
struct queue_claimed {
	struct job **jobs;
	int njobs;
	const int *queue_of; /* per job: its queue's index in the request */
	const struct queue_position *pos;
	const bool *has_pos;
	const struct queue_flow_said *flow; /* per queue of the request */
	/* Per queue of the request: its sweep ticket was granted (see
	 * queue_claim_req's sweep_ask). */
	const bool *ticket;
	/* How long the claim waited for its turn, in ms; -1: it took none. */
	int turn_wait_ms;
};
typedef void queue_claim_fn(void *arg, const struct db_status *st,
			    struct queue_claimed *c);

#endif
