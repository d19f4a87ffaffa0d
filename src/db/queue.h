/*
 * queue: all job SQL of the worker, as statements beside the code that
 * reads their columns: claims, ends, renewals, the sql handler's
 * transaction and the queue depths for /metrics.  Every write after a claim
 * is compare-and-set on lease_token.  Results reach the caller in the
 * project's own types, from the loop, once per statement sent.
 */
#ifndef PGJOBD_QUEUE_H
#define PGJOBD_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/job.h"

struct dbev;
struct db_status;

/*
 * Prepares the claim, finish and renew statements on a new connection;
 * call it before any of them is sent.  serial and per_key: whether any
 * queue the claim asks for is in that mode (its branch is left out if not).
 */
void queue_prepare(struct dbev *d, int serial, int per_key);

/*
 * The text of a statement queue_prepare() prepares, by its name
 * (pgjob_claim with every mode's branch, pgjob_finish, pgjob_finish_delete,
 * their _range forms, pgjob_renew), malloc'd, with *nparams set; NULL for
 * another name.  For tests of the plans it gets
 * (tests/integration/test_plans.c).
 */
char *queue_statement(const char *name, int *nparams);

/* A place in a queue's index of available jobs, as text for the next
 * claim. */
struct queue_position {
	char priority[8];
	char run_at[24]; /* microseconds since the epoch */
	char id[24];
};

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
	 * in queue.c), and then sets where it stopped (its queue's sequence of
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
	 * sweep_every_ms (sql/029_sweep_tickets.sql); the claim then reads
	 * it from its head, the answer says so (queue_claimed's ticket), and
	 * the ticket's time is now.
	 */
	bool sweep_ask;
	int64_t sweep_every_ms;
	/* > 0: the claim is stopped after this many ms (statement_timeout,
	 * set before it and reset after it), and fails with SQLSTATE
	 * 57014. */
	int64_t timeout_ms;
	/* A payload whose text is longer is not sent: the job comes back
	 * with a NULL payload and its size in payload_bytes. */
	int64_t max_payload_bytes;
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
 * kept) and sets the entries it takes to NULL or not, as it likes: queue.c
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

/*
 * Claims due jobs (by priority, then run_at, then id) and running jobs whose
 * lease expired, with FOR UPDATE SKIP LOCKED, in one statement that commits
 * on its own.  req is copied.
 */
int queue_claim(struct dbev *d, const struct queue_claim_req *req,
		queue_claim_fn *cb, void *arg);

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

/* The end of one attempt, as queue_finish() writes it. */
struct queue_finish {
	int64_t id;
	int64_t token;
	enum job_state state; /* done, available (retry), dead */
	const char *result;   /* JSON text or NULL */
	const char *error;    /* or NULL: keep the last error */
	int64_t delay_ms;     /* available: run again after this long */
	int refund;	      /* give the attempt back (shutdown, snooze) */
	/* A snooze (state available, refund set, no error): counted on the
	 * row; past QUEUE_MAX_SNOOZES it is written dead instead. */
	int snooze;
	/* What the attempt used (sql/012_attempt_usage.sql): wall time and
	 * CPU time in ms, peak RSS in KiB; -1: not measured (NULL). */
	int64_t wall_ms, cpu_ms, max_rss_kb;
	/* A failure's exit status (exec) or HTTP status (http), -1: none
	 * (sql/013_attempts.sql: last_status, and its attempt's row). */
	int64_t status;
};

/* The most snoozes a job may have (docs/handlers.md, "Snoozing"); the
 * same as text for the statements. */
#define QUEUE_MAX_SNOOZES   1000
#define QUEUE_MAX_SNOOZES_S "1000"

/* The ids whose end was written, sorted (borrowed for the call); an end
 * whose id is missing had lost its lease.  capped (sorted, a subset of
 * written): the snoozes written dead, past QUEUE_MAX_SNOOZES.  Look one up
 * with queue_id_in(). */
typedef void queue_finish_fn(void *arg, const struct db_status *st,
			     const int64_t *written, size_t n,
			     const int64_t *capped, size_t ncapped);

/*
 * Writes the nf ends f in one statement, each only where id, token and state
 * 'running' still match.  With retention_ms 0, a job that ends done is
 * deleted, not kept; otherwise a plain one is moved to pgjob.jobs_done
 * (sql/019_jobs_done.sql), the others written in place.
 */
int queue_finish(struct dbev *d, const struct queue_finish *f, size_t nf,
		 int64_t retention_ms, queue_finish_fn *cb, void *arg);
int queue_id_in(const int64_t *sorted, size_t n, int64_t id);

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

/* How an sql handler's transaction ended. */
enum queue_sql_end {
	QUEUE_SQL_DONE,	     /* the statement and the job's end committed */
	QUEUE_SQL_FAILED,    /* the statement failed: all rolled back */
	QUEUE_SQL_LEASE,     /* the lease was lost: nothing ran */
	QUEUE_SQL_CONN_LOST, /* unknown: the connection broke */
	QUEUE_SQL_TIMED_OUT, /* FAILED by statement_timeout (57014) */
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

/* The name that queue_depths(), queue_dead() and queue_unserved() give the
 * sum of the queues
 * that are not configured (docs/operations.md, "Metrics"). */
#define QUEUE_OTHER "(other)"

/* One queue's depth across the cluster. */
struct queue_depth {
	char name[64];
	bool other; /* the sum of the queues not configured (QUEUE_OTHER) */
	int64_t due, running;
	int64_t oldest_due_ms; /* age of the oldest due job */
	/* Flow control: whether it has a row in pgjob.limits, is paused,
	 * its due jobs held back by each limit (paused, throttled,
	 * concurrency, rate, key_concurrency), its tokens (thousandths; -1:
	 * no rate). */
	bool limited, paused;
	int64_t waiting[5];
	int64_t tokens_milli;
	/* Available jobs not due yet; available jobs of a kind not in the
	 * kinds given to queue_depths(). */
	int64_t scheduled, unhandled;
};
typedef void queue_depths_fn(void *arg, const struct db_status *st,
			     const struct queue_depth *q, size_t n);
/*
 * The depth of every queue with unfinished jobs or limits, at most max
 * rows: one per queue of queues[0..nqueues) (the configured ones, at most
 * max - 1, by name), then one (other set, named QUEUE_OTHER) that sums
 * every other queue, if there is any; kinds[0..nkinds) are the kinds this
 * instance handles.  timeout_ms > 0 stops the read after that long
 * (SQLSTATE 57014).
 */
int queue_depths(struct dbev *d, int max, const char *const *queues,
		 size_t nqueues, const char *const *kinds, size_t nkinds,
		 int64_t timeout_ms, queue_depths_fn *cb, void *arg);

/* Dead jobs of one queue. */
struct queue_dead {
	char name[64];
	int64_t dead;
};
typedef void queue_dead_fn(void *arg, const struct db_status *st,
			   const struct queue_dead *q, size_t n);
/* Dead jobs per queue, at most max rows, as queue_depths(): the configured
 * queues each, the others summed under QUEUE_OTHER. */
int queue_dead(struct dbev *d, int max, const char *const *queues,
	       size_t nqueues, queue_dead_fn *cb, void *arg);

/* A count of one queue. */
struct queue_count {
	char name[64];
	int64_t n;
};
typedef void queue_count_fn(void *arg, const struct db_status *st,
			    const struct queue_count *q, size_t n);
/* Available jobs per queue whose kind and queue no live worker serves
 * (pgjob.unserved(), sql/032; live: a heartbeat within live_ms): the
 * configured queues (at most max - 1) by name, every other queue summed
 * as QUEUE_OTHER; queues without such jobs are left out. */
int queue_unserved(struct dbev *d, int max, const char *const *queues,
		   size_t nqueues, int64_t live_ms, queue_count_fn *cb,
		   void *arg);

/* Workflows (docs/workflows.md): running now, and done and failed since
 * the schema was made, pruned ones included. */
struct queue_workflows {
	int64_t running, done_total, failed_total;
};
typedef void queue_workflows_fn(void *arg, const struct db_status *st,
				const struct queue_workflows *w);
int queue_workflows(struct dbev *d, queue_workflows_fn *cb, void *arg);

#endif
