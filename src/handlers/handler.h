/*
 * handler: runs one claimed job with the handler its kind is configured
 * with, on the worker's libev loop, and reports an outcome.
 *
 * handler.c is the registry: it dispatches on the handler type, delivers
 * every result from the loop (never from inside handler_start() or
 * handler_stop()), and owns the run.  handler_exec.c runs exec handlers
 * (clone and execve, pidfd, pipes); handler_http.c POSTs to webhooks (libcurl's
 * multi interface on the loop); handler_plugin.c loads and calls plugins
 * (include/pgjobd/plugin.h).  The protocols are described in
 * docs/handlers.md.
 *
 * Ownership: the worker owns each struct job and keeps it alive until the
 * done callback of its run has returned; the run only borrows it.  A struct
 * handler_run belongs to this module and is freed right after done returns.
 */
#ifndef PGJOBD_HANDLER_H
#define PGJOBD_HANDLER_H

#include <stddef.h>
#include <stdint.h>

#include "common/job.h"

#include "common/log.h"

struct ev_loop;
struct config;
struct handler_conf;
struct task_conf;

enum handler_outcome { OUTCOME_DONE, OUTCOME_RETRY, OUTCOME_DEAD };

struct handler_result {
	enum handler_outcome outcome;
	char *result;	     /* JSON text or NULL; owned */
	char *error;	     /* message or NULL; owned */
	int64_t retry_in_ms; /* -1: the worker's backoff decides */
};

/* Frees r's strings and resets it to { DONE, NULL, NULL, -1 }. */
void handler_result_clear(struct handler_result *r);

/*
 * Called exactly once per started run, from the loop, never from inside
 * handler_start() or handler_stop(); the callee takes ownership of res's
 * strings (it may move them out and set them to NULL; whatever is left is
 * freed after it returns).  After it returns, the run is freed by the
 * handler module: the run pointer must not be used again.
 */
typedef void (*handler_done_fn)(void *arg, struct handler_result *res);

struct handler_run;

/*
 * Per-worker setup: dlopen every plugin handler of cfg, check its ABI, call
 * its init; initialise libcurl (curl_global_init) for http handlers and warn
 * once about each one with tls_verify off.  cfg is borrowed until
 * handler_fini().  Returns 0, or -1 with a log line when at least one plugin
 * is unusable: that state is recorded and the jobs of such a handler get
 * OUTCOME_RETRY with a last_error naming the problem instead of running
 * (fixing the deployment recovers them).  Calling it again first undoes the
 * previous call.
 */
int handler_init(const struct config *cfg);
/*
 * Calls every plugin's fini and dlcloses them; frees the libcurl state of
 * every loop that ran http jobs (its watchers are stopped, so call it before
 * ev_loop_destroy() of such a loop) and calls curl_global_cleanup.  An http
 * run still in flight is abandoned: its done is never called and it must
 * not be stopped.  Safe to call twice.
 */
void handler_fini(void);

/*
 * Where the exec handler records the process group of every command it
 * runs (a table of n entries, 0 = free), so that the supervisor can kill
 * them when this worker dies without stopping them itself.  The table is
 * borrowed (it lives in memory shared with the supervisor); NULL: none.
 */
void handler_set_pgid_table(int32_t *table, int n);

/*
 * Starts the command of a leased task (its partition, under the lease's
 * fencing token) on loop, as an exec run: its environment is PATH,
 * PGJOB_TASK, PGJOB_PARTITION, PGJOB_FENCING_TOKEN and PGJOB_SLOT, it has
 * no timeout, and its log lines name task=NAME partition=N.  task is
 * borrowed until done returns.  Otherwise as handler_start().
 */
struct handler_run *handler_start_task(struct ev_loop *loop,
				       const struct task_conf *task,
				       int partition, int64_t token, int slot,
				       handler_done_fn done, void *arg);

/*
 * Starts job on loop.  slot is the worker's slot (PGJOB_SLOT).  job is
 * borrowed until done returns.  Returns the run (owned by this module; valid
 * until done returns); never NULL: a job that cannot be started (no handler,
 * unusable plugin, missing executable) is still reported through done.
 */
struct handler_run *handler_start(struct ev_loop *loop, struct job *job,
				  int slot, handler_done_fn done, void *arg);

/*
 * Stops a running run (lease lost, shutdown, cancel): exec, SIGTERM to the
 * process group, SIGKILL after a grace period of min(5 s, timeout); http, the
 * request is aborted at once (its connection closed).  done is still
 * called once, later, from the loop, with OUTCOME_RETRY and an error
 * starting "stopped: <why>"; a plugin run that has not started yet is not
 * started.  A run whose result is already known (its command could not be
 * started) keeps that result.  A second call, or a call from inside done,
 * does nothing; a call after done has returned is a use after free.  why is
 * copied.
 */
void handler_stop(struct handler_run *run, const char *why);

/*
 * Internal: shared by handler.c, handler_exec.c and handler_plugin.c.
 */

/* Delivers res to the run's done callback, then frees the run.  Only from a
 * loop callback.  res's strings are taken over. */
void handler_finish(struct handler_run *run, struct handler_result *res);

/*
 * Parses a retry delay: a number of seconds (fractions allowed) or a string
 * "<number><unit>" with unit ms, s, m, h or d ("30s", "1.5m"; a bare number
 * is seconds).  Returns 0 and sets *ms, or -1 for anything else, negative
 * values included.
 */
int handler_parse_duration(const char *s, int64_t *ms);
/* Formats ms as "30s", "5m", "1500ms" into buf (at least 32 bytes). */
const char *handler_format_duration(int64_t ms, char *buf, size_t len);
/*
 * Replaces every byte that is not part of valid UTF-8, and every NUL, with
 * '?', in place over s[0..len), so the text can go into a PostgreSQL text
 * column.  Leading UTF-8 continuation bytes (a character cut in half by a
 * tail) are replaced too.
 */
void handler_sanitize_utf8(char *s, size_t len);
/*
 * True when s[0..len) is JSON text that PostgreSQL's jsonb input accepts:
 * RFC 8259 (no raw control characters in strings, JSON whitespace only),
 * valid UTF-8 without NUL, no \u0000 or unpaired surrogate escape, numbers
 * that numeric can hold.  Nesting deeper than the server's stack allows is
 * not checked.
 */
int handler_is_json(const char *s, size_t len);

/* exec (handler_exec.c). */

/* The PATH of every command, unless its env: sets another. */
#define HANDLER_DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin"

struct run_as;

/* An exec run, whoever asks for it: a job's exec handler or a leased task.
 * Everything is borrowed: env and argv for the start, the rest until done
 * returns. */
struct exec_spec {
	char *const *argv;	     /* argv[0]: the program */
	char *const *env;	     /* the whole environment */
	const char *input;	     /* stdin (a job's payload), or NULL */
	int64_t timeout_ms;	     /* 0: none */
	const struct run_as *run_as; /* NULL: pgjobd's own user */
	struct log_job lj;	     /* a job's log lines name it */
	const char *task;	     /* or a task's, with its partition */
	int partition;
};
struct exec_run;
/*
 * Spawns the job's command.  Returns the child's state (freed with
 * handler_exec_free()), or NULL with *fail set to a RETRY result when the
 * command cannot be started.  When the child is gone the exec module calls
 * handler_finish(run, ...) from a loop callback.
 */
struct exec_run *handler_exec_start(struct handler_run *run,
				    struct ev_loop *loop,
				    const struct exec_spec *spec,
				    struct handler_result *fail);
void handler_exec_stop(struct exec_run *x, const char *why);
/* Stops every watcher, closes every descriptor; the child must be reaped. */
void handler_exec_free(struct exec_run *x);

/* http (handler_http.c). */
struct http_run;
/* curl_global_init, and a warning per http handler without tls_verify.
 * Returns 0. */
int handler_http_init(const struct config *cfg);
/* Frees every loop's multi handle; abandons requests still in flight. */
void handler_http_fini(void);
/*
 * Starts the POST of job's payload to its handler's url on loop; job is
 * borrowed until done returns.  Returns the request's state (freed with
 * handler_http_free()), or NULL with *fail set to a RETRY result when it
 * cannot be made (a url libcurl cannot parse).  When the request ends the
 * http module calls handler_finish(run, ...) from a loop callback.
 */
struct http_run *handler_http_start(struct handler_run *run,
				    struct ev_loop *loop, const struct job *job,
				    struct handler_result *fail);
/* Aborts the request; done follows from the loop: RETRY "stopped: why". */
void handler_http_stop(struct http_run *x, const char *why);
/* Aborts the request if it still runs and frees x. */
void handler_http_free(struct http_run *x);

/* plugin (handler_plugin.c). */
/* Loads every plugin handler of cfg; returns 0, or -1 if one is unusable. */
int handler_plugin_load_all(const struct config *cfg);
void handler_plugin_unload_all(void);
/*
 * Runs job through its plugin, synchronously, under a hard SIGALRM timer of
 * the handler's timeout (the default action kills the worker).  Fills *res
 * (caller owns its strings).
 */
void handler_plugin_run(const struct job *job, int slot,
			struct handler_result *res);

#endif
