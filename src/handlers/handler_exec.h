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

/* The PATH of every command, unless its env: sets another. */
#define HANDLER_EXEC_PATH "/usr/local/bin:/usr/bin:/bin"

/*
 * The program to run: argv0 itself when it has a slash, else the first
 * executable file named argv0 in the PATH of env, the child's whole
 * environment (HANDLER_EXEC_PATH when it sets none; never the worker's).
 * Returns a new string (caller frees), or NULL with *err set to an errno
 * (ENOENT, or EACCES for a file found but not executable).
 */
char *handler_exec_resolve(const char *argv0, char *const *env, int *err);

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

/*
 * A long-running program (a process handler's copy, handler_process.c),
 * started as an exec handler's command is: its own process group (recorded
 * for the supervisor, see below), the user, group and limits given,
 * SIGKILL when the worker dies, pipes on 0, 1 and 2 whose other ends here
 * are non-blocking and close-on-exec.  Returns 0, or -1 with *err set
 * (caller frees).  The caller watches, kills and reaps the child; once it
 * has exited, handler_exec_forget(pid) before it is reaped.
 */
struct exec_child {
	pid_t pid; /* also the process group id */
	int in_fd, out_fd, err_fd;
};
int handler_exec_spawn(char *const *argv, char *const *env,
		       const struct run_as *as,
		       const struct exec_limits *limits, struct exec_child *c,
		       char **err);
void handler_exec_forget(pid_t pid);

/*
 * Where the commands' process groups are recorded (a table of n entries,
 * 0 = free), so that the supervisor can kill them when their worker dies
 * without stopping them itself.  The table is borrowed (it lives in memory
 * shared with the supervisor); NULL: none.
 */
void handler_exec_set_pgid_table(int32_t *table, int n);

#endif
