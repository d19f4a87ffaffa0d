/*
 * handler: runs one claimed job with the handler its kind is configured
 * with, on the worker's libev loop, and reports an outcome.
 *
 * handler.c is the registry: it dispatches on the handler type, delivers
 * every result from the loop (never from inside handler_start() or
 * handler_stop()), and owns the run.  handler_exec.c runs exec handlers
 * (pidfd, pipes; handler_child.c starts the child: clone and execve);
 * handler_http.c POSTs to webhooks (libcurl's multi interface on the loop);
 * handler_plugin.c loads and calls plugins (include/pgjobd/plugin.h);
 * handler_process.c gives jobs to long-running programs it starts and
 * supervises; each has a header of its own, which only handler.c includes
 * (and handler_process.c the headers of its two helpers,
 * handler_process_copy.c and handler_process_proto.c; the http handler's
 * helpers are handler_http_curl.c and handler_http_result.c).  The
 * protocols are described in docs/handlers.md.
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
#include "handlers/handler_result.h"

struct ev_loop;
struct config;
struct handler_conf;
struct task_conf;

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
/* Where the process handler counts its copies that ended unasked
 * (borrowed, shared with the supervisor's /metrics); NULL: nowhere. */
void handler_set_crash_counter(uint64_t *counter);
/* The process handlers' kinds (borrowed from the config) whose program
 * keeps ending without answering a job: a crash loop, now; at most max of
 * them into kinds; how many. */
size_t handler_crash_loops(const char **kinds, size_t max);

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

#endif
