/*
 * handler: the handler registry.  Dispatches a claimed job to the module of
 * its handler type, delivers every result from the loop, and owns each run
 * from handler_start() until its done callback has returned.
 *
 * A result that is known before anything runs (no handler for the kind, an
 * unusable plugin, a command that cannot be spawned, a url that cannot be
 * parsed) and every plugin run go through a zero-delay timer, so done is
 * never called from inside handler_start() or handler_stop(): the worker can
 * finish its own bookkeeping first.  Exec and http runs are finished by
 * their modules, from their own loop callbacks.
 */
#include "handlers/handler.h"

#include <ctype.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ev.h>

#include "common/config.h"
#include "common/duration.h"
#include "common/log.h"
#include "common/util.h"
#include "handlers/handler_child.h"
#include "handlers/handler_exec.h"
#include "handlers/handler_http.h"
#include "handlers/handler_plugin.h"
#include "handlers/handler_process.h"

enum run_kind {
	RUN_DEFERRED, /* the result is in run->res already */
	RUN_PLUGIN,   /* the plugin is called from the zero timer */
	RUN_EXEC,     /* a child process; handler_exec.c finishes it */
	RUN_HTTP,     /* a request; handler_http.c finishes it */
	RUN_PROCESS,  /* a job given to a copy; handler_process.c finishes it */
};

struct handler_run {
	struct ev_loop *loop;
	struct job *job; /* borrowed until done returns */
	int slot;
	handler_done_fn done;
	void *arg;
	enum run_kind kind;
	struct exec_run *exec; /* RUN_EXEC; owned */
	struct http_run *http; /* RUN_HTTP; owned */
	struct proc_job *proc; /* RUN_PROCESS; owned */
	ev_timer later;	       /* RUN_DEFERRED, RUN_PLUGIN */
	struct handler_result res;
	bool stopped;
	bool finished; /* done is running or has run */
};

int
handler_init(const struct config *cfg)
{
	int rc;

	handler_fini();
	rc = handler_plugin_load_all(cfg);
	handler_process_init(cfg);
	if (handler_http_init(cfg) < 0)
		rc = -1;
	return rc;
}

void
handler_fini(void)
{
	handler_plugin_unload_all();
	handler_http_fini();
	handler_process_fini();
}

static void finish(struct handler_run *run, struct handler_result *res);

/* The exec and http modules' way back (handler_finish_fn). */
static void
finish_cb(void *run, struct handler_result *res)
{
	finish(run, res);
}

static void
later_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct handler_run *run = w->data;

	ev_timer_stop(loop, w);
	if (run->kind == RUN_PLUGIN) {
		if (run->stopped) {
			log_job(LOG_INFO,
				&(struct log_job){run->job->id, run->job->kind,
						  run->job->attempt},
				"%s before the plugin ran", run->res.error);
		} else {
			handler_plugin_run(run->job, run->slot, &run->res);
		}
	}
	finish(run, &run->res);
}

/* Sets run->res to a RETRY result with msg as its error; takes msg. */
static void
defer_retry(struct handler_run *run, char *msg)
{
	handler_result_clear(&run->res);
	run->res.outcome = OUTCOME_RETRY;
	run->res.error = msg;
}

static void
strv_free(char **v)
{
	if (!v)
		return;
	for (size_t i = 0; v[i]; i++)
		free(v[i]);
	free(v);
}

/*
 * Puts "NAME=value" e into env[0..*n), replacing a variable of the same
 * name (PATH included) unless the name starts with PGJOB_, which always
 * describe the job.  env has room for it.
 */
static void
env_put(char **env, size_t *n, const char *e)
{
	const char *eq = strchr(e, '=');
	size_t j, name_len;

	if (!eq || eq == e || strncmp(e, "PGJOB_", 6) == 0)
		return;
	name_len = (size_t)(eq - e) + 1;
	for (j = 0; j < *n; j++)
		if (strncmp(env[j], e, name_len) == 0)
			break;
	if (j < *n)
		free(env[j]);
	else
		(*n)++;
	env[j] = xstrdup(e);
}

/*
 * A job's command's environment: PATH, the PGJOB_* variables, then the
 * handler's env, whose entries replace a variable of the same name (PATH
 * included) except PGJOB_*, which always describe the job, and
 * TRACEPARENT when the job has a trace.  Caller frees with strv_free().
 */
static char **
job_env(const struct job *job, const struct handler_conf *h, int slot)
{
	char **env = xcalloc(8 + h->env.n + 1, sizeof(char *));
	size_t n = 0;

	env[n++] = xstrdup("PATH=" HANDLER_CHILD_PATH);
	env[n++] = xasprintf("PGJOB_JOB_ID=%lld", (long long)job->id);
	env[n++] = xasprintf("PGJOB_KIND=%s", job->kind ? job->kind : "");
	env[n++] = xasprintf("PGJOB_QUEUE=%s", job->queue ? job->queue : "");
	env[n++] = xasprintf("PGJOB_ATTEMPT=%d", job->attempt);
	env[n++] = xasprintf("PGJOB_LEASE_TOKEN=%lld",
			     (long long)job->lease_token);
	env[n++] = xasprintf("PGJOB_SLOT=%d", slot);
	for (size_t i = 0; i < h->env.n; i++)
		env_put(env, &n, h->env.v[i]);
	/* The attempt's W3C trace context, by the name OpenTelemetry's
	 * environment carrier reads (docs/tracing.md); the job's, so after
	 * the handler's env. */
	if (job->traceparent[0]) {
		char *tp = xasprintf("TRACEPARENT=%s", job->traceparent);
		env_put(env, &n, tp);
		free(tp);
	}
	env[n] = NULL;
	return env;
}

static struct handler_run *
run_new(struct ev_loop *loop, struct job *job, int slot, handler_done_fn done,
	void *arg)
{
	struct handler_run *run = xcalloc(1, sizeof(*run));
	run->loop = loop;
	run->job = job;
	run->slot = slot;
	run->done = done;
	run->arg = arg;
	run->res.retry_in_ms = -1;
	ev_timer_init(&run->later, later_cb, 0., 0.);
	run->later.data = run;
	return run;
}

/* Starts the exec run of spec for run. */
static void
start_exec(struct handler_run *run, const struct exec_spec *spec)
{
	run->exec =
		handler_exec_start(run, run->loop, spec, finish_cb, &run->res);
	run->kind = run->exec ? RUN_EXEC : RUN_DEFERRED;
	if (run->kind == RUN_DEFERRED)
		ev_timer_start(run->loop, &run->later);
}

struct handler_run *
handler_start_task(struct ev_loop *loop, const struct task_conf *task,
		   int partition, int64_t token, int slot, handler_done_fn done,
		   void *arg)
{
	struct handler_run *run = run_new(loop, NULL, slot, done, arg);
	char *env[] = {
		xstrdup("PATH=" HANDLER_CHILD_PATH),
		xasprintf("PGJOB_TASK=%s", task->name),
		xasprintf("PGJOB_PARTITION=%d", partition),
		xasprintf("PGJOB_FENCING_TOKEN=%lld", (long long)token),
		xasprintf("PGJOB_SLOT=%d", slot),
		NULL,
	};
	struct exec_spec spec = {.argv = task->command.v,
				 .env = env,
				 .run_as = &task->run_as,
				 .task = task->name,
				 .partition = partition};
	start_exec(run, &spec);
	for (size_t i = 0; env[i]; i++)
		free(env[i]);
	return run;
}

struct handler_run *
handler_start(struct ev_loop *loop, struct job *job, int slot,
	      handler_done_fn done, void *arg)
{
	struct handler_run *run = run_new(loop, job, slot, done, arg);
	const struct handler_conf *h = job->handler;

	if (!h) {
		defer_retry(run,
			    xasprintf("no handler for kind %s", job->kind));
	} else if (h->type == HANDLER_EXEC) {
		char **env = job_env(job, h, slot);
		struct exec_spec spec = {
			.argv = h->command.v,
			.env = env,
			.input = job->payload,
			.timeout_ms = h->timeout_ms,
			.run_as = &h->run_as,
			.limits = &h->limits,
			.lj = {job->id, job->kind, job->attempt},
		};
		start_exec(run, &spec);
		strv_free(env);
		return run;
	} else if (h->type == HANDLER_HTTP) {
		run->http = handler_http_start(run, loop, job, finish_cb,
					       &run->res);
		run->kind = run->http ? RUN_HTTP : RUN_DEFERRED;
	} else if (h->type == HANDLER_PLUGIN) {
		run->kind = RUN_PLUGIN;
	} else if (h->type == HANDLER_PROCESS) {
		run->proc = handler_process_start(run, loop, job, slot,
						  finish_cb, &run->res);
		run->kind = run->proc ? RUN_PROCESS : RUN_DEFERRED;
	} else {
		defer_retry(run,
			    xasprintf("%s handlers are not implemented yet",
				      config_handler_type_name(h->type)));
	}
	if (run->kind == RUN_DEFERRED || run->kind == RUN_PLUGIN)
		ev_timer_start(loop, &run->later);
	return run;
}

void
handler_stop(struct handler_run *run, const char *why)
{
	if (run->finished || run->stopped)
		return;
	run->stopped = true;
	if (run->kind == RUN_EXEC) {
		handler_exec_stop(run->exec, why);
	} else if (run->kind == RUN_HTTP) {
		handler_http_stop(run->http, why);
	} else if (run->kind == RUN_PROCESS) {
		handler_process_stop(run->proc, why);
	} else if (run->kind == RUN_PLUGIN) {
		/* Not yet called: it will not be. */
		defer_retry(run, xasprintf("stopped: %s", why));
	}
	/* RUN_DEFERRED: the result is known and is delivered as it is. */
}

/* Delivers res to the run's done callback, then frees the run.  Only from a
 * loop callback.  res's strings are taken over. */
static void
finish(struct handler_run *run, struct handler_result *res)
{
	run->finished = true;
	ev_timer_stop(run->loop, &run->later);
	run->done(run->arg, res);
	handler_result_clear(res);
	if (res != &run->res)
		handler_result_clear(&run->res);
	if (run->exec)
		handler_exec_free(run->exec);
	if (run->http)
		handler_http_free(run->http);
	if (run->proc)
		handler_process_free(run->proc);
	free(run);
}

void
handler_set_pgid_table(int32_t *table, int n)
{
	handler_child_set_pgid_table(table, n);
}

void
handler_set_crash_counter(uint64_t *counter)
{
	handler_process_set_crash_counter(counter);
}

size_t
handler_crash_loops(const char **kinds, size_t max)
{
	return handler_process_crash_loops(kinds, max);
}
