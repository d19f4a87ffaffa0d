/*
 * otlp: the spans of a worker's attempts, sent over OTLP/HTTP with the
 * JSON encoding when `tracing: otlp_endpoint` is set (docs/tracing.md,
 * "Exporting spans").
 */
#ifndef PGJOBD_WORKER_OTLP_H
#define PGJOBD_WORKER_OTLP_H

#include <stdint.h>

struct config;
struct job;
struct otlp;
struct stats_worker;

/* A sender for cfg's tracing: endpoint, or NULL when none is set (or
 * libcurl cannot be loaded: logged), counting into st (/metrics). */
struct otlp *otlp_new(const struct config *cfg, struct stats_worker *st);

/*
 * Records the spans of job's attempt, which ended wall_ms after its start
 * with outcome ("done", "retry", "dead", "snoozed", "interrupted", "lost")
 * on worker (its locked_by), if the job has a trace: the attempt's, its
 * wait's, and the job's enqueue's with its first attempt.  Never waits for
 * the sender: a full buffer drops them, and counts them.  o may be NULL.
 */
void otlp_span(struct otlp *o, const struct job *job, int64_t wall_ms,
	       const char *outcome, const char *worker);

/* Sends what is left (bounded by the request's timeout), stops the
 * sender, logs what it sent and dropped; NULL is allowed. */
void otlp_free(struct otlp *o);

#endif
