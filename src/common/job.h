/*
 * job: one claimed job as the worker and its handlers know it, and the
 * states a job goes through (the state column of pgjob.jobs).
 */
#ifndef PGJOBD_JOB_H
#define PGJOBD_JOB_H

#include <stdint.h>

#include "common/trace.h"

struct handler_conf;

/* The states of pgjob.jobs.state (its check constraint lists the same).
 * The finish sends an end's state as this code (STATE_AT in db/finish.c):
 * keep the order. */
enum job_state {
	JOB_AVAILABLE, /* waiting: due at run_at */
	JOB_RUNNING,   /* claimed, under a lease */
	JOB_DONE,
	JOB_DEAD,
	JOB_CANCELLED,
};

/* "available", "running", ... as in the database. */
const char *job_state_name(enum job_state s);

/* One claimed job; strings owned by the job, freed by job_free(). */
struct job {
	int64_t id;
	char *kind;
	char *queue;
	char *payload; /* JSON text */
	int attempt;   /* 1 on the first run */
	int max_attempts;
	int64_t lease_token;
	char *ordering_key; /* or NULL */
	/* Attempts whose worker vanished (docs/daemon.md, "Attempts"). */
	int lost_attempts;
	/* The payload's size in bytes as the claim measured it; payload is
	 * NULL when that was over max_payload_bytes. */
	int64_t payload_bytes;
	/* Its time in the queue: the claim's now() minus its run_at, in ms
	 * (/metrics' pgjobd_job_queue_wait_seconds); -1: not known. */
	int64_t wait_ms;
	/* The traceparent it was enqueued in (pgjob.jobs.traceparent), or
	 * NULL; and the one its handler gets for this attempt: the same
	 * trace, the attempt's own span id (common/trace.h), or "". */
	char *trace;
	char traceparent[TRACE_LEN + 1];
	/* For a job in a trace, its spans before the attempt
	 * (docs/tracing.md) as the claim measured them, in us before the
	 * claim's now(): its enqueue (created_at), and the start of its wait
	 * (created_at or run_at, the later); -1 without a trace. */
	int64_t enqueued_us, waited_us;
	/* It had children when it was claimed (pgjob.jobs.children): its
	 * end may make them due, and the worker claims right behind the end
	 * (worker/held.c, claim_after_end()).  0 when the claim does not say
	 * (a limited claim's). */
	int parent;
	const struct handler_conf *handler; /* borrowed from the config */
};

/* Frees the strings a job owns (every one: a struct job held by value, as
 * the worker's held jobs, is cleared with it, so that a string added to
 * the job is freed in one place; until 2026-12-07 a held job's trace was
 * not, 78 bytes lost a job in a trace). */
void job_clear(struct job *job);
/* Frees job and its strings; NULL is allowed. */
void job_free(struct job *job);

#endif
