/*
 * handler_child: a handler's child process, an exec handler's command
 * (handler_exec.c) or a process handler's copy (handler_process_copy.c):
 * how it is started (no shell; its own session and process group, the
 * user, group and limits given, SIGKILL when the worker dies), the record
 * of its group that lets the supervisor kill it when its worker dies, its
 * exit, and its pipes read in bounded pieces.
 */
#ifndef PGJOBD_HANDLER_CHILD_H
#define PGJOBD_HANDLER_CHILD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <ev.h>

struct run_as;
struct exec_limits;

/* The PATH of every command, unless its env: sets another. */
#define HANDLER_CHILD_PATH "/usr/local/bin:/usr/bin:/bin"

/* Chunks read from a pipe in one callback, so one child cannot hog. */
#define HANDLER_CHILD_READ_ROUNDS 16

/*
 * The program to run: argv0 itself when it has a slash, else the first
 * executable file named argv0 in the PATH of env, the child's whole
 * environment (HANDLER_CHILD_PATH when it sets none; never the worker's).
 * Returns a new string (caller frees), or NULL with *err set to an errno
 * (ENOENT, or EACCES for a file found but not executable).
 */
char *handler_child_resolve(const char *argv0, char *const *env, int *err);

/*
 * Starts argv (resolved in env's PATH) with the whole environment env: its
 * own session and process group (recorded for the supervisor, see below),
 * the user, group and limits given (either may be NULL), SIGKILL when the
 * worker dies, pipes on 0, 1 and 2 whose other ends here are non-blocking
 * and close-on-exec.  Returns 0, or -1 with *err set to "could not start
 * ARGV0: ..." (caller frees).  The caller watches, kills and reaps the
 * child; once it has exited, handler_child_forget(pid) before it is
 * reaped.
 */
struct handler_child {
	pid_t pid; /* also the process group id */
	int in_fd, out_fd, err_fd;
};
int handler_child_start(char *const *argv, char *const *env,
			const struct run_as *as,
			const struct exec_limits *limits,
			struct handler_child *c, char **err);
void handler_child_forget(pid_t pid);

/*
 * Where the commands' process groups are recorded (a table of n entries,
 * 0 = free), so that the supervisor can kill them when their worker dies
 * without stopping them itself.  The table is borrowed (it lives in memory
 * shared with the supervisor); NULL: none.
 */
void handler_child_set_pgid_table(int32_t *table, int n);

/* sig to pid's process group, and to pid in case it left it; pid <= 0:
 * nothing. */
void handler_child_signal(pid_t pid, int sig);
/* True once pid has exited (it is not reaped). */
bool handler_child_exited(pid_t pid);
/* Closes *fd if open, and sets it to -1. */
void handler_child_close(int *fd);

/*
 * Reads what the non-blocking *fd holds now, at most rounds chunks, each
 * handed to take(arg, ...), which returns false to stop reading.  At EOF
 * or on an error, w is stopped on loop and *fd closed: then it returns
 * true, else false.
 */
typedef bool handler_child_take_fn(void *arg, const char *p, size_t n);
bool handler_child_read(struct ev_loop *loop, int *fd, ev_io *w, int rounds,
			handler_child_take_fn *take, void *arg);

#endif
