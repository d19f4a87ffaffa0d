/*
 * handler_process_proto: protocol 1 of process handlers (docs/handlers.md,
 * "The protocol"), the lines themselves: pgjobd's messages written, a
 * program's messages parsed and checked field by field.  Pure: no loop, no
 * process; handler_process.c decides what a message means for a copy.
 */
#ifndef PGJOBD_HANDLER_PROCESS_PROTO_H
#define PGJOBD_HANDLER_PROCESS_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/job.h"
#include "common/util.h"

/* The protocol version this pgjobd speaks (the hello's "protocol"). */
#define HANDLER_PROCESS_PROTOCOL 1

enum proto_type {
	PROTO_HELLO,
	PROTO_DONE,
	PROTO_FAILED,
	PROTO_SNOOZE,
	PROTO_PROGRESS,
};

/* One message of a program, checked; strings owned, freed by
 * handler_process_proto_free(). */
struct proto_msg {
	enum proto_type type;
	int64_t id;	     /* every type but hello */
	char *result;	     /* done: JSON text, or NULL for none */
	bool result_refused; /* done: a result jsonb would refuse, dropped */
	char *error;	     /* failed: valid text, its last 16 KiB */
	int64_t delay_ms;    /* failed: retry_in, -1 none; snooze: in */
	bool dead;	     /* failed: no more attempts */
	char *progress;	     /* progress: its JSON text, or NULL */
};

/*
 * Parses line (len bytes, without its newline) from a program of the
 * handler of kind.  Returns 0 with *m filled, or -1 with *why saying what
 * breaks the protocol (valid text, without the line's bytes beyond a
 * short quote; caller frees).  A hello must speak this protocol and list
 * kind.  Fields it does not know are ignored.
 */
int handler_process_proto_parse(const char *line, size_t len, const char *kind,
				struct proto_msg *m, char **why);
void handler_process_proto_free(struct proto_msg *m);
/* "done", "failed", ...: static storage. */
const char *handler_process_proto_name(enum proto_type t);

/*
 * Appends the job line of job (and its newline) to b: timeout_ms and
 * deadline_ms (Unix time) the time it has, lease_ms its worker's lease.
 */
void handler_process_proto_job(struct buf *b, const struct job *job,
			       int64_t timeout_ms, int64_t deadline_ms,
			       int64_t lease_ms);
/* Appends a cancel line (and its newline) for job id to b. */
void handler_process_proto_cancel(struct buf *b, int64_t id,
				  const char *reason);
/* Appends the shutdown line (and its newline) to b. */
void handler_process_proto_shutdown(struct buf *b);

#endif
