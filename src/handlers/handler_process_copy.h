/*
 * handler_process_copy: one program of a process handler (a "copy"): its
 * start, its three pipes, its stderr to the log, its kill and its reaping.
 * What its lines mean and what becomes of its jobs is its owner's
 * (handler_process.c, the only user), told through the callbacks given at
 * its start: this file calls nothing of its owner's by name.
 */
#ifndef PGJOBD_HANDLER_PROCESS_COPY_H
#define PGJOBD_HANDLER_PROCESS_COPY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <ev.h>

#include "common/log.h"
#include "common/util.h"
#include "handlers/handler_result.h"

#define PROC_STDERR_LINE 2048 /* longer stderr lines are cut */
#define PROC_STDERR_TAIL 2048 /* kept for the error of a copy that ended */

struct handler_conf;
struct proc_copy;
struct proc_job; /* the owner's: a job a copy holds */

enum copy_state {
	COPY_STARTING, /* spawned, no hello yet */
	COPY_READY,    /* takes jobs */
	COPY_LEAVING,  /* recycled or shut down: takes no more */
};

/* What a copy tells its owner, given at its start. */
struct proc_copy_ops {
	/* A line c wrote (without its newline). */
	void (*on_line)(struct proc_copy *c, const char *s, size_t len);
	/* c's exit (reaped, status as waitpid()'s); c is freed by it. */
	void (*on_exit)(struct proc_copy *c, int status);
	/* The job whose context c's stderr lines carry, or NULL. */
	const struct log_job *(*stderr_job)(const struct proc_copy *c);
};

struct proc_copy {
	const struct proc_copy_ops *ops;
	void *owner; /* the owner's, for its callbacks */
	struct ev_loop *loop;
	const struct handler_conf *h;
	unsigned number; /* for log lines: the pool's nth start */
	enum copy_state state;
	pid_t pid;   /* also its process group; 0 once reaped */
	pid_t shown; /* its pid, for log lines */
	int pidfd, in_fd, out_fd, err_fd;
	ev_io pid_w, in_w, out_w, err_w;
	ev_timer start_w;   /* the startup deadline */
	ev_timer kill_w;    /* after the shutdown message: SIGTERM, SIGKILL */
	ev_timer poll_w;    /* exit polled without a pidfd */
	ev_prepare flush_w; /* writes wbuf before the loop waits */
	int kill_step;
	struct buf wbuf; /* lines not yet written to its stdin */
	size_t woff;
	struct buf line; /* the stdout line being read */
	char errline[PROC_STDERR_LINE];
	size_t errlen;
	bool errcut;
	char tail[PROC_STDERR_TAIL]; /* the last stderr lines */
	size_t tail_len;
	struct proc_job *jobs; /* in flight (the owner's list) */
	int njobs;
	int64_t answered;
	bool planned; /* we asked it to go: not a crash */
	char *why;    /* owned: why we killed it, or NULL */
	struct proc_copy *next_leaving;
};

/*
 * Starts h's program on loop, as copy number, for owner, whom it tells
 * what happens through ops (borrowed); slot is the worker's (PGJOB_SLOT).
 * Returns the copy (freed with handler_process_copy_free()), or NULL with
 * *err set (caller frees).
 */
struct proc_copy *handler_process_copy_start(const struct proc_copy_ops *ops,
					     void *owner, struct ev_loop *loop,
					     const struct handler_conf *h,
					     unsigned number, int slot,
					     char **err);
/* Writes what was appended to c->wbuf since from (dropped when its stdin
 * is closed): before the loop next waits, so that the lines of one turn
 * (the jobs sent after a batch of answers) go out in one write. */
void handler_process_copy_flush(struct proc_copy *c, size_t from);
/* The shutdown message, then SIGTERM after 5 s and SIGKILL 1 s later. */
void handler_process_copy_shutdown(struct proc_copy *c);
/* SIGKILL to its process group now; takes why (the end of its jobs). */
void handler_process_copy_kill(struct proc_copy *c, char *why);
/* A protocol violation: logged, and the copy killed. */
void handler_process_copy_violation(struct proc_copy *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Its resident set in bytes (/proc/PID/statm), or -1. */
int64_t handler_process_copy_rss(const struct proc_copy *c);
/* A line about c: kind=K copy=N pid=P: ... */
void handler_process_copy_log(const struct proc_copy *c, int level,
			      const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* "exit status 3", "killed by signal 9"; caller frees. */
char *handler_process_copy_status(int status);
/* The last lines of its stderr, or ""; caller frees. */
char *handler_process_copy_tail(const struct proc_copy *c);
/* Stops its watchers, closes its descriptors, frees it (reaped first). */
void handler_process_copy_free(struct proc_copy *c);
/*
 * At the worker's exit, the loop done: the shutdown message to each of
 * all[0..n), then SIGTERM after 5 s, SIGKILL 1 s later; reaps them all.
 */
void handler_process_copy_stop_all(struct proc_copy **all, size_t n);

#endif
