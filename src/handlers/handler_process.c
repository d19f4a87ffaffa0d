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
 * The protocol is newline-delimited JSON, version 1.  The copy speaks
 * first (hello: its protocol and kinds); then pgjobd sends job, cancel and
 * shutdown lines, and the copy answers done, failed, snooze and progress
 * lines.  Everything the copy writes is read in bounded pieces: a line
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
 * (handler_exec_spawn(): own process group, recorded for the supervisor,
 * user, group and limits, SIGKILL when the worker dies).
 */
#include "handlers/handler_process.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <ev.h>

#include "common/config.h"
#include "common/duration.h"
#include "common/log.h"
#include "common/pgtext.h"
#include "common/util.h"
#include "handlers/handler_exec.h"
#include "handlers/handler_process_proto.h"

#define KILL_GRACE_MS	  5000
#define SHUTDOWN_GRACE_MS 5000
#define TERM_GRACE_MS	  1000
#define READ_CHUNK	  65536
#define READ_ROUNDS	  16
#define STDERR_LINE	  2048 /* longer stderr lines are cut */
#define STDERR_TAIL	  2048 /* kept for the error of a copy that ended */
#define BACKOFF_MIN_MS	  250
#define BACKOFF_MAX_MS	  30000
#define CRASH_LOOP	  3 /* ends in a row without an answer: logged */

enum copy_state {
	COPY_STARTING, /* spawned, no hello yet */
	COPY_READY,    /* takes jobs */
	COPY_LEAVING,  /* recycled or shut down: takes no more */
};

struct proc_pool;

struct proc_copy {
	struct proc_pool *pool;
	unsigned number; /* for log lines: the pool's nth start */
	enum copy_state state;
	pid_t pid;   /* also its process group; 0 once reaped */
	pid_t shown; /* its pid, for log lines */
	int pidfd, in_fd, out_fd, err_fd;
	ev_io pid_w, in_w, out_w, err_w;
	ev_timer start_w; /* the startup deadline */
	ev_timer kill_w;  /* after the shutdown message: SIGTERM, SIGKILL */
	ev_timer poll_w;  /* exit polled without a pidfd */
	int kill_step;
	struct buf wbuf; /* lines not yet written to its stdin */
	size_t woff;
	struct buf line; /* the stdout line being read */
	char errline[STDERR_LINE];
	size_t errlen;
	bool errcut;
	char tail[STDERR_TAIL]; /* the last stderr lines */
	size_t tail_len;
	struct proc_job *jobs; /* in flight */
	int njobs;
	int64_t answered;
	bool planned; /* we asked it to go: not a crash */
	char *why;    /* owned: why we killed it, or NULL */
	struct proc_copy *next_leaving;
};

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

enum pj_state { PJ_WAITING, PJ_SENT, PJ_CANCELLED, PJ_ENDING };

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

static const struct config *cfg;
static int worker_slot;
static struct proc_pool *pools; /* one per handler of cfg, by index */
static uint64_t *crashes;	/* /metrics: pgjobd_process_crashes_total */

void
handler_process_set_crash_counter(uint64_t *counter)
{
	crashes = counter;
}

static void dispatch(struct proc_pool *p);
static void copy_kill(struct proc_copy *c, char *why);

static void copy_log(const struct proc_copy *c, int level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* A line about a copy: kind=K copy=N pid=P: ... */
static void
copy_log(const struct proc_copy *c, int level, const char *fmt, ...)
{
	char msg[2048];
	va_list ap;

	if (!log_enabled(level))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_msg(level, "kind=%s copy=%u pid=%d: %s", c->pool->h->kind,
		c->number, (int)c->shown, msg);
}

static void
close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
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

/* --- jobs ----------------------------------------------------------------
 */

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

/* --- writing to a copy ------------------------------------------------- */

static void
flush_out(struct proc_copy *c)
{
	while (c->in_fd >= 0 && c->woff < c->wbuf.len) {
		ssize_t n = write(c->in_fd, c->wbuf.data + c->woff,
				  c->wbuf.len - c->woff);
		if (n >= 0) {
			c->woff += (size_t)n;
			continue;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK) {
			ev_io_start(c->pool->loop, &c->in_w);
			return;
		}
		/* EPIPE: it closed its stdin; it cannot take jobs, and its
		 * exit (or its timeouts) will end them. */
		ev_io_stop(c->pool->loop, &c->in_w);
		close_fd(&c->in_fd);
		break;
	}
	ev_io_stop(c->pool->loop, &c->in_w);
	buf_reset(&c->wbuf);
	c->woff = 0;
}

static void
in_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	flush_out(w->data);
}

static int64_t
wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Writes what was appended to c->wbuf since from, or drops it when the
 * copy's stdin is closed. */
static void
send_from(struct proc_copy *c, size_t from)
{
	if (c->in_fd < 0) {
		c->wbuf.len = from;
		if (c->wbuf.data)
			c->wbuf.data[from] = '\0';
		return;
	}
	flush_out(c);
}

static void
send_job(struct proc_copy *c, struct proc_job *pj)
{
	size_t from = c->wbuf.len;
	handler_process_proto_job(&c->wbuf, pj->job, pj->timeout_ms,
				  wall_ms() + pj->timeout_ms, cfg->lease_ms);
	send_from(c, from);
}

static void
send_cancel(struct proc_copy *c, struct proc_job *pj, const char *reason)
{
	size_t from = c->wbuf.len;
	handler_process_proto_cancel(&c->wbuf, pj->job->id, reason);
	send_from(c, from);
}

/* --- timeouts and stops -------------------------------------------------- */

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
		copy_kill(pj->copy,
			  xasprintf("job %lld did not end within %s of its "
				    "cancel (%s)",
				    (long long)pj->job->id, g, pj->why));
		return;
	case PJ_ENDING: /* stopped before it had a place */
		end_retry(pj, xstrdup(pj->why));
		return;
	}
}

/* --- reading what a copy writes ----------------------------------------- */

static void violation(struct proc_copy *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* A protocol violation: logged, and the copy is killed. */
static void
violation(struct proc_copy *c, const char *fmt, ...)
{
	va_list ap;
	char *msg;

	va_start(ap, fmt);
	msg = xvasprintf(fmt, ap);
	va_end(ap);
	/* It may quote what the copy wrote, and goes to the job's error. */
	pgtext_sanitize(msg, strlen(msg));
	copy_log(c, LOG_WARN, "protocol violation: %s; ending this copy", msg);
	copy_kill(c, xasprintf("protocol violation: %s", msg));
	free(msg);
}

/* The job of id in c, or NULL (a violation: the copy is ended). */
static struct proc_job *
find_job(struct proc_copy *c, const struct proto_msg *m)
{
	for (struct proc_job *pj = c->jobs; pj; pj = pj->next)
		if (pj->job->id == m->id)
			return pj;
	violation(c, "id %lld is not a job this copy holds", (long long)m->id);
	return NULL;
}

/* After an answer: a copy past max_jobs or max_memory leaves. */
static void
maybe_recycle(struct proc_copy *c)
{
	const struct handler_conf *h = c->pool->h;
	char path[64];
	long pages = 0, rss_pages = 0;
	FILE *f;

	if (c->state != COPY_READY)
		return;
	if (h->max_jobs > 0 && c->answered >= h->max_jobs) {
		copy_log(c, LOG_INFO, "recycled after %lld jobs",
			 (long long)c->answered);
		goto leave;
	}
	if (h->max_memory <= 0)
		return;
	snprintf(path, sizeof(path), "/proc/%d/statm", (int)c->pid);
	if (!(f = fopen(path, "r")))
		return;
	if (fscanf(f, "%ld %ld", &pages, &rss_pages) != 2)
		rss_pages = 0;
	fclose(f);
	int64_t rss = (int64_t)rss_pages * sysconf(_SC_PAGESIZE);
	if (rss <= h->max_memory)
		return;
	copy_log(c, LOG_INFO, "recycled: resident set %lld KiB over max_memory",
		 (long long)(rss / 1024));
leave:
	c->state = COPY_LEAVING;
	c->planned = true;
	/* Its place goes to a new copy at once; it finishes its jobs. */
	for (int i = 0; i < h->copies; i++)
		if (c->pool->copies[i] == c)
			c->pool->copies[i] = NULL;
	c->next_leaving = c->pool->leaving;
	c->pool->leaving = c;
}

/* Sends the shutdown message to a leaving copy with no job left; SIGTERM
 * and SIGKILL follow if it does not exit. */
static void
maybe_shutdown(struct proc_copy *c)
{
	size_t from = c->wbuf.len;

	if (c->state != COPY_LEAVING || c->njobs > 0 || c->kill_step > 0)
		return;
	handler_process_proto_shutdown(&c->wbuf);
	send_from(c, from);
	c->kill_step = 1;
	ev_timer_set(&c->kill_w, SHUTDOWN_GRACE_MS / 1000., 0.);
	ev_timer_start(c->pool->loop, &c->kill_w);
}

/* done, failed or snooze for pj: its end.  m's strings are taken. */
static void
answer(struct proc_copy *c, struct proc_job *pj, struct proto_msg *m)
{
	struct handler_result r = {.outcome = OUTCOME_DONE, .retry_in_ms = -1};
	char d[32];

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
	} else { /* snooze */
		r.outcome = OUTCOME_RETRY;
		r.retry_in_ms = m->delay_ms;
		r.error =
			xasprintf("snoozed for %s",
				  duration_format(r.retry_in_ms, d, sizeof(d)));
	}
	c->answered++;
	c->pool->fails = 0;
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
	dispatch(c->pool); /* its place is free */
}

/* One line from the copy (without its newline). */
static void
on_line(struct proc_copy *c, const char *s, size_t len)
{
	struct proto_msg m;
	struct proc_job *pj;
	char *why;

	if (handler_process_proto_parse(s, len, c->pool->h->kind, &m, &why) <
	    0) {
		violation(c, "%s", why);
		free(why);
		return;
	}
	if (m.type == PROTO_HELLO && c->state != COPY_STARTING) {
		violation(c, "a second hello");
	} else if (m.type == PROTO_HELLO) {
		ev_timer_stop(c->pool->loop, &c->start_w);
		c->state = COPY_READY;
		copy_log(c, LOG_INFO, "ready (protocol %d)",
			 HANDLER_PROCESS_PROTOCOL);
		dispatch(c->pool);
	} else if (c->state == COPY_STARTING) {
		violation(c, "%s before hello",
			  handler_process_proto_name(m.type));
	} else if ((pj = find_job(c, &m)) && m.type == PROTO_PROGRESS) {
		log_job(LOG_DEBUG, &pj->lj, "progress %.200s",
			m.progress ? m.progress : "null");
	} else if (pj) {
		answer(c, pj, &m);
	}
	handler_process_proto_free(&m);
}

/* Splits what was read into lines; false once the copy is condemned. */
static bool
take_stdout(struct proc_copy *c, const char *p, size_t n)
{
	const struct handler_conf *h = c->pool->h;

	while (n > 0 && !c->why) {
		const char *nl = memchr(p, '\n', n);
		size_t k = nl ? (size_t)(nl - p) : n;

		if (c->line.len + k > (size_t)h->max_line_bytes) {
			violation(c, "a line longer than max_line_bytes (%lld)",
				  (long long)h->max_line_bytes);
			break;
		}
		buf_append(&c->line, p, k);
		if (!nl)
			break;
		if (c->line.len > 0)
			on_line(c, c->line.data, c->line.len);
		buf_reset(&c->line);
		p += k + 1;
		n -= k + 1;
	}
	return !c->why;
}

static void
tail_add(struct proc_copy *c, const char *s, size_t n)
{
	if (n + 1 > STDERR_TAIL)
		s += n + 1 - STDERR_TAIL, n = STDERR_TAIL - 1;
	if (c->tail_len + n + 1 > STDERR_TAIL) {
		size_t drop = c->tail_len + n + 1 - STDERR_TAIL;
		memmove(c->tail, c->tail + drop, c->tail_len - drop);
		c->tail_len -= drop;
	}
	memcpy(c->tail + c->tail_len, s, n);
	c->tail_len += n;
	c->tail[c->tail_len++] = '\n';
}

/* One stderr line: to the log, with its job when the copy holds one. */
static void
err_line(struct proc_copy *c)
{
	c->errline[c->errlen] = '\0';
	pgtext_sanitize(c->errline, c->errlen);
	if (c->njobs == 1)
		log_job(LOG_INFO, &c->jobs->lj, "stderr (copy %u): %s%s",
			c->number, c->errline, c->errcut ? "..." : "");
	else
		copy_log(c, LOG_INFO, "stderr: %s%s", c->errline,
			 c->errcut ? "..." : "");
	tail_add(c, c->errline, c->errlen);
	c->errlen = 0;
	c->errcut = false;
}

static void
take_stderr(struct proc_copy *c, const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (p[i] == '\n') {
			err_line(c);
			continue;
		}
		if (c->errlen < STDERR_LINE - 1)
			c->errline[c->errlen++] = p[i];
		else
			c->errcut = true;
	}
}

static void
eof_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	violation(w->data, "it closed its standard output");
}

/*
 * stdout's end comes a moment before its exit, which then says why it
 * went: it takes no more jobs, and is killed if it does not exit soon.
 */
static void
out_closed(struct proc_copy *c)
{
	ev_timer_stop(c->pool->loop, &c->start_w);
	ev_set_cb(&c->start_w, eof_cb);
	ev_timer_set(&c->start_w, 2., 0.);
	ev_timer_start(c->pool->loop, &c->start_w);
}

/* Reads fd, at most rounds chunks; at EOF or an error it is closed. */
static void
read_fd(struct proc_copy *c, int *fd, ev_io *w, int rounds)
{
	char chunk[READ_CHUNK];
	bool is_out = fd == &c->out_fd;

	while (*fd >= 0 && rounds-- > 0) {
		ssize_t n = read(*fd, chunk, sizeof(chunk));
		if (n > 0) {
			if (!is_out)
				take_stderr(c, chunk, (size_t)n);
			else if (!take_stdout(c, chunk, (size_t)n))
				return;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		ev_io_stop(c->pool->loop, w);
		close_fd(fd);
		if (is_out && !c->why && c->pid > 0)
			out_closed(c);
	}
}

static void
out_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct proc_copy *c = w->data;
	read_fd(c, &c->out_fd, &c->out_w, READ_ROUNDS);
}

static void
err_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct proc_copy *c = w->data;
	read_fd(c, &c->err_fd, &c->err_w, READ_ROUNDS);
}

/* --- a copy's life ------------------------------------------------------- */

static void
signal_all(struct proc_copy *c, int sig)
{
	if (c->pid <= 0)
		return;
	kill(-c->pid, sig);
	kill(c->pid, sig);
}

/* Kills c now (its exit then ends its jobs); takes why. */
static void
copy_kill(struct proc_copy *c, char *why)
{
	if (c->why) {
		free(why);
		return;
	}
	c->why = why;
	ev_io_stop(c->pool->loop, &c->out_w);
	signal_all(c, SIGKILL);
}

static void
kill_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct proc_copy *c = w->data;

	if (c->kill_step == 1) {
		copy_log(c, LOG_WARN,
			 "still running %ds after its shutdown "
			 "message; sending SIGTERM",
			 SHUTDOWN_GRACE_MS / 1000);
		signal_all(c, SIGTERM);
		c->kill_step = 2;
		ev_timer_set(w, TERM_GRACE_MS / 1000., 0.);
		ev_timer_start(loop, w);
		return;
	}
	copy_log(c, LOG_WARN, "still running after SIGTERM; sending SIGKILL");
	signal_all(c, SIGKILL);
}

static void
start_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct proc_copy *c = w->data;
	char d[32];

	duration_format(c->pool->h->startup_timeout_ms, d, sizeof(d));
	copy_log(c, LOG_WARN,
		 "no hello within startup_timeout (%s); killing it", d);
	copy_kill(c, xasprintf("no hello within startup_timeout (%s)", d));
}

/* "exit status 3", "killed by signal 9"; caller frees. */
static char *
describe_status(int status)
{
	if (status < 0)
		return xstrdup("exit status unknown");
	if (WIFEXITED(status))
		return xasprintf("exit status %d", WEXITSTATUS(status));
	return xasprintf("killed by signal %d%s", WTERMSIG(status),
			 WCOREDUMP(status) ? " (core dumped)" : "");
}

/* The stderr tail as one line of text, or ""; caller frees. */
static char *
tail_text(const struct proc_copy *c)
{
	size_t n = c->tail_len;
	char *s = xstrndup(c->tail, n);

	while (n && (s[n - 1] == '\n' || s[n - 1] == ' '))
		s[--n] = '\0';
	return s;
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

static void
copy_free(struct proc_copy *c)
{
	struct ev_loop *loop = c->pool->loop;

	ev_io_stop(loop, &c->pid_w);
	ev_io_stop(loop, &c->in_w);
	ev_io_stop(loop, &c->out_w);
	ev_io_stop(loop, &c->err_w);
	ev_timer_stop(loop, &c->start_w);
	ev_timer_stop(loop, &c->kill_w);
	ev_timer_stop(loop, &c->poll_w);
	close_fd(&c->pidfd);
	close_fd(&c->in_fd);
	close_fd(&c->out_fd);
	close_fd(&c->err_fd);
	buf_free(&c->wbuf);
	buf_free(&c->line);
	free(c->why);
	free(c);
}

/* Takes c out of its pool (a place or the leaving list). */
static void
unlink_copy(struct proc_copy *c)
{
	struct proc_pool *p = c->pool;

	for (int i = 0; i < p->h->copies; i++)
		if (p->copies[i] == c)
			p->copies[i] = NULL;
	for (struct proc_copy **l = &p->leaving; *l; l = &(*l)->next_leaving)
		if (*l == c) {
			*l = c->next_leaving;
			break;
		}
}

/* The copy's process has exited: reap it, end its jobs, free it. */
static void
copy_gone(struct proc_copy *c)
{
	struct proc_pool *p = c->pool;
	int status = -1;
	pid_t pid = c->pid, r;
	char *what, *tail;

	kill(-pid, SIGKILL); /* what it left in its group */
	handler_exec_forget(pid);
	do
		r = waitpid(pid, &status, 0);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		status = -1;
	c->pid = 0;
	/* Out of its place first: a hello read now must not bring it jobs. */
	unlink_copy(c);
	/* Answers written before it went still count. */
	if (!c->why)
		read_fd(c, &c->out_fd, &c->out_w, 4 * READ_ROUNDS);
	read_fd(c, &c->err_fd, &c->err_w, 4 * READ_ROUNDS);
	if (c->errlen)
		err_line(c);
	what = describe_status(status);
	tail = tail_text(c);
	bool crashed = !c->planned;
	if (c->planned && !c->why)
		copy_log(c, LOG_INFO, "exited (%s)", what);
	else
		copy_log(c, LOG_WARN, "ended (%s%s%s) holding %d jobs%s%s",
			 what, c->why ? ": " : "", c->why ? c->why : "",
			 c->njobs, tail[0] ? "; stderr: " : "",
			 tail[0] ? tail : "");
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
	if (crashed) {
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
	copy_free(c);
	dispatch(p);
}

static void
pid_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	copy_gone(w->data);
}

static bool
exited(pid_t pid)
{
	siginfo_t si = {0};
	if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0)
		return errno == ECHILD;
	return si.si_pid != 0;
}

static void
poll_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct proc_copy *c = w->data;
	if (exited(c->pid))
		copy_gone(c);
}

/* PATH, PGJOB_KIND, PGJOB_QUEUE, PGJOB_SLOT, PGJOB_CONCURRENCY, then the
 * handler's env (which may replace PATH, not PGJOB_*); caller frees. */
static char **
copy_env(const struct handler_conf *h)
{
	char **env = xcalloc(5 + h->env.n + 1, sizeof(char *));
	size_t n = 0;

	env[n++] = xstrdup("PATH=" HANDLER_EXEC_PATH);
	env[n++] = xasprintf("PGJOB_KIND=%s", h->kind);
	env[n++] = xasprintf("PGJOB_QUEUE=%s", h->queue);
	env[n++] = xasprintf("PGJOB_SLOT=%d", worker_slot);
	env[n++] = xasprintf("PGJOB_CONCURRENCY=%d", h->concurrency);
	for (size_t i = 0; i < h->env.n; i++) {
		const char *e = h->env.v[i], *eq = strchr(e, '=');
		size_t j, name_len;
		if (!eq || eq == e || strncmp(e, "PGJOB_", 6) == 0)
			continue;
		name_len = (size_t)(eq - e) + 1;
		for (j = 0; j < n; j++)
			if (strncmp(env[j], e, name_len) == 0)
				break;
		if (j < n)
			free(env[j]);
		else
			n++;
		env[j] = xstrdup(e);
	}
	env[n] = NULL;
	return env;
}

/* Starts a copy in place i; NULL (the waiting jobs told) if it cannot. */
static struct proc_copy *
copy_start(struct proc_pool *p, int i)
{
	const struct handler_conf *h = p->h;
	struct exec_child ch;
	char **env = copy_env(h), *err = NULL;
	int rc = handler_exec_spawn(h->command.v, env, &h->run_as, &h->limits,
				    &ch, &err);
	struct proc_copy *c;

	for (size_t k = 0; env[k]; k++)
		free(env[k]);
	free(env);
	if (rc < 0) {
		log_msg(LOG_WARN, "kind=%s: %s", h->kind, err);
		note_failure(p, err);
		fail_waiting(p, err);
		return NULL;
	}
	c = xcalloc(1, sizeof(*c));
	c->pool = p;
	c->number = ++p->started;
	c->pid = c->shown = ch.pid;
	c->in_fd = ch.in_fd;
	c->out_fd = ch.out_fd;
	c->err_fd = ch.err_fd;
	c->state = COPY_STARTING;
	ev_io_init(&c->in_w, in_cb, c->in_fd, EV_WRITE);
	ev_io_init(&c->out_w, out_cb, c->out_fd, EV_READ);
	ev_io_init(&c->err_w, err_cb, c->err_fd, EV_READ);
	ev_timer_init(&c->start_w, start_cb,
		      (double)h->startup_timeout_ms / 1000., 0.);
	ev_init(&c->kill_w, kill_cb);
	ev_timer_init(&c->poll_w, poll_cb, 0.05, 0.05);
	c->in_w.data = c->out_w.data = c->err_w.data = c->start_w.data =
		c->kill_w.data = c->poll_w.data = c;
	c->pidfd = (int)syscall(SYS_pidfd_open, c->pid, 0);
	if (c->pidfd >= 0) {
		ev_io_init(&c->pid_w, pid_cb, c->pidfd, EV_READ);
		c->pid_w.data = c;
		ev_io_start(p->loop, &c->pid_w);
	} else {
		ev_timer_start(p->loop, &c->poll_w);
	}
	ev_io_start(p->loop, &c->out_w);
	ev_io_start(p->loop, &c->err_w);
	ev_timer_start(p->loop, &c->start_w);
	p->copies[i] = c;
	copy_log(c, LOG_INFO, "started %s", h->command.v[0]);
	return c;
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
		if (c->why || c->out_fd < 0)
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

/* --- the module's interface --------------------------------------------- */

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

/* Waits for every copy of the list to exit, until deadline (ms). */
static void
wait_all(struct proc_copy **all, size_t n, int64_t deadline)
{
	for (;;) {
		size_t alive = 0;
		for (size_t i = 0; i < n; i++) {
			if (all[i]->pid <= 0)
				continue;
			if (exited(all[i]->pid)) {
				kill(-all[i]->pid, SIGKILL);
				handler_exec_forget(all[i]->pid);
				while (waitpid(all[i]->pid, NULL, 0) < 0 &&
				       errno == EINTR)
					;
				all[i]->pid = 0;
				continue;
			}
			alive++;
		}
		if (!alive || util_now_ms() >= deadline)
			return;
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
}

void
handler_process_fini(void)
{
	struct proc_copy **all = NULL;
	size_t n = 0;
	static const char line[] = "{\"type\":\"shutdown\"}\n";

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
	/* The loop is done: the shutdown line goes out here (a line queued
	 * behind a full pipe is dropped: SIGTERM follows), then stdin is
	 * closed, which tells a copy the same. */
	for (size_t i = 0; i < n; i++) {
		struct proc_copy *c = all[i];
		if (c->in_fd >= 0 && c->woff >= c->wbuf.len &&
		    write(c->in_fd, line, sizeof(line) - 1) < 0)
			copy_log(c, LOG_DEBUG, "shutdown message not sent");
		close_fd(&c->in_fd);
	}
	wait_all(all, n, util_now_ms() + SHUTDOWN_GRACE_MS);
	for (size_t i = 0; i < n; i++)
		if (all[i]->pid > 0) {
			copy_log(all[i], LOG_WARN,
				 "still running at shutdown; "
				 "sending SIGTERM");
			signal_all(all[i], SIGTERM);
		}
	wait_all(all, n, util_now_ms() + TERM_GRACE_MS);
	for (size_t i = 0; i < n; i++)
		if (all[i]->pid > 0)
			signal_all(all[i], SIGKILL);
	wait_all(all, n, util_now_ms() + 60000);
	for (size_t i = 0; i < n; i++) {
		struct proc_copy *c = all[i];
		/* Jobs still here are abandoned (see handler.h). */
		while (c->jobs) {
			struct proc_job *pj = c->jobs;
			list_remove(&c->jobs, NULL, pj);
			ev_timer_stop(c->pool->loop, &pj->timer);
		}
		copy_free(c);
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
