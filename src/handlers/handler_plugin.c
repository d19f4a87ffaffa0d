/*
 * handler_plugin: loads the plugin handlers of the config with dlopen()
 * (the API is include/pgjobd/plugin.h) and runs jobs through them.
 *
 * Each worker loads its plugins once, in handler_init().  A plugin that
 * cannot be used (library missing, symbol missing, wrong ABI, init failed)
 * does not stop the worker: the reason is logged and recorded, and its jobs
 * get OUTCOME_RETRY with that reason as last_error, so that fixing the
 * deployment and reloading recovers them.
 *
 * run() is called synchronously on the worker's loop under a hard timeout:
 * a watchdog thread sends SIGALRM, with its default action, once a run has
 * outlasted its handler's timeout (arm()).  A plugin that hangs past it
 * kills its worker, and only it; the job comes back after its lease
 * expires.
 */
#include "common/failpoint.h"
#include "handlers/handler_plugin.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "pgjobd/plugin.h"

#include "common/config.h"
#include "common/log.h"
#include "common/pgtext.h"
#include "common/util.h"

#ifndef PGJOBD_LIBDIR
#define PGJOBD_LIBDIR "/usr/local/lib/pgjobd"
#endif
/* The plugin directory seen from the binaries' directory, as installed
 * (CMakeLists.txt computes it from the install layout). */
#ifndef PGJOBD_PLUGIN_RELDIR
#define PGJOBD_PLUGIN_RELDIR "../lib/pgjobd"
#endif

struct plugin {
	const struct handler_conf *conf; /* borrowed from the config */
	void *dl;			 /* NULL when dlopen failed */
	const struct pgjobd_plugin *p;	 /* in dl; NULL when unusable */
	void *state;			 /* from init, for run and fini */
	char *error;			 /* owned; set: unusable, why */
};

/* The plugins of this worker; one per plugin handler of the config. */
static struct plugin *plugins;
static size_t nplugins;

/* The directory of the running binary, or NULL (caller frees). */
static char *
exe_dir(void)
{
	char buf[4096];
	ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
	char *slash;

	if (n <= 0 || (size_t)n >= sizeof(buf) - 1)
		return NULL;
	buf[n] = '\0';
	if (!(slash = strrchr(buf, '/')))
		return NULL;
	return xstrndup(buf, (size_t)(slash - buf));
}

static bool
is_dir(const char *p)
{
	struct stat st;

	return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/*
 * Found once per process, as PostgreSQL finds its $libdir: relative to the
 * binary first, so that an installed tree works wherever it is moved to;
 * then the build tree's plugins/ beside the binary (CMakeLists.txt links
 * the example plugin there), so that the same binary runs the source
 * tree's config/example.yaml; then the directory compiled in.
 */
const char *
handler_plugin_dir(void)
{
	static char *dir;
	char *exe, *cand[2] = {NULL, NULL};

	if (dir)
		return dir;
	if ((exe = exe_dir())) {
		cand[0] = xasprintf("%s/%s", exe, PGJOBD_PLUGIN_RELDIR);
		cand[1] = xasprintf("%s/plugins", exe);
		free(exe);
	}
	for (int i = 0; i < 2 && !dir; i++)
		if (cand[i] && is_dir(cand[i]))
			dir = realpath(cand[i], NULL);
	free(cand[0]);
	free(cand[1]);
	if (!dir)
		dir = xstrdup(PGJOBD_LIBDIR);
	return dir;
}

static bool
exists(const char *p)
{
	struct stat st;

	return stat(p, &st) == 0 && !S_ISDIR(st.st_mode);
}

char *
handler_plugin_path(const char *lib)
{
	size_t len = strlen(lib);
	char *p;

	if (lib[0] == '/')
		return xstrdup(lib);
	p = xasprintf("%s/%s", handler_plugin_dir(), lib);
	if (exists(p))
		return p;
	free(p);
	if (len < 3 || strcmp(lib + len - 3, ".so")) {
		p = xasprintf("%s/%s.so", handler_plugin_dir(), lib);
		if (exists(p))
			return p;
		free(p);
	}
	/* A bare name may still be a library of the linker's search path;
	 * dlopen() of a name with a slash would look in the current
	 * directory instead: send it where it was meant to be. */
	if (!strchr(lib, '/'))
		return xstrdup(lib);
	return xasprintf("%s/%s", handler_plugin_dir(), lib);
}

/* Loads pl->conf's plugin; returns 0, or -1 with pl->error set. */
static int
load(struct plugin *pl)
{
	const struct handler_conf *h = pl->conf;
	const char *sym = h->symbol ? h->symbol : "";
	char *path = handler_plugin_path(h->library ? h->library : "");
	const struct pgjobd_plugin *p;
	int rc;

	dlerror();
	pl->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!pl->dl) {
		pl->error = xasprintf("plugin %s: cannot load library: %s", sym,
				      dlerror());
		goto out;
	}
	p = dlsym(pl->dl, sym);
	if (!p) {
		pl->error = xasprintf("plugin %s: symbol not found in %s", sym,
				      path);
		goto out;
	}
	if (p->abi_version < PGJOBD_PLUGIN_ABI_MIN ||
	    p->abi_version > PGJOBD_PLUGIN_ABI) {
		pl->error = xasprintf("plugin %s: ABI version %u, this pgjobd "
				      "takes %d to %d (library %s)",
				      sym, (unsigned)p->abi_version,
				      PGJOBD_PLUGIN_ABI_MIN, PGJOBD_PLUGIN_ABI,
				      path);
		goto out;
	}
	if (!p->run) {
		pl->error = xasprintf("plugin %s: no run function", sym);
		goto out;
	}
	if (p->init) {
		rc = p->init(h->plugin_config ? h->plugin_config : "{}",
			     &pl->state);
		if (rc != 0) {
			pl->error = xasprintf("plugin %s: init failed (%d)",
					      sym, rc);
			goto out;
		}
	}
	pl->p = p;
	log_info("handler %s: plugin %s (%s) loaded from %s", h->kind,
		 p->name ? p->name : sym, sym, path);
out:
	if (pl->error)
		log_errorx("handler %s: %s; its jobs are retried, not run",
			   h->kind, pl->error);
	free(path);
	return pl->error ? -1 : 0;
}

int
handler_plugin_load_all(const struct config *cfg)
{
	int rc = 0;

	handler_plugin_unload_all();
	for (size_t i = 0; i < cfg->nhandlers; i++)
		if (cfg->handlers[i].type == HANDLER_PLUGIN)
			nplugins++;
	plugins = xcalloc(nplugins, sizeof(*plugins));
	nplugins = 0;
	for (size_t i = 0; i < cfg->nhandlers; i++) {
		if (cfg->handlers[i].type != HANDLER_PLUGIN)
			continue;
		plugins[nplugins].conf = &cfg->handlers[i];
		if (load(&plugins[nplugins++]) < 0)
			rc = -1;
	}
	return rc;
}

void
handler_plugin_unload_all(void)
{
	for (size_t i = 0; i < nplugins; i++) {
		struct plugin *pl = &plugins[i];
		if (pl->p && pl->p->fini)
			pl->p->fini(pl->state);
		if (pl->dl)
			dlclose(pl->dl);
		free(pl->error);
	}
	free(plugins);
	plugins = NULL;
	nplugins = 0;
}

/* The plugin of handler h.  The plugins are in the order of their
 * handlers in the config's array (handler_plugin_load_all()): a binary
 * search by address finds one of thousands in a few steps, for every job. */
static struct plugin *
find(const struct handler_conf *h)
{
	size_t lo = 0, hi = nplugins;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		uintptr_t at = (uintptr_t)plugins[mid].conf;
		if (at == (uintptr_t)h)
			return &plugins[mid];
		if ((uintptr_t)h < at)
			hi = mid;
		else
			lo = mid + 1;
	}
	for (size_t i = 0; i < nplugins; i++)
		if (strcmp(plugins[i].conf->kind, h->kind) == 0)
			return &plugins[i];
	return NULL;
}

/*
 * The hard timeout: a watchdog thread reads the deadline that each run
 * sets and clears (deadline_ms, monotonic; 0 while no run is armed), and
 * past it sends the process SIGALRM with its default action, which ends
 * the worker.  Per run that is two atomic stores and no system call:
 * arming an itimer around each run (sigaction, sigprocmask and setitimer,
 * and setitimer and sigprocmask after) were most of the system calls a
 * no-op plugin job cost, and on a VM whose system calls trap to the
 * hypervisor they weighed on every job (docs/performance-history.md,
 * "Plugin runs without system calls").
 *
 * While a run is armed the thread looks every WATCH_TICK_MS, so a run is
 * stopped at most that long after its timeout; disarmed at a look, it
 * waits on a condition variable, which the next arm() signals (a system
 * call at most once a tick, not once a run).  It is started by the first
 * armed run of the process, and again in a child after fork(), which
 * keeps only the forking thread (watch_forked()).  It blocks every
 * signal but the SIGALRM it raises, so the worker's own signals still go
 * to the worker's loop.
 */
#define WATCH_TICK_MS 50
/* Its stack: it calls nothing deep (the default would reserve 8 MiB). */
#define WATCH_STACK (64 * 1024)

static _Atomic int64_t deadline_ms;
static atomic_int watch_sleeping;
static int watch_started, watch_atfork;
static pthread_mutex_t watch_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t watch_cv = PTHREAD_COND_INITIALIZER;

static void __attribute__((noreturn)) expire(void)
{
	struct sigaction sa = {.sa_handler = SIG_DFL};
	sigset_t alrm;

	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
	sigemptyset(&alrm);
	sigaddset(&alrm, SIGALRM);
	pthread_sigmask(SIG_UNBLOCK, &alrm, NULL);
	log_flush_try(); /* the worker's lines of this turn, if it can */
	raise(SIGALRM);	 /* the default action ends the process */
	abort();
}

static void *
watch(void *arg)
{
	(void)arg;
	for (;;) {
		int64_t d = atomic_load(&deadline_ms);
		if (d == 0) {
			pthread_mutex_lock(&watch_mu);
			atomic_store(&watch_sleeping, 1);
			while (atomic_load(&deadline_ms) == 0)
				pthread_cond_wait(&watch_cv, &watch_mu);
			atomic_store(&watch_sleeping, 0);
			pthread_mutex_unlock(&watch_mu);
			continue;
		}
		int64_t now = util_now_ms();
		if (now >= d)
			expire();
		int64_t ms = d - now < WATCH_TICK_MS ? d - now : WATCH_TICK_MS;
		struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
		nanosleep(&ts, NULL);
		/* A run longer than a tick holds up the worker's loop, and
		 * with it the lines the loop would write before it waits
		 * (log_set_buffered()): written from here, at most a tick
		 * late, rather than when the run returns. */
		if (atomic_load(&deadline_ms) != 0)
			log_flush_try();
	}
	return NULL;
}

/* In the child of a fork(): no watchdog there until its first arm(). */
static void
watch_forked(void)
{
	pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

	watch_mu = mu;
	watch_cv = cv;
	watch_started = 0;
	atomic_store(&deadline_ms, 0);
	atomic_store(&watch_sleeping, 0);
}

static void
watch_start(void)
{
	sigset_t all, old;
	pthread_t t;

	if (!watch_atfork) {
		pthread_atfork(NULL, NULL, watch_forked);
		watch_atfork = 1;
	}
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, WATCH_STACK);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(&t, &at, watch, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&at);
	if (rc != 0) {
		/* No timeout then, but the run goes on: say so, once. */
		log_warnx("plugin timeouts: cannot start the watchdog thread: "
			  "%s",
			  strerror(rc));
	} else {
		pthread_detach(t);
	}
	watch_started = 1;
}

static void
arm(int64_t ms)
{
	if (!watch_started)
		watch_start();
	atomic_store(&deadline_ms, util_now_ms() + ms);
	if (atomic_load(&watch_sleeping)) {
		pthread_mutex_lock(&watch_mu);
		pthread_cond_signal(&watch_cv);
		pthread_mutex_unlock(&watch_mu);
	}
}

static void
disarm(void)
{
	atomic_store(&deadline_ms, 0);
}

/* The calling thread's CPU time (µs): the worker's loop, which the
 * plugin's run() has to itself while it runs (threads it starts are not
 * counted). */
static int64_t
cpu_us(void)
{
	struct rusage ru;

	getrusage(RUSAGE_THREAD, &ru);
	return util_cpu_us(&ru);
}

/* Moves the plugin's answer into res; takes out's strings. */
static void
take(const struct plugin *pl, const struct log_job *lj, int oc,
     struct pgjobd_result *out, struct handler_result *res)
{
	const char *name = pl->p->name ? pl->p->name : pl->conf->symbol;

	res->retry_in_ms = -1;
	res->snooze = false;
	if (out->error)
		pgtext_sanitize(out->error, strlen(out->error));
	if (oc == PGJOBD_DONE) {
		res->outcome = OUTCOME_DONE;
		if (out->result &&
		    !pgtext_is_jsonb(out->result, strlen(out->result))) {
			log_job(LOG_WARN, lj,
				"plugin %s returned a result that is not JSON; "
				"dropped",
				name);
		} else {
			res->result = out->result;
			out->result = NULL;
		}
	} else if (oc == PGJOBD_RETRY || oc == PGJOBD_FAIL) {
		/* It chose when, and said nothing failed: a snooze.  With
		 * an error it is a failure that chose its delay. */
		res->snooze = oc == PGJOBD_RETRY && out->retry_in_ms >= 0 &&
			      !out->error;
		res->outcome =
			oc == PGJOBD_RETRY ? OUTCOME_RETRY : OUTCOME_DEAD;
		res->error = out->error
				     ? out->error
				     : xasprintf("plugin %s: %s", name,
						 oc == PGJOBD_RETRY ? "retry"
								    : "failed");
		out->error = NULL;
		if (oc == PGJOBD_RETRY && out->retry_in_ms >= 0)
			res->retry_in_ms = out->retry_in_ms;
	} else {
		res->outcome = OUTCOME_RETRY;
		res->error = xasprintf(
			"plugin %s returned an unknown outcome %d", name, oc);
	}
	free(out->result);
	free(out->error);
}

void
handler_plugin_run(const struct job *job, int slot, struct handler_result *res)
{
	static const char *names[] = {"done", "retry", "dead"};
	const struct log_job lj = {job->id, job->kind, job->attempt};
	struct plugin *pl = find(job->handler);
	const char *payload = job->payload ? job->payload : "";
	struct pgjobd_job pj = {job->id,
				job->kind,
				job->queue,
				payload,
				strlen(payload),
				job->attempt,
				job->lease_token,
				slot,
				job->traceparent[0] ? job->traceparent : NULL};
	struct pgjobd_result out = {NULL, NULL, -1};
	/* CPU time goes to the job's row (last_cpu_ms) and /metrics, so it
	 * is measured always: before the run, and after it only when the
	 * run took a millisecond or more.  A shorter run used less than a
	 * millisecond of this thread's CPU, 0 in whole milliseconds, and
	 * the second getrusage() is saved (see arm() for why it counts). */
	int64_t t0 = util_now_us(), c0 = cpu_us(), timeout;
	int oc;

	handler_result_clear(res);
	res->outcome = OUTCOME_RETRY;
	if (!pl || !pl->p) {
		res->error = pl ? xstrdup(pl->error)
				: xasprintf("plugin handler %s is not loaded",
					    job->kind);
		log_job(LOG_WARN, &lj, "%s", res->error);
		return;
	}
	timeout = pl->conf->timeout_ms;
	if (timeout > 0)
		arm(timeout);
	if (FAILPOINT(FP_PLUGIN_RUN))
		abort(); /* a plugin that crashes its worker */
	oc = pl->p->run(pl->state, &pj, &out);
	if (timeout > 0)
		disarm();
	int64_t wall_us = util_now_us() - t0;
	take(pl, &lj, oc, &out, res);
	res->measured = true;
	res->cpu_ms = wall_us < 1000 ? 0 : (cpu_us() - c0) / 1000;
	res->max_rss_kb = -1; /* the worker's, not the call's */
	int level = res->outcome == OUTCOME_DONE || res->snooze ? LOG_INFO
								: LOG_WARN;
	const char *name = pl->p->name ? pl->p->name : pl->conf->symbol;
	long long wall = (long long)(wall_us / 1000);
	log_job(level, &lj, "plugin %s -> %s, wall %lld ms, cpu %lld ms", name,
		res->snooze ? "snooze" : names[res->outcome], wall,
		(long long)res->cpu_ms);
}
