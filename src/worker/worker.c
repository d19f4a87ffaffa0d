/*
 * worker: one worker process, on one libev loop: its watchers and
 * signals, its connection and session, the heartbeat, and the way out
 * (drain, retire, stop now), and the loop's turn that sends ends and
 * claims.  What it does with jobs is in claim.c, held.c, sqlhandler.c and
 * renew.c, what it hears in notify.c; the cluster duties in duty.c; the
 * figures for /metrics in monitor.c.  See internal.h for how the files
 * share the work.
 *
 * Signal work happens on the loop (ev_signal), never in a signal handler:
 *   SIGTERM, SIGINT  first: drain (claim no more, finish what is held, up
 *                    to shutdown_timeout); second: stop now
 *   SIGUSR2          retire (a reload): drain without a deadline
 */
#include "worker/worker.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "common/backoff.h"
#include "common/config.h"
#include "common/failpoint.h"
#include "common/stats.h"
#include "common/util.h"
#include "db/db.h"
#include "db/dbev.h"
#include "db/lease.h"
#include "db/pooler.h"
#include "db/queue.h"
#include "db/session.h"
#include "worker/duty.h"
#include "worker/internal.h"
#include "worker/otlp.h"

static void connect_db(struct worker *w);

/*
 * The loop's turn, just before it sleeps: every end waiting to be written
 * (held.c) and, when the worker wants work and has room, a claim for up to
 * each queue's free places (claim.c).  Ends and claim go out as two
 * transactions in one round trip (the pipeline keeps their order).  In one
 * statement they could deadlock among many claimers: a claim that meets an
 * older version of a row waits for whoever is updating its newest version,
 * even under SKIP LOCKED, and a statement that also held its finished rows
 * could be waited for in turn.  A transaction that only writes ends waits
 * for no claim.  The next turn waits for this one's answers.
 *
 * A claim right behind the end of a job with children (held.c,
 * claim_after_end()) runs once that end has committed, and takes the
 * children it made due: a chain's next step starts one commit after its
 * parent's end, not after the end's NOTIFY and a claim's round trip.  The
 * instance's other workers leave that NOTIFY to it (stats_claim_behind()),
 * or one of them would claim for nothing at every step; and a NOTIFY of
 * those ends read late, after the claim answered, too: what the worker
 * says holds until its next ends go out (or an sql handler's statement,
 * sqlhandler.c), so that a sibling's late claim does not take the next
 * step from under the claim behind it.  Not a worker that serves a limited
 * queue, nor a claim that leaves out a queue (full here): a child of such a
 * queue would wait for the poll (claim_send() says 0).
 */
static int
serves_limited(const struct worker *w)
{
	for (size_t i = 0; i < w->cfg->nqueues; i++)
		if (w->wq[i].serves && w->wq[i].limited)
			return 1;
	return 0;
}

static void
send_turn(struct worker *w)
{
	if (!w->db || w->cycle_inflight)
		return;
	int all = w->want_claim && !w->draining;
	if (all)
		w->want_claim = 0;
	int parents = held_send_ends(w);
	long long room = claim_send(w, all);
	if (parents >= 0 && w->stats)
		stats_claim_behind(w->stats, w->index,
				   parents && room > 0 && !serves_limited(w)
					   ? dbev_backend_pid(w->db)
					   : 0,
				   room);
}

static void
on_prepare(struct ev_loop *loop, ev_prepare *p, int revents)
{
	struct worker *w = p->data;
	send_turn(w);
	/* A worker on its way out also waits for its turn in flight: a
	 * claim's jobs go back to the queue (held_give_back()), and ends
	 * are written.  A stop's final timer bounds the wait. */
	if (w->draining && w->nheld == 0 && duty_running(w->duty) == 0 &&
	    !(w->db && w->cycle_inflight > 0))
		ev_break(loop, EVBREAK_ALL);
}

/* The lines of this turn of the loop, written before it waits: at the
 * lowest priority, after every other prepare watcher (which may log). */
static void
on_log_flush(struct ev_loop *loop, ev_prepare *p, int revents)
{
	log_flush();
}

static void
on_poll(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct worker *w = t->data;
	w->want_claim = 1;
}

static void
on_renew_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
	renew_all(t->data);
}

static void
on_deadline_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct worker *w = t->data;
	__atomic_store_n(&w->st->tasks_held, duty_running(w->duty),
			 __ATOMIC_RELAXED);
	renew_check_deadlines(w);
}

/* --- heartbeat ------------------------------------------------------------ */

/* A minute's write in flight and what it adds. */
struct minute {
	struct worker *w;
	struct lease_totals add;
};

static void
on_heartbeat_done(void *arg, const struct db_status *st)
{
	if (st->answered)
		conn_ok(arg, st, "heartbeat");
}

static void
on_minute_done(void *arg, const struct db_status *st)
{
	struct minute *m = arg;
	struct worker *w = m->w;
	if (st->error == DB_OK) {
		if (w->minute_failing)
			log_info("writing the throughput minutes works "
				 "again");
		w->minute_failing = 0;
	} else {
		/* Not written: the next write adds it again. */
		w->sent.done -= m->add.done;
		w->sent.failed -= m->add.failed;
		w->sent.retried -= m->add.retried;
		if (st->answered && !w->minute_failing) {
			/* Once while it lasts: the heartbeat goes on. */
			log_warnx("writing the throughput minutes failed: %s "
				  "(pgjob.worker_minutes: docs/security.md)",
				  st->text);
			w->minute_failing = 1;
		}
	}
	free(m);
}

/* a - b */
static struct lease_totals
totals_minus(const struct lease_totals *a, const struct lease_totals *b)
{
	return (struct lease_totals){
		.done = a->done - b->done,
		.failed = a->failed - b->failed,
		.retried = a->retried - b->retried,
	};
}

/* What the worker ended and has not sent to pgjob.worker_minutes yet;
 * counts it as sent.  0: nothing. */
static int
take_unsent(struct worker *w, struct lease_totals *add)
{
	*add = totals_minus(&w->ended, &w->sent);
	w->sent = w->ended;
	return add->done || add->failed || add->retried;
}

static void
on_heartbeat(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct worker *w = t->data;
	if (!w->db)
		return;
	struct lease_totals add, since = totals_minus(&w->ended, &w->base);
	if (take_unsent(w, &add)) {
		struct minute *m = xmalloc(sizeof(*m));
		*m = (struct minute){w, add};
		lease_worker_minute(w->db, w->slot, w->pid, &add,
				    on_minute_done, m);
	}
	history_flush(w);
	/* The console and `pgjob status` show a crash loop from here. */
	const char *loops[16];
	struct lease_crashes cr = {
		.total = (int64_t)__atomic_load_n(&w->st->process_crashes,
						  __ATOMIC_RELAXED),
		.loops = loops,
		.nloops = handler_crash_loops(loops, 16),
	};
	lease_worker_heartbeat(w->db, w->slot, w->pid, w->nheld, &since, &cr,
			       on_heartbeat_done, w);
}

/* --- the connection ------------------------------------------------------- */

static void
on_reconnect(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct worker *w = t->data;
	if (w->db) {
		dbev_free(w->db);
		w->db = NULL;
	}
	connect_db(w);
}

static void
schedule_reconnect(struct worker *w)
{
	double d = (double)backoff_full_jitter(200, 30000, w->reconnects++,
					       backoff_random()) /
		   1000.0;
	ev_timer_set(&w->reconnect, d + 0.05, 0.);
	ev_timer_start(w->loop, &w->reconnect);
}

/*
 * Refuses a pool that shares server sessions (pooler.h) before anything of
 * the session is set up: EXIT_CONFIG, as a schema this binary cannot use,
 * so that the supervisor stops instead of restarting workers that would
 * lose their slot at every transaction's end.  A pooler that kept our
 * session, or whose mode the probe could not check, is a warning, and the
 * worker goes on.  0, -1 (retry later) or EXIT_CONFIG, logged.
 */
static int
check_pooler(struct db_conn *conn)
{
	char *msg;
	enum pooler found = pooler_check(conn, &msg);
	if (found == POOLER_SHARED)
		log_errorx("%s", msg);
	else if (msg)
		log_warnx("%s", msg);
	free(msg);
	return found == POOLER_SHARED  ? EXIT_CONFIG
	       : found == POOLER_ERROR ? -1
				       : 0;
}

/* The session on a fresh connection (session_start()); returns 0, -1
 * (retry later) or an exit code > 0, logged. */
static int
setup_session(struct worker *w, struct db_conn *conn)
{
	const char *queues[w->cfg->nqueues + 1];
	size_t nq = 0;
	for (size_t i = 0; i < w->cfg->nqueues; i++)
		if (w->wq[i].serves)
			queues[nq++] = w->cfg->queues[i].name;
	struct session_worker sw = {
		.lock_class = w->cfg->lock_class,
		.max_slots = w->cfg->max_slots,
		.prev_slot = w->slot,
		.host = w->host,
		.pid = w->pid,
		.supervisor_pid = w->supervisor_pid,
		.version = PGJOBD_VERSION,
		.kinds = w->kinds,
		.nkinds = w->nkinds,
		.queues = queues,
		.nqueues = nq,
	};
	char *err;
	int slot = 0;
	int rc = check_pooler(conn);
	if (rc != 0)
		return rc;
	rc = session_start(conn, &sw, &slot, &err);
	if (rc != 0) {
		if (rc > 0)
			log_errorx("%s", err);
		else
			log_warnx("%s", err);
		free(err);
		return rc;
	}
	char *replaced = NULL;
	if (session_publish_limits(conn, w->limits_json, &replaced, &err) < 0) {
		log_warnx("publishing the config's queue limits: %s", err);
		free(err);
	} else if (replaced) {
		log_warnx("queue limits in the database were different and are "
			  "now this config's: %s (another instance's config, "
			  "or this one's before an edit)",
			  replaced);
		free(replaced);
	}
	if (session_register(conn, &sw, slot, &err) < 0) {
		log_warnx("%s", err);
		free(err);
		return -1;
	}
	if (w->slot && slot != w->slot)
		log_info("slot changed from %d to %d after reconnecting",
			 w->slot, slot);
	w->slot = slot;
	w->base = w->ended; /* its row counts from 0 (see struct worker) */
	log_set_worker(w->number, slot);
	free(w->locked_by);
	w->locked_by = xasprintf("%s:%d", w->host, slot);
	return 0;
}

/* Prepares the claim with the branches of the modes its queues use. */
static void
prepare_statements(struct worker *w)
{
	int serial = 0, per_key = 0;
	for (size_t i = 0; i < w->cfg->nqueues; i++) {
		if (!w->wq[i].serves)
			continue;
		serial |= w->cfg->queues[i].mode == QUEUE_SERIAL;
		per_key |= w->cfg->queues[i].mode == QUEUE_PER_KEY;
	}
	queue_prepare(w->db, serial, per_key);
}

static void
connect_db(struct worker *w)
{
	char *err;
	struct db_conn *conn =
		FAILPOINT(FP_CONNECT)
			? (err = xstrdup("cannot connect: failpoint"), NULL)
			: db_connect(w->cfg->conninfo, "pgjobd", &err);
	if (!conn) {
		log_warnx("%s", err);
		free(err);
		stats_add(&w->st->connect_failures, 1);
		schedule_reconnect(w);
		return;
	}
	int rc = setup_session(w, conn);
	if (rc > 0) {
		db_close(conn);
		w->exit_code = rc;
		w->draining = 1;
		ev_break(w->loop, EVBREAK_ALL);
		return;
	}
	struct dbev_hooks hooks = {notify_received, conn_lost, w};
	if (rc < 0 || !(w->db = dbev_new(w->loop, conn, &hooks))) {
		db_close(conn);
		stats_add(&w->st->connect_failures, 1);
		schedule_reconnect(w);
		return;
	}
	prepare_statements(w);
	w->claim_planned = 0;
	/* No answer within a lease: the path is dead, whatever TCP says. */
	dbev_set_timeout(w->db, w->cfg->lease_ms);
	if (w->connected_once)
		log_info("connected again; re-checking %d held leases",
			 w->nheld);
	else
		log_info("connected, slot %d, handling %zu kinds", w->slot,
			 w->nkinds);
	w->reconnects = 0;
	w->connected_once = 1;
	duty_set_db(w->duty, w->db, w->slot);
	__atomic_store_n(&w->st->pid, w->pid, __ATOMIC_RELAXED);
	__atomic_store_n(&w->st->slot, w->slot, __ATOMIC_RELAXED);
	stats_set(&w->st->last_ok_ms, util_now_ms());
	__atomic_store_n(&w->st->connected, 1, __ATOMIC_RELAXED);
	w->want_claim = 1;
	w->online = 1;
	renew_all(w);
	sqlhandler_next(w);
}

/* --- the way out -----------------------------------------------------------
 */

/* Stops every running handler and gives its job back. */
static void
stop_now(struct worker *w, const char *why)
{
	if (w->stopping)
		return;
	w->stopping = w->draining = 1;
	duty_stop(w->duty);
	log_info("stopping now (%s): %d jobs held", why, w->nheld);
	held_stop_all(w, why);
	/* Whatever cannot be written by then expires on its own. */
	ev_timer_set(&w->final, 10., 0.);
	ev_timer_start(w->loop, &w->final);
}

void
worker_stop_now(struct worker *w, const char *why)
{
	stop_now(w, why);
}

static void
on_final(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct worker *w = t->data;
	log_warnx("exiting with %d jobs unwritten; their leases expire",
		  w->nheld);
	ev_break(loop, EVBREAK_ALL);
}

static void
on_shutdown_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
	stop_now(t->data, "shutdown_timeout reached");
}

static void
on_term(struct ev_loop *loop, ev_signal *s, int revents)
{
	struct worker *w = s->data;
	if (getppid() != w->supervisor_pid) {
		/* PR_SET_PDEATHSIG: the backstop of the pipe's EOF. */
		stop_now(w, "the supervisor is gone");
		return;
	}
	if (w->draining && !w->retiring) {
		stop_now(w, "second stop signal");
		return;
	}
	w->draining = 1;
	w->retiring = 0;    /* a stop: the deadline holds again */
	duty_stop(w->duty); /* tasks do not end on their own */
	log_info("draining: %d jobs held, up to %.0fs", w->nheld,
		 (double)w->cfg->shutdown_timeout_ms / 1000.0);
	ev_timer_set(&w->shutdown, (double)w->cfg->shutdown_timeout_ms / 1000.,
		     0.);
	ev_timer_start(loop, &w->shutdown);
}

/*
 * SIGUSR2: a reload retired this worker.  Workers on the new config take
 * new work from now on; this one claims nothing more, gives its cluster
 * duties up at once (their new holders run on the new config), and
 * finishes the jobs it holds however long they take: a reload restarts no
 * job.  A stop signal after this drains it as usual, up to
 * shutdown_timeout.
 */
static void
on_retire(struct ev_loop *loop, ev_signal *s, int revents)
{
	struct worker *w = s->data;
	if (w->draining)
		return;
	w->draining = w->retiring = 1;
	duty_stop(w->duty);
	log_info("retiring (reload): finishing the %d jobs held; new work "
		 "goes to the workers on the new config",
		 w->nheld);
}

static void
on_parent(struct ev_loop *loop, ev_io *io, int revents)
{
	char c;
	ssize_t n = read(io->fd, &c, 1);
	if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
		ev_io_stop(loop, io);
		stop_now(io->data, "the supervisor is gone");
	}
}

/* --- setup ------------------------------------------------------------------
 */

static int
by_kind_cmp(const void *a, const void *b)
{
	const struct handler_conf *const *x = a, *const *y = b;
	return strcmp((*x)->kind, (*y)->kind);
}

const struct handler_conf *
worker_handler(const struct worker *w, const char *kind)
{
	size_t lo = 0, hi = w->nkinds;
	while (kind && lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int cmp = strcmp(kind, w->by_kind[mid]->kind);
		if (cmp == 0)
			return w->by_kind[mid];
		if (cmp < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

/* The kinds it handles, and the queues they use (resolved by config). */
static void
setup_kinds(struct worker *w)
{
	const struct config *c = w->cfg;
	w->kinds = xcalloc(c->nhandlers + 1, sizeof(char *));
	w->by_kind = xcalloc(c->nhandlers + 1, sizeof(*w->by_kind));
	w->wq = xcalloc(c->nqueues + 1, sizeof(*w->wq));
	for (size_t i = 0; i < c->nqueues; i++)
		w->wq[i].more = 1;
	w->limits_json = config_limits_json(c);
	for (size_t i = 0; i < c->nhandlers; i++) {
		w->by_kind[w->nkinds] = &c->handlers[i];
		w->kinds[w->nkinds++] = c->handlers[i].kind;
		w->wq[c->handlers[i].queue_index].serves = 1;
	}
	qsort(w->by_kind, w->nkinds, sizeof(*w->by_kind), by_kind_cmp);
}

/*
 * Seconds between heartbeats, and between the renewals of cluster-wide
 * leases: 10 s, or a third of the lease when that is shorter.  A worker is
 * live while its heartbeat is younger than three periods.
 */
static double
period(const struct worker *w)
{
	double third = (double)w->cfg->lease_ms / 3000.;
	return third < 10. ? third : 10.;
}

static void
init_watchers(struct worker *w, int parent_fd)
{
	struct ev_loop *l = w->loop;
	double lease = (double)w->cfg->lease_ms / 1000.;
	double poll = (double)w->cfg->poll_interval_ms / 1000.;

	ev_prepare_init(&w->prepare, on_prepare);
	ev_prepare_init(&w->log_flush, on_log_flush);
	ev_set_priority(&w->log_flush, EV_MINPRI);
	ev_timer_init(&w->poll, on_poll, poll, poll);
	ev_timer_init(&w->renew, on_renew_timer, lease / 3, lease / 3);
	ev_timer_init(&w->heartbeat, on_heartbeat, period(w), period(w));
	ev_timer_init(&w->deadline, on_deadline_timer, 0.25, 0.25);
	ev_timer_init(&w->reconnect, on_reconnect, 0., 0.);
	ev_timer_init(&w->shutdown, on_shutdown_timer, 0., 0.);
	ev_timer_init(&w->final, on_final, 0., 0.);
	ev_timer_init(&w->depth, monitor_on_timer, 1., 5.);
	ev_timer_init(&w->flow, flow_on_timer, 0., 0.);
	w->depth.data = w->flow.data = w;
	if (w->stats && w->cfg->metrics_listen)
		ev_timer_start(l, &w->depth);
	ev_signal_init(&w->sigterm, on_term, SIGTERM);
	ev_signal_init(&w->sigint, on_term, SIGINT);
	ev_signal_init(&w->sigusr2, on_retire, SIGUSR2);
	ev_io_init(&w->parent, on_parent, parent_fd, EV_READ);
	w->prepare.data = w->poll.data = w->renew.data = w->heartbeat.data =
		w->deadline.data = w->reconnect.data = w->shutdown.data =
			w->final.data = w->sigterm.data = w->sigint.data =
				w->sigusr2.data = w->parent.data = w;
	ev_prepare_start(l, &w->prepare);
	ev_prepare_start(l, &w->log_flush);
	ev_timer_start(l, &w->poll);
	ev_timer_start(l, &w->renew);
	ev_timer_start(l, &w->heartbeat);
	ev_timer_start(l, &w->deadline);
	ev_signal_start(l, &w->sigterm);
	ev_signal_start(l, &w->sigint);
	ev_signal_start(l, &w->sigusr2);
	if (parent_fd >= 0)
		ev_io_start(l, &w->parent);
}

/* Removes the worker's row, best effort, before the connection closes. */
static void
unregister(struct worker *w)
{
	if (!w->db || w->slot <= 0)
		return;
	/* The prepare watcher would break out of every run before it polls. */
	ev_prepare_stop(w->loop, &w->prepare);
	ev_timer_stop(w->loop, &w->final);
	ev_timer_set(&w->final, 5., 0.);
	ev_timer_start(w->loop, &w->final);
	while (dbev_pending(w->db) > 0 && ev_is_active(&w->final))
		ev_run(w->loop, EVRUN_ONCE);
	struct lease_totals add;
	int unsent = take_unsent(w, &add);
	history_flush_now(w);
	lease_worker_unregister(w->db, w->slot, w->pid, unsent ? &add : NULL);
}

void
worker_signals(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGUSR2);
}

int
worker_main(const struct config *cfg, int parent_fd, int supervisor_pid,
	    struct stats *stats, int index, int number)
{
	struct worker w = {.cfg = cfg,
			   .supervisor_pid = supervisor_pid,
			   .stats = stats,
			   .index = index,
			   .number = number};
	/* Without the shared area (mmap failed), count into a private one. */
	struct stats_worker own = {0};
	w.st = stats && index < STATS_MAX_WORKERS ? &stats->w[index] : &own;
	handler_set_pgid_table(w.st->handler_pgids, STATS_MAX_HANDLERS);
	handler_set_crash_counter(&w.st->process_crashes);

	log_init("worker", cfg->log_level, cfg->log_format == LOG_FORMAT_JSON);
	log_set_worker(number, 0);
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	/* The supervisor's loop watched SIGCHLD: exec handlers need the
	 * default, or their exit status would be lost. */
	signal(SIGCHLD, SIG_DFL);
	if (supervisor_pid > 0 && getppid() != supervisor_pid)
		return 1;
	w.pid = getpid();
	if (gethostname(w.host, sizeof(w.host) - 1) < 0)
		strcpy(w.host, "localhost");
	w.loop = ev_loop_new(EVFLAG_AUTO);
	history_init(&w.hist); /* no minute yet: its first take's */
	setup_kinds(&w);
	handler_init(cfg);
	w.otlp = otlp_new(cfg, w.st);
	char *holder = xasprintf("%s/%d", w.host, w.pid);
	w.duty = duty_new(w.loop, cfg, holder, (int64_t)(period(&w) * 1000.));
	duty_set_stats(w.duty, stats);
	free(holder);
	init_watchers(&w, parent_fd);
	/* Blocked from the fork until now (see the supervisor's spawn()): a
	 * stop or a retire sent meanwhile is delivered here, to the watchers
	 * init_watchers() started. */
	sigset_t stop;
	worker_signals(&stop);
	sigprocmask(SIG_UNBLOCK, &stop, NULL);
	connect_db(&w);
	/* A line a write(2) cost a worker a third of its time when each of
	 * its jobs failed once: its loop's lines go out once a turn
	 * (log_set_buffered()); the rest of its life, one by one. */
	if (!w.exit_code) {
		log_set_buffered(1);
		ev_run(w.loop, 0);
		log_set_buffered(0);
	}
	unregister(&w);
	duty_free(w.duty);
	/* Before handler_fini(), which may end libcurl. */
	otlp_free(w.otlp);
	handler_fini();
	monitor_close(&w);
	dbev_free(w.db);
	while (w.head)
		held_unlink(&w, w.head);
	ev_loop_destroy(w.loop);
	free(w.kinds);
	free(w.by_kind);
	free(w.wq);
	free(w.locked_by);
	history_free(&w.hist);
	log_info("exiting with status %d", w.exit_code);
	return w.exit_code;
}
