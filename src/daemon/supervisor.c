/*
 * supervisor: fork, reap, restart, stop, reload.
 *
 * Signal table (all handled on the libev loop, never in a signal handler):
 *   SIGTERM, SIGINT  first: drain (workers stop claiming and finish what
 *                    they hold, up to shutdown_timeout); second: stop now
 *   SIGHUP           reload the config: new workers start on it at once,
 *                    and the old ones retire (SIGUSR2): they claim no more
 *                    and finish the jobs they hold, however long they take,
 *                    as nginx's old workers do.  Only a stop hands jobs
 *                    back.
 *
 * A worker that exits is restarted after an exponential backoff with
 * jitter, reset once it has stayed up for a minute, so a crash loop never
 * becomes a fork storm.  Exit 78 (EX_CONFIG) is never restarted: the
 * supervisor stops everything and exits 78 itself.  Workers watch a pipe
 * whose write end only the supervisor holds: when the supervisor dies, even
 * by SIGKILL, they see EOF and stop.
 */
#include "daemon/supervisor.h"

#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/backoff.h"
#include "common/config.h"
#include "common/log.h"
#include "daemon/httpd.h"
#include "daemon/internal.h"
#include "daemon/notify.h"
#include "daemon/report.h"
#include "handlers/handler_check.h"
#include "common/stats.h"
#include "common/util.h"
#include "worker/worker.h"

#define STABLE_MS 60000 /* up this long: the restart backoff resets */

/* The stats area of c's group, or NULL. */
static struct stats *
cstats(const struct supervisor *s, const struct child *c)
{
	return c->group >= 0 ? s->groups[c->group].stats : NULL;
}

/* In the child: forget everything of the supervisor's loop and pipes. */
static void
child_detach(struct supervisor *s, struct child *self)
{
	ev_signal_stop(s->loop, &s->sigterm);
	ev_signal_stop(s->loop, &s->sigint);
	ev_signal_stop(s->loop, &s->sighup);
	for (int i = 0; i < s->nchildren; i++) {
		struct child *c = &s->children[i];
		ev_child_stop(s->loop, &c->watcher);
		if (c != self && c->pipe_wr >= 0)
			close(c->pipe_wr);
	}
	for (struct child *r = s->retired; r; r = r->next) {
		ev_child_stop(s->loop, &r->watcher);
		if (r->pipe_wr >= 0)
			close(r->pipe_wr);
	}
	httpd_forget(s->metrics);
	notify_close();
	ev_loop_destroy(s->loop);
}

/* The lowest free entry of the stats area, taken; STATS_MAX_WORKERS when
 * none is free (the worker then counts into a private one). */
static int
sidx_take(struct group *g)
{
	for (int i = 0; i < STATS_MAX_WORKERS; i++) {
		if (g->sidx_used[i])
			continue;
		g->sidx_used[i] = 1;
		if (i + 1 > g->sidx_high)
			g->sidx_high = i + 1;
		return i;
	}
	return STATS_MAX_WORKERS;
}

/* Gives c's entry back to its group; c has none after. */
static void
sidx_give_back(struct supervisor *s, struct child *c)
{
	if (c->group >= 0 && c->sidx >= 0 && c->sidx < STATS_MAX_WORKERS)
		s->groups[c->group].sidx_used[c->sidx] = 0;
	c->sidx = -1;
}

/* The first active worker of each group reads its database's queue
 * depths for /metrics. */
static void
name_depth_reader(struct supervisor *s)
{
	int first = 0;
	for (int g = 0; g < s->ngroups; g++) {
		struct stats *st = s->groups[g].stats;
		int reader = -1;
		if (first < s->nchildren && s->children[first].group == g)
			reader = s->children[first].sidx;
		if (st)
			__atomic_store_n(&st->depth_reader, reader,
					 __ATOMIC_RELAXED);
		first += supervisor_group_workers(s, g);
	}
}

/* "db=beta worker=3": a worker's name in the supervisor's lines (db= with
 * databases: only; a name of at most 63 characters). */
static const char *
worker_name(const struct supervisor *s, const struct child *c, char *buf,
	    size_t len)
{
	const char *db = c->group >= 0 ? s->groups[c->group].name : NULL;
	snprintf(buf, len, "%s%s%sworker=%d", db ? "db=" : "", db ? db : "",
		 db ? " " : "", c->number);
	return buf;
}

/*
 * In the worker, before worker_main(): with databases:, its own copy of
 * the config (the fork's) names its database's conninfo, and its log
 * lines say db=NAME.
 */
static void
child_database(struct supervisor *s, int g)
{
	if (!s->cfg->ndatabases)
		return;
	free(s->cfg->conninfo);
	s->cfg->conninfo = xstrdup(s->cfg->databases[g].conninfo);
	log_set_database(s->cfg->databases[g].name);
}

static void
spawn(struct supervisor *s, struct child *c)
{
	int fds[2];
	if (pipe2(fds, O_CLOEXEC) < 0) {
		log_error("pipe");
		ev_timer_set(&c->restart, 1., 0.);
		ev_timer_start(s->loop, &c->restart);
		return;
	}
	/* A restarted worker keeps its predecessor's entry, so its
	 * counters carry on. */
	if (c->sidx < 0) {
		c->group = supervisor_group_of(s, c->index);
		c->sidx = sidx_take(&s->groups[c->group]);
	}
	c->number = c->index + 1;
	name_depth_reader(s);
	pid_t parent = getpid();
	fflush(NULL);
	/*
	 * The child is born with the signals the supervisor sends its workers
	 * blocked, and worker_main() unblocks them once its own loop watches
	 * for them: a signal sent meanwhile waits for the worker instead of
	 * being lost.  Without this, a SIGTERM that reached the child before
	 * child_detach() ran the supervisor's libev handler, inherited with
	 * the fork, which noted it in the supervisor's loop and was forgotten
	 * with it: a stop right after a reload (the new workers just forked,
	 * the CPU busy) left a worker running and the supervisor waiting for
	 * it.  A SIGUSR2 there would have killed it (its default action).
	 * The supervisor blocks them only across fork(), and gets whatever
	 * came meanwhile as it unblocks them.
	 */
	sigset_t stop, old;
	worker_signals(&stop);
	sigprocmask(SIG_BLOCK, &stop, &old);
	pid_t pid = fork();
	if (pid != 0)
		sigprocmask(SIG_SETMASK, &old, NULL);
	if (pid < 0) {
		log_error("fork");
		close(fds[0]);
		close(fds[1]);
		ev_timer_set(&c->restart, 1., 0.);
		ev_timer_start(s->loop, &c->restart);
		return;
	}
	if (pid == 0) {
		close(fds[1]);
		child_detach(s, c);
		child_database(s, c->group);
		/* The worker's code, and libpq, are loaded only now. */
		_exit(worker_main(s->cfg, fds[0], parent, cstats(s, c), c->sidx,
				  c->number));
	}
	close(fds[0]);
	c->pid = pid;
	c->pipe_wr = fds[1];
	c->started_ms = util_now_ms();
	ev_child_set(&c->watcher, pid, 0);
	ev_child_start(s->loop, &c->watcher);
	char name[96];
	log_debug("started %s as pid %d", worker_name(s, c, name, sizeof(name)),
		  (int)pid);
}

static void
on_restart(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct child *c = t->data;
	if (!c->s->stopping && c->index < supervisor_nworkers(c->s))
		spawn(c->s, c);
}

static void
signal_all(struct supervisor *s, int sig)
{
	for (int i = 0; i < s->nchildren; i++)
		if (s->children[i].pid > 0)
			kill(s->children[i].pid, sig);
	for (struct child *r = s->retired; r; r = r->next)
		kill(r->pid, sig);
}

static void
stop_all(struct supervisor *s, int code)
{
	if (code)
		s->exit_code = code;
	if (s->stopping)
		return;
	s->stopping = 1;
	notify_send("STOPPING=1");
	for (int i = 0; i < s->nchildren; i++)
		ev_timer_stop(s->loop, &s->children[i].restart);
	signal_all(s, SIGTERM);
	/* Workers stop their handlers at shutdown_timeout; this is the last
	 * resort for one that does not exit. */
	ev_timer_set(&s->kill_timer,
		     (double)s->cfg->shutdown_timeout_ms / 1000. + 20., 0.);
	ev_timer_start(s->loop, &s->kill_timer);
	if (supervisor_running(s) == 0)
		ev_break(s->loop, EVBREAK_ALL);
}

/*
 * "worker=2 slot=1 pid=4242": how a worker is named in every line, the
 * supervisor's and its own (whose lines carry worker= and slot= fields),
 * so that one can be found from the other.  slot=0: it holds none (yet).
 */
static const char *
who(const struct supervisor *s, const struct child *c, char *buf, size_t len)
{
	int slot = cstats(s, c) && c->sidx >= 0 && c->sidx < STATS_MAX_WORKERS
			   ? __atomic_load_n(&cstats(s, c)->w[c->sidx].slot,
					     __ATOMIC_RELAXED)
			   : 0;
	char name[96];
	snprintf(buf, len, "%s%s slot=%d pid=%d",
		 worker_name(s, c, name, sizeof(name)),
		 c->index < 0 ? " (retired)" : "", slot, (int)c->pid);
	return buf;
}

static void
log_exit(struct supervisor *s, struct child *c, int status)
{
	int64_t up = util_now_ms() - c->started_ms;
	char w[192];
	who(s, c, w, sizeof(w));
	if (WIFEXITED(status))
		log_msg(WEXITSTATUS(status) ? LOG_WARN : LOG_INFO,
			"%s exited with status %d after %lldms", w,
			WEXITSTATUS(status), (long long)up);
	else if (WIFSIGNALED(status))
		log_warnx("%s killed by signal %d (%s)%s after %lldms", w,
			  WTERMSIG(status), strsignal(WTERMSIG(status)),
			  WCOREDUMP(status) ? ", core dumped" : "",
			  (long long)up);
}

/*
 * Kills the exec handlers a dead worker left running (their own process
 * groups, so its death did not take them along): otherwise they would run
 * on beside the next holder of their jobs' leases.
 */
static void
kill_orphans(struct supervisor *s, struct child *c)
{
	if (!cstats(s, c) || c->sidx < 0 || c->sidx >= STATS_MAX_WORKERS)
		return;
	int32_t *t = cstats(s, c)->w[c->sidx].handler_pgids;
	int n = 0;
	for (int i = 0; i < STATS_MAX_HANDLERS; i++) {
		int32_t g = __atomic_exchange_n(&t[i], 0, __ATOMIC_RELAXED);
		if (g > 0 && kill(-g, SIGKILL) == 0)
			n++;
	}
	if (n)
		log_warnx("killed %d handler process groups that pid %d left "
			  "running",
			  n, (int)c->pid);
}

/* A retired worker has exited: forget it. */
static void
retired_gone(struct supervisor *s, struct child *r)
{
	for (struct child **pp = &s->retired; *pp; pp = &(*pp)->next)
		if (*pp == r) {
			*pp = r->next;
			break;
		}
	stats_worker_gone(cstats(s, r), r->sidx);
	sidx_give_back(s, r);
	free(r);
	if (s->stopping && supervisor_running(s) == 0)
		ev_break(s->loop, EVBREAK_ALL);
}

static void
on_child(struct ev_loop *loop, ev_child *w, int revents)
{
	struct child *c = w->data;
	struct supervisor *s = c->s;
	int status = w->rstatus;

	ev_child_stop(loop, w);
	log_exit(s, c, status);
	kill_orphans(s, c);
	close(c->pipe_wr);
	c->pipe_wr = -1;
	if (c->index < 0) {
		retired_gone(s, c);
		return;
	}
	stats_worker_gone(cstats(s, c), c->sidx);
	int64_t up = util_now_ms() - c->started_ms;
	c->pid = 0;
	if (s->stopping) {
		if (supervisor_running(s) == 0)
			ev_break(loop, EVBREAK_ALL);
		return;
	}
	char name[96];
	worker_name(s, c, name, sizeof(name));
	if (WIFEXITED(status) && WEXITSTATUS(status) == EXIT_CONFIG) {
		log_errorx("%s cannot work with this config or schema; "
			   "stopping",
			   name);
		stop_all(s, EXIT_CONFIG);
		return;
	}
	if (c->index >= supervisor_nworkers(s)) {
		/* Not in the config any more (a reload lowered workers). */
		sidx_give_back(s, c);
		return;
	}
	if (up >= STABLE_MS)
		c->restarts = 0;
	double d = (double)backoff_job_delay(1000, 60000, c->restarts + 1,
					     backoff_random()) /
		   1000.;
	c->restarts++;
	if (cstats(s, c))
		stats_add(&cstats(s, c)->worker_restarts, 1);
	log_info("restarting %s in %.1fs", name, d);
	ev_timer_set(&c->restart, d, 0.);
	ev_timer_start(loop, &c->restart);
}

static void
on_kill_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct supervisor *s = t->data;
	log_warnx("%d workers still running; killing them",
		  supervisor_running(s));
	signal_all(s, SIGKILL);
}

static void
on_stop_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
	struct supervisor *s = w->data;
	if (!s->stopping) {
		log_info("received %s: draining", strsignal(w->signum));
		stop_all(s, 0);
		return;
	}
	log_info("received %s again: stopping now", strsignal(w->signum));
	s->stopping = 2;
	/* SIGINT, not SIGTERM again: a worker that has not yet taken the
	 * drain's SIGTERM would hold the two as one pending signal, and only
	 * drain (the two stop signals came at once, on a loaded machine).
	 * Two different signals are two, whichever it takes first. */
	signal_all(s, SIGINT);
}

/* Resizes the child table to the new worker count (it never shrinks:
 * entries past the count stay empty). */
static void
resize(struct supervisor *s, int n)
{
	if (n <= s->nchildren)
		return;
	/* ev watchers hold pointers to their structs: keep old slots in
	 * place by allocating the table once at its largest size. */
	struct child *c = xcalloc((size_t)n, sizeof(*c));
	if (s->nchildren > 0)
		memcpy(c, s->children, (size_t)s->nchildren * sizeof(*c));
	for (int i = 0; i < s->nchildren; i++) {
		if (s->children[i].pid > 0)
			ev_child_stop(s->loop, &s->children[i].watcher);
		ev_timer_stop(s->loop, &s->children[i].restart);
	}
	free(s->children);
	s->children = c;
	for (int i = 0; i < n; i++) {
		c[i].s = s;
		c[i].index = i;
		if (i >= s->nchildren) {
			c[i].pipe_wr = -1;
			c[i].pid = 0;
			c[i].sidx = -1;
			c[i].group = -1;
		}
		ev_child_init(&c[i].watcher, on_child, c[i].pid, 0);
		ev_timer_init(&c[i].restart, on_restart, 0., 0.);
		c[i].watcher.data = c[i].restart.data = &c[i];
		if (c[i].pid > 0)
			ev_child_start(s->loop, &c[i].watcher);
	}
	s->nchildren = n;
}

/*
 * Reload: the worker in c retires.  It moves to s->retired (the table
 * entry is free for its successor at once) and gets SIGUSR2: it claims no
 * more, gives its cluster duties up, finishes the jobs it holds and exits.
 */
static void
retire(struct supervisor *s, struct child *c)
{
	ev_timer_stop(s->loop, &c->restart);
	if (c->pid <= 0) {
		/* Waiting for a restart: its successor takes over. */
		sidx_give_back(s, c);
		return;
	}
	struct child *r = xcalloc(1, sizeof(*r));
	ev_child_stop(s->loop, &c->watcher);
	*r = *c;
	r->index = -1;
	ev_child_init(&r->watcher, on_child, r->pid, 0);
	ev_timer_init(&r->restart, on_restart, 0., 0.);
	r->watcher.data = r->restart.data = r;
	ev_child_start(s->loop, &r->watcher);
	r->next = s->retired;
	s->retired = r;
	kill(r->pid, SIGUSR2);
	c->pid = 0;
	c->pipe_wr = -1;
	c->sidx = -1;
	c->restarts = 0;
}

/* Reload: every worker of the old config retires; new ones start now. */
static void
roll_over(struct supervisor *s)
{
	int old = 0;
	for (int i = 0; i < s->nchildren; i++) {
		old += s->children[i].pid > 0;
		retire(s, &s->children[i]);
	}
	for (int i = 0; i < supervisor_nworkers(s); i++)
		spawn(s, &s->children[i]);
	log_info("reload done: %d workers start on the new config; %d old "
		 "ones finish the jobs they hold",
		 supervisor_nworkers(s), old);
	s->ready = 0; /* READY=1 again once they all hold slots */
}

static void
override_database(struct supervisor *s)
{
	if (!s->database)
		return;
	free(s->cfg->conninfo);
	s->cfg->conninfo = xstrdup(s->database);
}

static bool
same(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

/*
 * What a reload cannot apply, said in the log by the setting's name: the
 * metrics server keeps the address it bound at start, and -w keeps
 * overriding workers: (-d overrides database.conninfo as quietly as at
 * start).  Everything else reaches the new workers (docs/daemon.md).
 */
static void
kept_from_start(const struct supervisor *s, struct config *cfg)
{
	const char *old = s->metrics ? s->cfg->metrics_listen : NULL;

	if (!same(old, cfg->metrics_listen)) {
		log_warnx("metrics.listen changed: needs a restart; kept %s",
			  old ? old : "none (not served)");
		free(cfg->metrics_listen);
		cfg->metrics_listen = old ? xstrdup(old) : NULL;
	}
	if (s->workers_override > 0 && cfg->workers != s->cfg->workers)
		log_warnx("workers changed: -w %d on the command line "
			  "overrides it; kept %d",
			  s->workers_override, s->workers_override);
}

/* --- reloads and duration bounds in /metrics ------------------------- */

/* The largest timeout of cfg's handlers, in seconds. */
static double
max_timeout_s(const struct config *cfg)
{
	int64_t ms = 0;
	for (size_t i = 0; i < cfg->nhandlers; i++)
		if (cfg->handlers[i].timeout_ms > ms)
			ms = cfg->handlers[i].timeout_ms;
	return (double)ms / 1000.;
}

/*
 * Sets the handler duration bounds from cfg's largest timeout, before any
 * worker counts into them.  They stay for the process's life: a reload
 * that raises the largest timeout beyond the last bound is logged, and
 * longer runs count in +Inf until a restart (a series' buckets never
 * change under Prometheus).
 */
static void
set_dur_bounds(struct supervisor *s, const struct config *cfg)
{
	double t = max_timeout_s(cfg);
	/* Every database's workers count into the same bounds. */
	const struct stats *first = s->groups[0].stats;
	uint32_t n = __atomic_load_n(&first->ndur_bounds, __ATOMIC_RELAXED);
	if (n == 0) {
		double b[STATS_DUR_BUCKETS];
		n = (uint32_t)stats_dur_bounds(t, b);
		for (int g = 0; g < s->ngroups; g++) {
			struct stats *st = s->groups[g].stats;
			memcpy(st->dur_bounds, b, sizeof(st->dur_bounds));
			__atomic_store_n(&st->ndur_bounds, n, __ATOMIC_RELEASE);
		}
	} else if (t > first->dur_bounds[n - 1]) {
		log_warnx(
			"a handler timeout of %.0fs is over the last duration "
			"bucket (%.0fs) until pgjobd restarts",
			t, first->dur_bounds[n - 1]);
	}
}

/* Counts a reload (SIGHUP) and its outcome for /metrics: once for the
 * process, whatever the number of databases (report.c). */
static void
reload_counted(struct supervisor *s, int ok)
{
	if (ok)
		s->reloads_ok++;
	else
		s->reloads_failed++;
	s->last_reload_ok = ok;
	s->last_reload_s = (int64_t)time(NULL);
}

/*
 * A reload keeps the databases' names, in their order: each has its stats
 * area, made before the first fork (a new database needs a restart, as
 * metrics.listen does).  Their conninfo and workers may change.
 */
static bool
same_databases(const struct supervisor *s, const struct config *cfg)
{
	if (cfg->ndatabases != s->cfg->ndatabases)
		return false;
	for (size_t i = 0; i < cfg->ndatabases; i++)
		if (strcmp(cfg->databases[i].name, s->cfg->databases[i].name))
			return false;
	return true;
}

static void
on_hup(struct ev_loop *loop, ev_signal *w, int revents)
{
	struct supervisor *s = w->data;
	struct config_errors errs = {0};

	if (s->stopping)
		return;
	struct config *cfg = config_load(s->config_path, &errs);
	/* user: and group: need root: a reload that adds them to a daemon
	 * that is not root is refused like any other bad config; and so is
	 * one whose commands, plugins or urls would fail every job
	 * (handler_check.c: plugins load in a child, never here). */
	if (cfg && (config_check_run_as(cfg, geteuid(), &errs) > 0 ||
		    handler_check_config(cfg, &errs) > 0)) {
		config_free(cfg);
		cfg = NULL;
	}
	if (cfg && !same_databases(s, cfg)) {
		config_errors_add(&errs,
				  "%s: databases: the names changed: a new "
				  "or removed database needs a restart",
				  s->config_path);
		config_free(cfg);
		cfg = NULL;
	}
	reload_counted(s, cfg != NULL);
	if (!cfg) {
		for (size_t i = 0; i < errs.n; i++)
			log_errorx("%s", errs.msg[i]);
		log_errorx("reload refused: %zu errors in %s; the running "
			   "config stays",
			   errs.n, s->config_path);
		config_errors_free(&errs);
		return;
	}
	log_info("reloading %s", s->config_path);
	notify_send("RELOADING=1");
	kept_from_start(s, cfg);
	/* Children have their own copies of the old config. */
	config_free(s->cfg);
	s->cfg = cfg;
	override_database(s);
	log_set_level(cfg->log_level);
	log_set_json(cfg->log_format == LOG_FORMAT_JSON);
	set_dur_bounds(s, cfg);
	resize(s, supervisor_nworkers(s));
	roll_over(s);
}

/* The metrics server's handler (httpd.h): /metrics and /healthz. */
static int
on_http(void *arg, const char *path, struct buf *body,
	const char **content_type)
{
	struct report_snapshot r;
	supervisor_snapshot(arg, &r);
	int status = report_http(&r, path, body, content_type);
	supervisor_snapshot_free(&r);
	return status;
}

/* The period of the status timer: READY=1, STATUS= and the watchdog. */
#define STATUS_EVERY 0.5

static void
on_status(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct supervisor *s = t->data;
	int64_t now = util_now_ms();
	struct buf line = {0};
	struct report_snapshot r;
	supervisor_snapshot(s, &r);
	if (!s->ready && !s->stopping &&
	    report_healthy(&r, 60000, false, NULL)) {
		s->ready = 1;
		s->last_status = now;
		report_status_line(&r, &line);
		notify_send("READY=1\nSTATUS=%s", line.data);
		log_info("ready: %s", line.data);
	} else if (s->ready && !s->stopping && now - s->last_status >= 5000) {
		/* Keep `systemctl status` current. */
		s->last_status = now;
		report_status_line(&r, &line);
		notify_send("STATUS=%s", line.data);
	}
	supervisor_snapshot_free(&r);
	buf_free(&line);
	if (s->watchdog_ms && now - s->last_watchdog >= s->watchdog_ms / 2) {
		s->last_watchdog = now;
		notify_send("WATCHDOG=1");
	}
}

/* One group per database (one without databases:), each with its stats
 * area; -1 (logged by stats_create()) when one cannot be mapped. */
static int
make_groups(struct supervisor *s)
{
	s->ngroups = s->cfg->ndatabases ? (int)s->cfg->ndatabases : 1;
	s->groups = xcalloc((size_t)s->ngroups, sizeof(*s->groups));
	for (int g = 0; g < s->ngroups; g++) {
		if (s->cfg->ndatabases)
			s->groups[g].name = xstrdup(s->cfg->databases[g].name);
		if (!(s->groups[g].stats = stats_create()))
			return -1;
	}
	return 0;
}

static void
free_groups(struct supervisor *s)
{
	for (int g = 0; g < s->ngroups; g++) {
		free(s->groups[g].name);
		stats_destroy(s->groups[g].stats);
	}
	free(s->groups);
}

/* The metrics server and systemd notification. */
static int
start_services(struct supervisor *s)
{
	char *err = NULL;
	notify_init();
	s->watchdog_ms = notify_watchdog_usec() / 1000;
	set_dur_bounds(s, s->cfg);
	if (s->cfg->metrics_listen) {
		s->metrics = httpd_listen(s->loop, s->cfg->metrics_listen,
					  on_http, s, &err);
		if (!s->metrics) {
			log_errorx("metrics.listen %s: %s",
				   s->cfg->metrics_listen, err);
			free(err);
			return -1;
		}
		log_info("serving /metrics and /healthz on %s (port %d)",
			 s->cfg->metrics_listen, httpd_port(s->metrics));
	}
	ev_timer_init(&s->status, on_status, STATUS_EVERY, STATUS_EVERY);
	s->status.data = s;
	ev_timer_start(s->loop, &s->status);
	return 0;
}

int
supervisor_run(const char *config_path, struct config *cfg, int workers,
	       const char *database)
{
	struct supervisor s = {.config_path = config_path,
			       .cfg = cfg,
			       .workers_override = workers,
			       .database = database,
			       .last_reload_ok = 1,
			       .last_reload_s = (int64_t)time(NULL)};

	log_init("supervisor", cfg->log_level,
		 cfg->log_format == LOG_FORMAT_JSON);
	if (database && cfg->ndatabases) {
		log_errorx("-d names one database, and %s names %zu under "
			   "databases:; leave -d out",
			   config_path, cfg->ndatabases);
		config_free(cfg);
		return EXIT_CONFIG;
	}
	override_database(&s);
	if (make_groups(&s) < 0) {
		free_groups(&s);
		config_free(s.cfg);
		return EXIT_CONFIG;
	}
	signal(SIGPIPE, SIG_IGN);
	s.loop = ev_default_loop(0);
	ev_signal_init(&s.sigterm, on_stop_signal, SIGTERM);
	ev_signal_init(&s.sigint, on_stop_signal, SIGINT);
	ev_signal_init(&s.sighup, on_hup, SIGHUP);
	ev_timer_init(&s.kill_timer, on_kill_timer, 0., 0.);
	s.sigterm.data = s.sigint.data = s.sighup.data = s.kill_timer.data = &s;
	ev_signal_start(s.loop, &s.sigterm);
	ev_signal_start(s.loop, &s.sigint);
	ev_signal_start(s.loop, &s.sighup);
	resize(&s, supervisor_nworkers(&s));
	log_info("pgjobd %s starting %d workers", PGJOBD_VERSION,
		 supervisor_nworkers(&s));
	if (start_services(&s) < 0) {
		free(s.children);
		free_groups(&s);
		config_free(s.cfg);
		return EXIT_CONFIG;
	}
	for (int i = 0; i < s.nchildren; i++)
		spawn(&s, &s.children[i]);
	ev_run(s.loop, 0);
	for (int i = 0; i < s.nchildren; i++)
		if (s.children[i].pipe_wr >= 0)
			close(s.children[i].pipe_wr);
	while (s.retired) {
		struct child *r = s.retired;
		s.retired = r->next;
		if (r->pipe_wr >= 0)
			close(r->pipe_wr);
		free(r);
	}
	free(s.children);
	config_free(s.cfg);
	httpd_close(s.metrics);
	free_groups(&s);
	notify_close();
	log_info("stopped (exit %d)", s.exit_code);
	return s.exit_code;
}
