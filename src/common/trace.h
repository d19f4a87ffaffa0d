/*
 * trace: the W3C trace context (https://www.w3.org/TR/trace-context/) a job
 * carries from its enqueue to its handlers (docs/tracing.md).
 */
#ifndef PGJOBD_TRACE_H
#define PGJOBD_TRACE_H

#include <stdbool.h>
#include <stdint.h>

/* "00-" 32 hex "-" 16 hex "-" 2 hex. */
#define TRACE_LEN 55

/* Whether tp is a traceparent of version 00, exactly as
 * pgjob.trace_context() takes it: lowercase hex, ids not all zeros. */
bool trace_valid(const char *tp);

/*
 * The traceparent an attempt gives its handler: the trace id and flags of
 * the job's (stored, its enqueue's), and a new random span id, the
 * attempt's own span.  Writes "" and returns false when stored is NULL or
 * not valid.
 */
bool trace_attempt(const char *stored, char out[TRACE_LEN + 1]);

/* A new random span id, 16 lowercase hex digits, never all zeros. */
void trace_span_id(char out[17]);

/*
 * The span id of job_id's enqueue in trace (32 hex digits): the same each
 * time it is asked, so that a span sent again is the same span, and never
 * all zeros.  Not a secret: mixes the two, it does not hide them.
 */
void trace_enqueue_span_id(const char *trace, int64_t job_id, char out[17]);

#endif
