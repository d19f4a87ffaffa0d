/*
 * pgjobd/plugin.h: the API for pgjobd handler plugins.
 *
 * A plugin is a shared library that defines one object of type
 * `const struct pgjobd_plugin`, under the name that a handler's `symbol:`
 * gives (it is an object, not a function):
 *
 *   handlers:
 *     resize:
 *       type: plugin
 *       library: resize       # <plugin dir>/resize.so (or an absolute path)
 *       symbol: resize_plugin
 *       config: { quality: 80 }              # passed to init() as JSON
 *
 *   const struct pgjobd_plugin resize_plugin = {
 *           .abi_version = PGJOBD_PLUGIN_ABI,
 *           .name = "resize",
 *           .init = resize_init,
 *           .fini = resize_fini,
 *           .run = resize_run,
 *   };
 *
 * Build it with `cc -shared -fPIC $(pkg-config --cflags pgjobd-plugin)`.
 * examples/plugin/example.c is a complete plugin.
 *
 * Life cycle.  Every worker process loads the library with dlopen() when it
 * starts (so each worker has its own copy of the plugin's globals) and calls
 * init() once per handler that names the symbol.  It then calls run() for
 * each job, one at a time, on the worker's only thread: run() is never
 * called concurrently within a process.  fini() is called when the worker
 * exits cleanly or reloads; it is not called when the worker is killed.
 *
 * run() blocks the worker.  While it runs, that worker renews no lease,
 * claims nothing and writes no heartbeat, so keep it short next to the
 * lease (database.lease, 30 s by default); use an exec handler for long
 * work.  Before calling run(), pgjobd arms the handler's timeout; if run()
 * has not returned by then (within 50 ms more), a watchdog thread of the
 * worker sends SIGALRM with its default action, which kills the worker
 * process.  Only that worker dies: the supervisor starts a new one, and the
 * job comes back when its lease expires.  A crash (SIGSEGV, abort()) in
 * run() likewise takes down only its worker.  So a plugin must not change
 * the disposition of SIGALRM, SIGCHLD or SIGPIPE, nor use alarm() or
 * setitimer(ITIMER_REAL).  Because of the watchdog, run() is called in a
 * process with one more thread: a plugin that forks should only exec (or
 * call async-signal-safe functions) in the child.
 *
 * Jobs are delivered at least once: a job may run again after a crash, a
 * timeout or a lost lease.  Make run() idempotent; the job id and the lease
 * token are there for that.
 *
 * Compatibility.  PGJOBD_PLUGIN_ABI is bumped whenever the layout or the
 * meaning of anything in this file changes; pgjobd refuses a plugin built
 * for another ABI version (and logs both numbers) instead of calling it.
 * abi_version stays the first member of struct pgjobd_plugin in every
 * version, so that check is always possible.  Version 2 only appended
 * traceparent to struct pgjobd_job: pgjobd still takes plugins built for
 * version 1 (PGJOBD_PLUGIN_ABI_MIN), which read the members before it.
 */
#ifndef PGJOBD_PLUGIN_H
#define PGJOBD_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PGJOBD_PLUGIN_ABI 2
/* The oldest ABI version this header's pgjobd still loads. */
#define PGJOBD_PLUGIN_ABI_MIN 1

/*
 * The job being run.  Every pointer is borrowed: valid only until run()
 * returns; copy what you need to keep.
 */
struct pgjobd_job {
	int64_t id;	     /* pgjob.jobs.id */
	const char *kind;    /* the handler's kind */
	const char *queue;   /* the queue it was claimed from */
	const char *payload; /* JSON text, NUL-terminated */
	size_t payload_len;  /* strlen(payload) */
	int attempt;	     /* 1 on the first run */
	int64_t lease_token; /* changes with every claim of the job */
	int slot;	     /* the worker's slot, 1..max_slots */
	/* ABI 2: the attempt's W3C trace context, "00-<trace id>-<the
	 * attempt's span id>-<flags>", to parent the plugin's spans on; NULL
	 * when the job has no trace (docs/tracing.md). */
	const char *traceparent;
};

/* What run() returns. */
enum pgjobd_outcome {
	PGJOBD_DONE = 0,  /* finished: result (if any) is stored */
	PGJOBD_RETRY = 1, /* try again later, until max_attempts */
	PGJOBD_FAIL = 2,  /* dead at once: retrying cannot help */
};

/*
 * Filled by run().  pgjobd sets result and error to NULL and retry_in_ms to
 * -1 before each call.  Strings must come from malloc() (pgjobd calls
 * free() on them).
 */
struct pgjobd_result {
	/* JSON text stored as the job's result on PGJOBD_DONE, or NULL.  Text
	 * that is not valid JSON is dropped with a warning. */
	char *result;
	/* A message stored as the job's last_error (RETRY, FAIL), or NULL.
	 * Keep it to a line or two; invalid UTF-8 is replaced by '?'. */
	char *error;
	/* For PGJOBD_RETRY: milliseconds until the next attempt; -1 lets the
	 * handler's backoff decide.  Set without an error, it is a snooze:
	 * the attempt does not count towards max_attempts (docs/handlers.md,
	 * "Snoozing"); with an error, a failed attempt that chose its
	 * delay. */
	int64_t retry_in_ms;
};

struct pgjobd_plugin {
	/* Always PGJOBD_PLUGIN_ABI; always the first member. */
	uint32_t abi_version;
	/* A short name for log lines. */
	const char *name;
	/*
	 * Optional (NULL: nothing to set up).  config_json is the handler's
	 * `config:` map as JSON text ("{}" when absent), borrowed for the
	 * call.  *state is NULL on entry; whatever init stores there is
	 * passed to run() and fini().  Return 0, or nonzero when the plugin
	 * cannot work: pgjobd then logs it and its jobs are retried (with
	 * backoff) rather than run, so fixing the deployment recovers them.
	 */
	int (*init)(const char *config_json, void **state);
	/* Optional: releases what init set up.  Not called when init
	 * failed. */
	void (*fini)(void *state);
	/* Required: runs one job; see the life cycle above. */
	enum pgjobd_outcome (*run)(void *state, const struct pgjobd_job *job,
				   struct pgjobd_result *out);
};

#ifdef __cplusplus
}
#endif

#endif
