/*
 * handler_process: a process handler's programs ("copies"), started and
 * supervised by the worker whose jobs they run, and the line protocol they
 * speak on their standard streams (docs/handlers.md, "process").
 *
 * Copies belong to the worker, not to the instance: each worker holds its
 * own jobs' leases on its own connection and loop, so a job goes from the
 * claim to its copy and back to its end in one process, with no hand-off.
 * A handler's pool has at most `copies` of them, started when a job finds
 * no room (not before: a kind never seen costs nothing), each holding up
 * to `concurrency` jobs at once; jobs that find every place taken wait
 * here in claim order (their leases renewed by the worker as for any held
 * job).
 *
 * The protocol is newline-delimited JSON, version 1
 * (handler_process_proto.c writes and checks its lines).  The copy speaks
 * first (hello: its protocol and kinds); then pgjobd sends job, cancel and
 * shutdown lines, and the copy answers done, failed, snooze and progress
 * lines.  Everything the copy writes is read in bounded pieces
 * (handler_process_copy.c, a copy's pipes and life): a line
 * longer than max_line_bytes, a line that is not a JSON object, a field of
 * the wrong type, an id that is not one of its jobs: any of these ends the
 * copy (SIGKILL to its process group), never the worker, and the attempts
 * of its jobs end as failed (retried per the handler's policy).  stderr
 * goes to the log, line by line, with the job's context when the copy
 * holds one job.
 *
 * A copy that exits on its own ends its jobs' attempts the same way and is
 * replaced when a job needs it, after a backoff that grows while copies
 * keep ending without answering a job (a crash loop, which is logged).
 * Processes are spawned and killed as exec's commands are
 * (handler_child_start(): own process group, recorded for the supervisor,
 * user, group and limits, SIGKILL when the worker dies).
 */
#include "handlers/handler_process.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ev.h>

#include "common/config.h"
#include "common/duration.h"
#include "common/log.h"
#include "common/util.h"
#include "handlers/handler_process_copy.h"
#include "handlers/handler_process_proto.h"

#define KILL_GRACE_MS  5000
#define BACKOFF_MIN_MS 250
#define BACKOFF_MAX_MS 30000
#define CRASH_LOOP     3 /* ends in a row without an answer: logged */

enum pj_state { PJ_WAITING, PJ_SENT, PJ_CANCELLED, PJ_ENDING };

/* A job given to the handler: waiting for a place, or in a copy. */
struct proc_job {
	void *run;
	handler_finish_fn *finish;
	const struct job *job;
	struct log_job lj;
	struct proc_pool *pool;
	struct proc_copy *copy; /* NULL while waiting */
	struct proc_job *next, *prev;
	enum pj_state state;
	ev_timer timer; /* timeout, then the cancel's grace; or zero */
	int64_t timeout_ms;
	char *why; /* owned: "timed out after 1s", "stopped: ..." */
	int timed_out;
	bool stopped;
};

/* A handler's copies in this worker, and the jobs waiting for a place. */
struct proc_pool {
	const struct handler_conf *h;
	struct ev_loop *loop;
	struct proc_copy **copies; /* h->copies places; NULL: free */
	struct proc_copy *leaving; /* shutting down, out of copies[] */
	struct proc_job *wait_head, *wait_tail;
	unsigned started;
	int fails; /* ends in a row without an answer */
	int64_t next_start_ms;
	ev_timer restart_w;
	ev_timer fail_w; /* fails the waiting jobs from the loop */
	char *fail_why;	 /* owned: why no copy could start */
};

/* The pool whose copy c is (its owner, see handler_process_copy.h). */
static struct proc_pool *
pool_of(const struct proc_copy *c)
{
	return c->owner;
}

static const struct config *cfg;
static int worker_slot;
static struct proc_pool *pools; /* one per handler of cfg, by index */
static uint64_t *crashes;	/* /metrics: pgjobd_process_crashes_total */

static void dispatch(struct proc_pool *p);
static void copy_line(struct proc_copy *c, const char *s, size_t len);
static void copy_exit(struct proc_copy *c, int status);

/* Its stderr lines carry the job's context when c holds one job. */
static const struct log_job *
copy_stderr_job(const struct proc_copy *c)
{
	return c->njobs == 1 ? &c->jobs->lj : NULL;
}

static const struct proc_copy_ops copy_ops = {
	.on_line = copy_line,
	.on_exit = copy_exit,
	.stderr_job = copy_stderr_job,
};

void
handler_process_set_crash_counter(uint64_t *counter)
{
	crashes = counter;
}

size_t
handler_process_crash_loops(const char **kinds, size_t max)
{
	size_t n = 0;
	for (size_t i = 0; pools && cfg && i < cfg->nhandlers && n < max; i++)
		if (pools[i].fails >= CRASH_LOOP)
			kinds[n++] = pools[i].h->kind;
	return n;
}

void
handler_process_init(const struct config *c)
{
	handler_process_fini();
	cfg = c;
	pools = xcalloc(c->nhandlers ? c->nhandlers : 1, sizeof(*pools));
	for (size_t i = 0; i < c->nhandlers; i++) {
		pools[i].h = &c->handlers[i];
		if (c->handlers[i].type == HANDLER_PROCESS)
			pools[i].copies = xcalloc((size_t)c->handlers[i].copies,
						  sizeof(struct proc_copy *));
	}
}

static void
list_push(struct proc_job **head, struct proc_job **tail, struct proc_job *pj)
{
	pj->next = NULL;
	pj->prev = tail ? *tail : NULL;
	if (tail) {
		if (*tail)
			(*tail)->next = pj;
		else
			*head = pj;
		*tail = pj;
		return;
	}
	pj->next = *head;
	if (*head)
		(*head)->prev = pj;
	*head = pj;
}

static void
list_remove(struct proc_job **head, struct proc_job **tail, struct proc_job *pj)
{
	if (pj->prev)
		pj->prev->next = pj->next;
	else
		*head = pj->next;
	if (pj->next)
		pj->next->prev = pj->prev;
	else if (tail)
		*tail = pj->prev;
	pj->next = pj->prev = NULL;
}

/* Takes pj out of its copy or the wait list. */
static void
detach(struct proc_job *pj)
{
	struct proc_pool *p = pj->pool;

	if (pj->copy) {
		list_remove(&pj->copy->jobs, NULL, pj);
		pj->copy->njobs--;
		pj->copy = NULL;
	} else if (pj->state == PJ_WAITING) {
		list_remove(&p->wait_head, &p->wait_tail, pj);
	}
	pj->state = PJ_ENDING;
	ev_timer_stop(p->loop, &pj->timer);
}

/* Ends pj's run with res (its strings taken); pj is freed by then. */
static void
end_job(struct proc_job *pj, struct handler_result *res)
{
	detach(pj);
	pj->finish(pj->run, res);
}

/* Ends pj with a RETRY result whose error is msg (taken). */
static void
end_retry(struct proc_job *pj, char *msg)
{
	struct handler_result r = {.outcome = OUTCOME_RETRY,
				   .retry_in_ms = -1,
				   .error = msg,
				   .timed_out = pj->timed_out};
	end_job(pj, &r);
}

static int64_t
wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
send_job(struct proc_copy *c, struct proc_job *pj)
{
	size_t from = c->wbuf.len;
	handler_process_proto_job(&c->wbuf, pj->job, pj->timeout_ms,
				  wall_ms() + pj->timeout_ms, cfg->lease_ms);
	handler_process_copy_flush(c, from);
}

static void
send_cancel(struct proc_copy *c, struct proc_job *pj, const char *reason)
{
	size_t from = c->wbuf.len;
	handler_process_proto_cancel(&c->wbuf, pj->job->id, reason);
	handler_process_copy_flush(c, from);
}

static int64_t
grace_ms(const struct proc_job *pj)
{
	int64_t t = pj->pool->h->timeout_ms;
	return t > 0 && t < KILL_GRACE_MS ? t : KILL_GRACE_MS;
}

/* A cancel to pj's copy, and the grace after which the copy goes. */
static void
cancel(struct proc_job *pj, const char *reason)
{
	struct ev_loop *loop = pj->pool->loop;

	pj->state = PJ_CANCELLED;
	send_cancel(pj->copy, pj, reason);
	ev_timer_stop(loop, &pj->timer);
	ev_timer_set(&pj->timer, (double)grace_ms(pj) / 1000., 0.);
	ev_timer_start(loop, &pj->timer);
}

static void
job_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct proc_job *pj = w->data;
	char d[32], g[32];

	ev_timer_stop(loop, w);
	switch (pj->state) {
	case PJ_WAITING:
		return;
	case PJ_SENT:
		duration_format(pj->timeout_ms, d, sizeof(d));
		log_job(LOG_WARN, &pj->lj, "timed out after %s; cancelling it",
			d);
		pj->timed_out = 1;
		pj->why = xasprintf("timed out after %s", d);
		cancel(pj, "timeout");
		return;
	case PJ_CANCELLED:
		duration_format(grace_ms(pj), g, sizeof(g));
		log_job(LOG_WARN, &pj->lj,
			"still running %s after its cancel; killing its "
			"process handler (copy %u)",
			g, pj->copy->number);
		handler_process_copy_kill(
			pj->copy,
			xasprintf("job %lld did not end within %s of its "
				  "cancel (%s)",
				  (long long)pj->job->id, g, pj->why));
		return;
	case PJ_ENDING: /* stopped before it had a place */
		end_retry(pj, xstrdup(pj->why));
		return;
	}
}

/* The job of id in c, or NULL (a violation: the copy is ended). */
static struct proc_job *
find_job(struct proc_copy *c, const struct proto_msg *m)
{
	for (struct proc_job *pj = c->jobs; pj; pj = pj->next)
		if (pj->job->id == m->id)
			return pj;
	handler_process_copy_violation(
		c, "id %lld is not a job this copy holds", (long long)m->id);
	return NULL;
}

/* Takes c out of its pool (a place or the leaving list). */
static void
unlink_copy(struct proc_copy *c)
{
	struct proc_pool *p = pool_of(c);

	for (int i = 0; i < p->h->copies; i++)
		if (p->copies[i] == c)
			p->copies[i] = NULL;
	for (struct proc_copy **l = &p->leaving; *l; l = &(*l)->next_leaving)
		if (*l == c) {
			*l = c->next_leaving;
			break;
		}
}

/* After an answer: a copy past max_jobs or max_memory leaves. */
static void
maybe_recycle(struct proc_copy *c)
{
	const struct handler_conf *h = c->h;
	int64_t rss;

	if (c->state != COPY_READY)
		return;
	if (h->max_jobs > 0 && c->answered >= h->max_jobs) {
		handler_process_copy_log(c, LOG_INFO,
					 "recycled after %lld jobs",
					 (long long)c->answered);
	} else if (h->max_memory > 0 &&
		   (rss = handler_process_copy_rss(c)) > h->max_memory) {
		handler_process_copy_log(c, LOG_INFO,
					 "recycled: resident set %lld KiB over "
					 "max_memory",
					 (long long)(rss / 1024));
	} else {
		return;
	}
	c->state = COPY_LEAVING;
	c->planned = true;
	/* Its place goes to a new copy at once; it finishes its jobs. */
	unlink_copy(c);
	c->next_leaving = pool_of(c)->leaving;
	pool_of(c)->leaving = c;
}

/* A leaving copy with no job left is told to shut down. */
static void
maybe_shutdown(struct proc_copy *c)
{
	if (c->state == COPY_LEAVING && c->njobs == 0)
		handler_process_copy_shutdown(c);
}

/* done, failed or snooze for pj: its end.  m's strings are taken. */
static void
answer(struct proc_copy *c, struct proc_job *pj, struct proto_msg *m)
{
	struct handler_result r = {.outcome = OUTCOME_DONE, .retry_in_ms = -1};

	if (m->type == PROTO_DONE) {
		r.result = m->result;
		m->result = NULL;
		if (m->result_refused)
			log_job(LOG_WARN, &pj->lj,
				"result is not JSON that PostgreSQL accepts; "
				"done without it");
	} else if (m->type == PROTO_FAILED) {
		r.outcome = m->dead ? OUTCOME_DEAD : OUTCOME_RETRY;
		r.error = m->error;
		m->error = NULL;
		r.retry_in_ms = m->delay_ms;
	} else { /* snooze: not a failure, the attempt is given back */
		r.outcome = OUTCOME_RETRY;
		r.retry_in_ms = m->delay_ms;
		r.snooze = true;
	}
	c->answered++;
	pool_of(c)->fails = 0;
	if (pj->why) {
		/* Timed out or stopped: it ended after its cancel; the
		 * attempt failed whatever it says. */
		handler_result_clear(&r);
		r.outcome = OUTCOME_RETRY;
		r.retry_in_ms = -1;
		r.error = xstrdup(pj->why);
		r.timed_out = pj->timed_out;
	}
	log_job(r.outcome == OUTCOME_DONE ? LOG_DEBUG : LOG_INFO, &pj->lj,
		"%s (copy %u)", handler_process_proto_name(m->type), c->number);
	maybe_recycle(c);
	end_job(pj, &r);
	maybe_shutdown(c);
	dispatch(pool_of(c)); /* its place is free */
}

/* A line c wrote (see struct proc_copy_ops). */
static void
copy_line(struct proc_copy *c, const char *s, size_t len)
{
	struct proto_msg m;
	struct proc_job *pj;
	char *why;

	if (handler_process_proto_parse(s, len, pool_of(c)->h->kind, &m, &why) <
	    0) {
		handler_process_copy_violation(c, "%s", why);
		free(why);
		return;
	}
	if (m.type == PROTO_HELLO && c->state != COPY_STARTING) {
		handler_process_copy_violation(c, "a second hello");
	} else if (m.type == PROTO_HELLO) {
		ev_timer_stop(pool_of(c)->loop, &c->start_w);
		c->state = COPY_READY;
		handler_process_copy_log(c, LOG_INFO, "ready (protocol %d)",
					 HANDLER_PROCESS_PROTOCOL);
		dispatch(pool_of(c));
	} else if (c->state == COPY_STARTING) {
		handler_process_copy_violation(
			c, "%s before hello",
			handler_process_proto_name(m.type));
	} else if ((pj = find_job(c, &m)) && m.type == PROTO_PROGRESS) {
		log_job(LOG_DEBUG, &pj->lj, "progress %.200s",
			m.progress ? m.progress : "null");
	} else if (pj) {
		answer(c, pj, &m);
	}
	handler_process_proto_free(&m);
}

/* Whether no copy of p can take a job now or soon. */
static bool
none_alive(const struct proc_pool *p)
{
	for (int i = 0; i < p->h->copies; i++)
		if (p->copies[i] && !p->copies[i]->why)
			return false;
	return true;
}

static void
fail_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct proc_pool *p = w->data;
	char *why = p->fail_why;

	p->fail_why = NULL;
	while (p->wait_head)
		end_retry(p->wait_head,
			  xasprintf("process handler could not start: %s",
				    why ? why : "?"));
	free(why);
}

/* A copy ended unasked, or could not be started: the next start waits a
 * while, the longer the more of them in a row. */
static void
note_failure(struct proc_pool *p, const char *why)
{
	int64_t delay;
	char d[32];

	p->fails++;
	if (crashes)
		__atomic_add_fetch(crashes, 1, __ATOMIC_RELAXED);
	delay = (int64_t)BACKOFF_MIN_MS << (p->fails < 8 ? p->fails - 1 : 7);
	if (delay > BACKOFF_MAX_MS)
		delay = BACKOFF_MAX_MS;
	p->next_start_ms = util_now_ms() + delay;
	if (p->fails >= CRASH_LOOP)
		log_msg(LOG_WARN,
			"kind=%s: crash loop: its program ended %d times in a "
			"row without answering a job (%s); next start in %s",
			p->h->kind, p->fails, why,
			duration_format(delay, d, sizeof(d)));
}

/* No copy could start (why, taken): the jobs that wait for one fail,
 * from the loop, unless another copy is alive. */
static void
fail_waiting(struct proc_pool *p, char *why)
{
	if (!none_alive(p) || !p->wait_head) {
		free(why);
		return;
	}
	free(p->fail_why);
	p->fail_why = why;
	ev_timer_start(p->loop, &p->fail_w);
}

/* Starts a copy in place i; NULL (the waiting jobs told) if it cannot. */
static struct proc_copy *
copy_start(struct proc_pool *p, int i)
{
	char *err = NULL;
	struct proc_copy *c = handler_process_copy_start(
		&copy_ops, p, p->loop, p->h, p->started + 1, worker_slot, &err);

	if (!c) {
		log_msg(LOG_WARN, "kind=%s: %s", p->h->kind, err);
		note_failure(p, err);
		fail_waiting(p, err);
		return NULL;
	}
	p->started++;
	p->copies[i] = c;
	return c;
}

/* c has exited: its jobs' attempts end, a crash counts, it is freed. */
static void
copy_exit(struct proc_copy *c, int status)
{
	struct proc_pool *p = pool_of(c);
	char *what = handler_process_copy_status(status);
	char *tail = handler_process_copy_tail(c);

	unlink_copy(c);
	if (c->planned && !c->why)
		handler_process_copy_log(c, LOG_INFO, "exited (%s)", what);
	else
		handler_process_copy_log(
			c, LOG_WARN, "ended (%s%s%s) holding %d jobs%s%s", what,
			c->why ? ": " : "", c->why ? c->why : "", c->njobs,
			tail[0] ? "; stderr: " : "", tail[0] ? tail : "");
	while (c->jobs) {
		struct proc_job *pj = c->jobs;
		char *msg;
		if (pj->why)
			msg = xasprintf("%s; its process handler was killed",
					pj->why);
		else if (c->why)
			msg = xasprintf("process handler ended: %s", c->why);
		else
			msg = xasprintf("process handler's program ended (%s) "
					"while the job ran%s%s",
					what, tail[0] ? ": " : "", tail);
		end_retry(pj, msg);
	}
	if (!c->planned) {
		char *why = c->why    ? xstrdup(c->why)
			    : tail[0] ? xasprintf("%s: %s", what, tail)
				      : xstrdup(what);
		note_failure(p, why);
		if (c->state == COPY_STARTING)
			fail_waiting(p, why);
		else
			free(why);
	}
	free(what);
	free(tail);
	handler_process_copy_free(c);
	dispatch(p);
}

static void
restart_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	dispatch(w->data);
}

/* The copy with the most room, or NULL; *room: the places of the copies
 * still starting. */
static struct proc_copy *
best_copy(struct proc_pool *p, int *starting_room, int *free_place)
{
	struct proc_copy *best = NULL;

	*starting_room = 0;
	*free_place = -1;
	for (int i = 0; i < p->h->copies; i++) {
		struct proc_copy *c = p->copies[i];
		if (!c) {
			if (*free_place < 0)
				*free_place = i;
			continue;
		}
		if (c->why || c->pid <= 0 || c->out_fd < 0)
			continue;
		if (c->state == COPY_STARTING)
			*starting_room += p->h->concurrency;
		else if (c->state == COPY_READY &&
			 c->njobs < p->h->concurrency &&
			 (!best || c->njobs < best->njobs))
			best = c;
	}
	return best;
}

/* Gives waiting jobs places, starting copies for them as allowed. */
static void
dispatch(struct proc_pool *p)
{
	while (p->wait_head) {
		int room, place, waiting = 0;
		struct proc_copy *c = best_copy(p, &room, &place);

		if (c) {
			struct proc_job *pj = p->wait_head;
			list_remove(&p->wait_head, &p->wait_tail, pj);
			pj->copy = c;
			pj->state = PJ_SENT;
			list_push(&c->jobs, NULL, pj);
			c->njobs++;
			send_job(c, pj);
			if (pj->timeout_ms > 0) {
				ev_timer_set(&pj->timer,
					     (double)pj->timeout_ms / 1000.,
					     0.);
				ev_timer_start(p->loop, &pj->timer);
			}
			continue;
		}
		for (struct proc_job *pj = p->wait_head; pj; pj = pj->next)
			waiting++;
		if (waiting <= room || place < 0 || ev_is_active(&p->fail_w))
			return;
		int64_t now = util_now_ms();
		if (now < p->next_start_ms) {
			ev_timer_stop(p->loop, &p->restart_w);
			ev_timer_set(&p->restart_w,
				     (double)(p->next_start_ms - now) / 1000.,
				     0.);
			ev_timer_start(p->loop, &p->restart_w);
			return;
		}
		if (!copy_start(p, place))
			return;
	}
}

struct proc_job *
handler_process_start(void *run, struct ev_loop *loop, const struct job *job,
		      int slot, handler_finish_fn *finish,
		      struct handler_result *fail)
{
	const struct handler_conf *h = job->handler;
	struct proc_pool *p = NULL;
	struct proc_job *pj;

	for (size_t i = 0; cfg && pools && i < cfg->nhandlers; i++)
		if (pools[i].h == h)
			p = &pools[i];
	if (!p || !p->copies || !h->command.v || !h->command.v[0]) {
		fail->outcome = OUTCOME_RETRY;
		fail->error = xstrdup("process handler not set up");
		return NULL;
	}
	worker_slot = slot;
	if (!p->loop) {
		p->loop = loop;
		ev_timer_init(&p->restart_w, restart_cb, 0., 0.);
		ev_timer_init(&p->fail_w, fail_cb, 0., 0.);
		p->restart_w.data = p->fail_w.data = p;
	}
	pj = xcalloc(1, sizeof(*pj));
	pj->run = run;
	pj->finish = finish;
	pj->job = job;
	pj->lj = (struct log_job){job->id, job->kind, job->attempt};
	pj->pool = p;
	pj->state = PJ_WAITING;
	pj->timeout_ms = h->timeout_ms;
	ev_init(&pj->timer, job_timer_cb);
	pj->timer.data = pj;
	list_push(&p->wait_head, &p->wait_tail, pj);
	dispatch(p);
	return pj;
}

void
handler_process_stop(struct proc_job *pj, const char *why)
{
	if (pj->why)
		return;
	pj->why = xasprintf("stopped: %s", why);
	pj->stopped = true;
	if (pj->state == PJ_WAITING) {
		/* Never sent: it ends from the loop as it is. */
		list_remove(&pj->pool->wait_head, &pj->pool->wait_tail, pj);
		pj->state = PJ_ENDING;
		ev_timer_set(&pj->timer, 0., 0.);
		ev_timer_start(pj->pool->loop, &pj->timer);
		return;
	}
	log_job(LOG_INFO, &pj->lj, "stopping: %s; cancelling it", why);
	cancel(pj, why);
}

void
handler_process_free(struct proc_job *pj)
{
	if (pj->pool->loop)
		ev_timer_stop(pj->pool->loop, &pj->timer);
	free(pj->why);
	free(pj);
}

void
handler_process_fini(void)
{
	struct proc_copy **all = NULL;
	size_t n = 0;

	if (!pools)
		return;
	for (size_t i = 0; cfg && i < cfg->nhandlers; i++) {
		struct proc_pool *p = &pools[i];
		for (int k = 0; p->copies && k < p->h->copies; k++)
			if (p->copies[k]) {
				all = xrealloc(all, (n + 1) * sizeof(*all));
				all[n++] = p->copies[k];
			}
		for (struct proc_copy *c = p->leaving; c; c = c->next_leaving) {
			all = xrealloc(all, (n + 1) * sizeof(*all));
			all[n++] = c;
		}
	}
	handler_process_copy_stop_all(all, n);
	for (size_t i = 0; i < n; i++) {
		struct proc_copy *c = all[i];
		/* Jobs still here are abandoned (see handler.h). */
		while (c->jobs) {
			struct proc_job *pj = c->jobs;
			list_remove(&c->jobs, NULL, pj);
			ev_timer_stop(pool_of(c)->loop, &pj->timer);
		}
		handler_process_copy_free(c);
	}
	free(all);
	for (size_t i = 0; cfg && i < cfg->nhandlers; i++) {
		struct proc_pool *p = &pools[i];
		for (struct proc_job *pj = p->wait_head; pj; pj = pj->next)
			ev_timer_stop(p->loop, &pj->timer);
		if (p->loop) {
			ev_timer_stop(p->loop, &p->restart_w);
			ev_timer_stop(p->loop, &p->fail_w);
		}
		free(p->fail_why);
		free(p->copies);
	}
	free(pools);
	pools = NULL;
	cfg = NULL;
}
