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
 * run() is called synchronously on the worker's loop under a hard timer: a
 * SIGALRM with its default action armed for the handler's timeout.  A
 * plugin that hangs past it kills its worker, and only it; the job comes
 * back after its lease expires.
 */
#include "common/failpoint.h"
#include "handlers/handler_plugin.h"

#include <dlfcn.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
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
	if (p->abi_version != PGJOBD_PLUGIN_ABI) {
		pl->error = xasprintf("plugin %s: ABI version %u, this pgjobd "
				      "needs %d (library %s)",
				      sym, (unsigned)p->abi_version,
				      PGJOBD_PLUGIN_ABI, path);
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

static struct plugin *
find(const struct handler_conf *h)
{
	for (size_t i = 0; i < nplugins; i++)
		if (plugins[i].conf == h)
			return &plugins[i];
	for (size_t i = 0; i < nplugins; i++)
		if (strcmp(plugins[i].conf->kind, h->kind) == 0)
			return &plugins[i];
	return NULL;
}

/*
 * The hard timeout: SIGALRM with its default action (terminate the
 * process), unblocked, after ms.  *old receives the signal mask to restore.
 */
static void
arm(int64_t ms, sigset_t *old)
{
	struct sigaction sa = {.sa_handler = SIG_DFL};
	struct itimerval it = {{0, 0}, {ms / 1000, (ms % 1000) * 1000}};
	sigset_t alrm;

	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
	sigemptyset(&alrm);
	sigaddset(&alrm, SIGALRM);
	sigprocmask(SIG_UNBLOCK, &alrm, old);
	setitimer(ITIMER_REAL, &it, NULL);
}

static void
disarm(const sigset_t *old)
{
	struct itimerval off = {{0, 0}, {0, 0}};

	setitimer(ITIMER_REAL, &off, NULL);
	sigprocmask(SIG_SETMASK, old, NULL);
}

/* The calling thread's CPU time: the worker's loop, which the plugin's
 * run() has to itself while it runs (threads it starts are not counted). */
static int64_t
cpu_ms(void)
{
	struct rusage ru;

	getrusage(RUSAGE_THREAD, &ru);
	return util_cpu_ms(&ru);
}

/* Moves the plugin's answer into res; takes out's strings. */
static void
take(const struct plugin *pl, const struct log_job *lj, int oc,
     struct pgjobd_result *out, struct handler_result *res)
{
	const char *name = pl->p->name ? pl->p->name : pl->conf->symbol;

	res->retry_in_ms = -1;
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
	struct pgjobd_job pj = {
		job->id,	 job->kind,    job->queue,	 payload,
		strlen(payload), job->attempt, job->lease_token, slot};
	struct pgjobd_result out = {NULL, NULL, -1};
	/* CPU time costs two system calls per job; it goes to the job's
	 * row (last_cpu_ms) and /metrics, so it is measured always. */
	int64_t t0 = util_now_ms(), c0 = cpu_ms(), timeout;
	sigset_t old;
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
		arm(timeout, &old);
	if (FAILPOINT(FP_PLUGIN_RUN))
		abort(); /* a plugin that crashes its worker */
	oc = pl->p->run(pl->state, &pj, &out);
	if (timeout > 0)
		disarm(&old);
	take(pl, &lj, oc, &out, res);
	res->measured = true;
	res->cpu_ms = cpu_ms() - c0;
	res->max_rss_kb = -1; /* the worker's, not the call's */
	int level = res->outcome == OUTCOME_DONE ? LOG_INFO : LOG_WARN;
	const char *name = pl->p->name ? pl->p->name : pl->conf->symbol;
	long long wall = (long long)(util_now_ms() - t0);
	log_job(level, &lj, "plugin %s -> %s, wall %lld ms, cpu %lld ms", name,
		names[res->outcome], wall, (long long)res->cpu_ms);
}
