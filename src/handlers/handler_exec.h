/*
 * handler_exec: runs a command as a child process on a libev loop, for a
 * job's exec handler or a leased task (see handler_exec.c).  Used by
 * handler.c only.
 */
#ifndef PGJOBD_HANDLER_EXEC_H
#define PGJOBD_HANDLER_EXEC_H

#include <stdint.h>
#include <sys/types.h>

#include "common/log.h"
#include "handlers/handler_result.h"

struct ev_loop;
struct run_as;
struct exec_limits;
struct exec_run;

/* An exec run, whoever asks for it: a job's exec handler or a leased task.
 * Everything is borrowed: env and argv for the start, the rest until the
 * run is finished. */
struct exec_spec {
	char *const *argv;	     /* argv[0]: the program */
	char *const *env;	     /* the whole environment */
	const char *input;	     /* stdin (a job's payload), or NULL */
	int64_t timeout_ms;	     /* 0: none */
	const struct run_as *run_as; /* NULL: pgjobd's own user */
	/* setrlimit() in the child before its exec; NULL: none. */
	const struct exec_limits *limits;
	struct log_job lj; /* a job's log lines name it */
	const char *task;  /* or a task's, with its partition */
	int partition;
};

/*
 * Spawns spec's command for run.  Returns the child's state (freed with
 * handler_exec_free()), or NULL with *fail set to a RETRY result when the
 * command cannot be started.  When the child is gone, finish(run, ...) is
 * called from a loop callback, with the child's CPU time and peak RSS
 * (wait4()) in the result; an attempt that a limit ended names it in its
 * error ("cpu limit 60s reached (SIGXCPU)").
 */
struct exec_run *handler_exec_start(void *run, struct ev_loop *loop,
				    const struct exec_spec *spec,
				    handler_finish_fn *finish,
				    struct handler_result *fail);
/* SIGTERM to the command's process group, SIGKILL after min(5 s,
 * timeout); finish follows. */
void handler_exec_stop(struct exec_run *x, const char *why);
/* Stops every watcher, closes every descriptor; the child must be reaped. */
void handler_exec_free(struct exec_run *x);

#endif
