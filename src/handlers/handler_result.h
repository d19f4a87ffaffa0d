/*
 * handler_result: how a handler's run ended, as every handler type reports
 * it to handler.c and handler.c to the worker.
 */
#ifndef PGJOBD_HANDLER_RESULT_H
#define PGJOBD_HANDLER_RESULT_H

#include <stdbool.h>
#include <stdint.h>

enum handler_outcome { OUTCOME_DONE, OUTCOME_RETRY, OUTCOME_DEAD };

struct handler_result {
	enum handler_outcome outcome;
	char *result;	     /* JSON text or NULL; owned */
	char *error;	     /* message or NULL; owned */
	int64_t retry_in_ms; /* -1: the worker's backoff decides */
	/* With OUTCOME_RETRY: the handler asked for the job to run again
	 * after retry_in_ms, and nothing failed (docs/handlers.md,
	 * "Snoozing"): the attempt is given back, last_error is left as it
	 * was, and the snooze is counted instead, up to a cap. */
	bool snooze;
	/* > 0: the server asked every caller to wait this long (an http
	 * 429 or 503 with Retry-After): an adaptive queue throttles. */
	int64_t throttle_ms;
	/* What the attempt used (docs/handlers.md, "Attempt figures"),
	 * when measured is set: CPU time (user + system) in ms, -1 when
	 * not known; the peak resident set in KiB, -1 when not known (an
	 * in-process handler's would be its worker's). */
	bool measured;
	int64_t cpu_ms;
	int64_t max_rss_kb;
	/* 1: the handler's timeout ended the attempt (counted apart in
	 * /metrics: pgjobd_jobs_timed_out_total). */
	int timed_out;
	/* has_status: status is the command's exit status (exec) or the
	 * answer's HTTP status (http), kept with a failed attempt
	 * (sql/upgrade/013_attempts.sql). */
	bool has_status;
	int status;
};

/* Frees r's strings and resets it to { DONE, NULL, NULL, -1 }, nothing
 * measured, no status. */
void handler_result_clear(struct handler_result *r);

/*
 * How the exec and http modules hand a finished run back to handler.c
 * (from a loop callback): run is handler.c's, res's strings are taken
 * over, and the module's own state is freed by it.
 */
typedef void handler_finish_fn(void *run, struct handler_result *res);

#endif
