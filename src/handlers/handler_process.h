/*
 * handler_process: runs jobs through long-running programs that speak
 * pgjobd's line protocol on their standard streams (see
 * handler_process.c, docs/handlers.md "process").  Used by handler.c only.
 */
#ifndef PGJOBD_HANDLER_PROCESS_H
#define PGJOBD_HANDLER_PROCESS_H

#include <stddef.h>
#include <stdint.h>

#include "common/job.h"
#include "handlers/handler_result.h"

struct ev_loop;
struct config;
struct proc_job;

/* Where copies that ended unasked are counted (see handler.h). */
void handler_process_set_crash_counter(uint64_t *counter);
/* The kinds (borrowed from the config) whose program is in a crash loop
 * now, at most max of them into kinds; how many. */
size_t handler_process_crash_loops(const char **kinds, size_t max);
/* Per worker: cfg is borrowed until handler_process_fini(). */
void handler_process_init(const struct config *cfg);
/*
 * Shuts every copy down: a shutdown message, then SIGTERM and SIGKILL
 * after a grace (blocking, at most about 6 s), and reaps them.  Jobs still
 * in flight are abandoned (their done is never called).  Safe to call
 * twice.
 */
void handler_process_fini(void);

/*
 * Hands job to a copy of its handler's program (starting one when no copy
 * has room and the handler allows another), or queues it until one has.
 * slot is the worker's (PGJOB_SLOT of the copies it starts).
 * job is borrowed until finish.  Returns the job's state here (freed with
 * handler_process_free()), or NULL with *fail set to a RETRY result.
 * finish(run, ...) is called from a loop callback when the job ends.
 */
struct proc_job *handler_process_start(void *run, struct ev_loop *loop,
				       const struct job *job, int slot,
				       handler_finish_fn *finish,
				       struct handler_result *fail);
/* A cancel message to its copy; the copy is killed if the job has not
 * ended min(5 s, timeout) later.  finish follows. */
void handler_process_stop(struct proc_job *pj, const char *why);
/* Frees what handler_process_start() returned, once finish has run. */
void handler_process_free(struct proc_job *pj);

#endif
