/*
 * handler_process_copy: one program of a process handler (see the header):
 * spawned as exec's commands are (handler_child_start(): its own process
 * group, recorded for the supervisor, user, group and limits, SIGKILL when
 * the worker dies), read in bounded pieces (a stdout line up to
 * max_line_bytes, a stderr line up to 2 KiB, a bounded number of reads a
 * turn of the loop), killed with its process group and reaped through a
 * pidfd.
 */
#include "handlers/handler_process_copy.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/config.h"
#include "common/duration.h"
#include "common/pgtext.h"
#include "handlers/handler_child.h"
#include "handlers/handler_process_proto.h"

#define SHUTDOWN_GRACE_MS 5000
#define TERM_GRACE_MS	  1000

static void gone(struct proc_copy *c);

void
handler_process_copy_log(const struct proc_copy *c, int level, const char *fmt,
			 ...)
{
	char msg[2048];
	va_list ap;

	if (!log_enabled(level))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_msg(level, "kind=%s copy=%u pid=%d: %s", c->h->kind, c->number,
		(int)c->shown, msg);
}

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
			ev_io_start(c->loop, &c->in_w);
			return;
		}
		/* EPIPE: it closed its stdin; it cannot take jobs, and its
		 * exit (or its timeouts) will end them. */
		ev_io_stop(c->loop, &c->in_w);
		handler_child_close(&c->in_fd);
		break;
	}
	ev_io_stop(c->loop, &c->in_w);
	buf_reset(&c->wbuf);
	c->woff = 0;
}

static void
in_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	flush_out(w->data);
}

static void
prep_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
	ev_prepare_stop(loop, w);
	flush_out(w->data);
}

/* Splits what was read into lines; false once the copy is condemned. */
static bool
take_stdout(void *arg, const char *p, size_t n)
{
	struct proc_copy *c = arg;
	const struct handler_conf *h = c->h;

	while (n > 0 && !c->why) {
		const char *nl = memchr(p, '\n', n);
		size_t k = nl ? (size_t)(nl - p) : n;

		if (c->line.len + k > (size_t)h->max_line_bytes) {
			handler_process_copy_violation(
				c, "a line longer than max_line_bytes (%lld)",
				(long long)h->max_line_bytes);
			break;
		}
		buf_append(&c->line, p, k);
		if (!nl)
			break;
		if (c->line.len > 0)
			c->ops->on_line(c, c->line.data, c->line.len);
		buf_reset(&c->line);
		p += k + 1;
		n -= k + 1;
	}
	return !c->why;
}

static void
tail_add(struct proc_copy *c, const char *s, size_t n)
{
	if (n + 1 > PROC_STDERR_TAIL)
		s += n + 1 - PROC_STDERR_TAIL, n = PROC_STDERR_TAIL - 1;
	if (c->tail_len + n + 1 > PROC_STDERR_TAIL) {
		size_t drop = c->tail_len + n + 1 - PROC_STDERR_TAIL;
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
	const struct log_job *lj = c->ops->stderr_job(c);

	c->errline[c->errlen] = '\0';
	pgtext_sanitize(c->errline, c->errlen);
	if (lj)
		log_job(LOG_INFO, lj, "stderr (copy %u): %s%s", c->number,
			c->errline, c->errcut ? "..." : "");
	else
		handler_process_copy_log(c, LOG_INFO, "stderr: %s%s",
					 c->errline, c->errcut ? "..." : "");
	tail_add(c, c->errline, c->errlen);
	c->errlen = 0;
	c->errcut = false;
}

static bool
take_stderr(void *arg, const char *p, size_t n)
{
	struct proc_copy *c = arg;

	for (size_t i = 0; i < n; i++) {
		if (p[i] == '\n') {
			err_line(c);
			continue;
		}
		if (c->errlen < PROC_STDERR_LINE - 1)
			c->errline[c->errlen++] = p[i];
		else
			c->errcut = true;
	}
	return true;
}

static void
eof_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	handler_process_copy_violation(w->data,
				       "it closed its standard output");
}

/*
 * stdout's end comes a moment before its exit, which then says why it
 * went: it takes no more jobs, and is killed if it does not exit soon.
 */
static void
out_closed(struct proc_copy *c)
{
	ev_timer_stop(c->loop, &c->start_w);
	ev_set_cb(&c->start_w, eof_cb);
	ev_timer_set(&c->start_w, 2., 0.);
	ev_timer_start(c->loop, &c->start_w);
}

/* Reads fd, at most rounds chunks; at EOF or an error it is closed. */
static void
read_fd(struct proc_copy *c, int *fd, ev_io *w, int rounds)
{
	bool is_out = fd == &c->out_fd;

	if (handler_child_read(c->loop, fd, w, rounds,
			       is_out ? take_stdout : take_stderr, c) &&
	    is_out && !c->why && c->pid > 0)
		out_closed(c);
}

static void
out_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct proc_copy *c = w->data;
	read_fd(c, &c->out_fd, &c->out_w, HANDLER_CHILD_READ_ROUNDS);
}

static void
err_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct proc_copy *c = w->data;
	read_fd(c, &c->err_fd, &c->err_w, HANDLER_CHILD_READ_ROUNDS);
}

static void
signal_all(struct proc_copy *c, int sig)
{
	handler_child_signal(c->pid, sig);
}

static void
kill_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct proc_copy *c = w->data;

	if (c->kill_step == 1) {
		handler_process_copy_log(c, LOG_WARN,
					 "still running %ds after its shutdown "
					 "message; sending SIGTERM",
					 SHUTDOWN_GRACE_MS / 1000);
		signal_all(c, SIGTERM);
		c->kill_step = 2;
		ev_timer_set(w, TERM_GRACE_MS / 1000., 0.);
		ev_timer_start(loop, w);
		return;
	}
	handler_process_copy_log(
		c, LOG_WARN, "still running after SIGTERM; sending SIGKILL");
	signal_all(c, SIGKILL);
}

static void
start_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct proc_copy *c = w->data;
	char d[32];

	duration_format(c->h->startup_timeout_ms, d, sizeof(d));
	handler_process_copy_log(
		c, LOG_WARN, "no hello within startup_timeout (%s); killing it",
		d);
	handler_process_copy_kill(
		c, xasprintf("no hello within startup_timeout (%s)", d));
}

static void
pid_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	gone(w->data);
}

static void
poll_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct proc_copy *c = w->data;
	if (handler_child_exited(c->pid))
		gone(c);
}

/* PATH, PGJOB_KIND, PGJOB_QUEUE, PGJOB_SLOT, PGJOB_CONCURRENCY, then the
 * handler's env (which may replace PATH, not PGJOB_*); caller frees. */
static char **
copy_env(const struct handler_conf *h, int slot)
{
	char **env = xcalloc(5 + h->env.n + 1, sizeof(char *));
	size_t n = 0;

	env[n++] = xstrdup("PATH=" HANDLER_CHILD_PATH);
	env[n++] = xasprintf("PGJOB_KIND=%s", h->kind);
	env[n++] = xasprintf("PGJOB_QUEUE=%s", h->queue);
	env[n++] = xasprintf("PGJOB_SLOT=%d", slot);
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

/* Waits for every copy of the list to exit, until deadline (ms). */
static void
wait_all(struct proc_copy **all, size_t n, int64_t deadline)
{
	for (;;) {
		size_t alive = 0;
		for (size_t i = 0; i < n; i++) {
			if (all[i]->pid <= 0)
				continue;
			if (handler_child_exited(all[i]->pid)) {
				kill(-all[i]->pid, SIGKILL);
				handler_child_forget(all[i]->pid);
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
handler_process_copy_flush(struct proc_copy *c, size_t from)
{
	if (c->in_fd < 0) {
		c->wbuf.len = from;
		if (c->wbuf.data)
			c->wbuf.data[from] = '\0';
		return;
	}
	/* Behind a full pipe, in_w writes it when the pipe has room. */
	if (!ev_is_active(&c->in_w))
		ev_prepare_start(c->loop, &c->flush_w);
}

void
handler_process_copy_shutdown(struct proc_copy *c)
{
	size_t from = c->wbuf.len;

	if (c->kill_step > 0)
		return;
	handler_process_proto_shutdown(&c->wbuf);
	handler_process_copy_flush(c, from);
	c->kill_step = 1;
	ev_timer_set(&c->kill_w, SHUTDOWN_GRACE_MS / 1000., 0.);
	ev_timer_start(c->loop, &c->kill_w);
}

void
handler_process_copy_kill(struct proc_copy *c, char *why)
{
	if (c->why) {
		free(why);
		return;
	}
	c->why = why;
	ev_io_stop(c->loop, &c->out_w);
	signal_all(c, SIGKILL);
}

void
handler_process_copy_violation(struct proc_copy *c, const char *fmt, ...)
{
	va_list ap;
	char *msg;

	va_start(ap, fmt);
	msg = xvasprintf(fmt, ap);
	va_end(ap);
	/* It may quote what the copy wrote, and goes to the job's error. */
	pgtext_sanitize(msg, strlen(msg));
	handler_process_copy_log(
		c, LOG_WARN, "protocol violation: %s; ending this copy", msg);
	handler_process_copy_kill(c, xasprintf("protocol violation: %s", msg));
	free(msg);
}

int64_t
handler_process_copy_rss(const struct proc_copy *c)
{
	char path[64];
	long pages = 0, rss_pages = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/statm", (int)c->pid);
	if (c->pid <= 0 || !(f = fopen(path, "r")))
		return -1;
	if (fscanf(f, "%ld %ld", &pages, &rss_pages) != 2)
		rss_pages = -1;
	fclose(f);
	return rss_pages < 0 ? -1 : (int64_t)rss_pages * sysconf(_SC_PAGESIZE);
}

char *
handler_process_copy_status(int status)
{
	if (status < 0)
		return xstrdup("exit status unknown");
	if (WIFEXITED(status))
		return xasprintf("exit status %d", WEXITSTATUS(status));
	return xasprintf("killed by signal %d%s", WTERMSIG(status),
			 WCOREDUMP(status) ? " (core dumped)" : "");
}

char *
handler_process_copy_tail(const struct proc_copy *c)
{
	size_t n = c->tail_len;
	char *s = xstrndup(c->tail, n);

	while (n && (s[n - 1] == '\n' || s[n - 1] == ' '))
		s[--n] = '\0';
	return s;
}

void
handler_process_copy_free(struct proc_copy *c)
{
	struct ev_loop *loop = c->loop;

	ev_io_stop(loop, &c->pid_w);
	ev_io_stop(loop, &c->in_w);
	ev_io_stop(loop, &c->out_w);
	ev_io_stop(loop, &c->err_w);
	ev_timer_stop(loop, &c->start_w);
	ev_timer_stop(loop, &c->kill_w);
	ev_timer_stop(loop, &c->poll_w);
	ev_prepare_stop(loop, &c->flush_w);
	handler_child_close(&c->pidfd);
	handler_child_close(&c->in_fd);
	handler_child_close(&c->out_fd);
	handler_child_close(&c->err_fd);
	buf_free(&c->wbuf);
	buf_free(&c->line);
	free(c->why);
	free(c);
}

/* The process has exited: reap it, read what it left, and hand it over. */
static void
gone(struct proc_copy *c)
{
	int status = -1;
	pid_t pid = c->pid, r;

	kill(-pid, SIGKILL); /* what it left in its group */
	handler_child_forget(pid);
	do
		r = waitpid(pid, &status, 0);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		status = -1;
	/* From here it takes no job (its owner checks c->pid),
	 * even if a hello is among its last lines. */
	c->pid = 0;
	/* Answers written before it went still count. */
	if (!c->why)
		read_fd(c, &c->out_fd, &c->out_w,
			4 * HANDLER_CHILD_READ_ROUNDS);
	read_fd(c, &c->err_fd, &c->err_w, 4 * HANDLER_CHILD_READ_ROUNDS);
	if (c->errlen)
		err_line(c);
	c->ops->on_exit(c, status);
}

struct proc_copy *
handler_process_copy_start(const struct proc_copy_ops *ops, void *owner,
			   struct ev_loop *loop, const struct handler_conf *h,
			   unsigned number, int slot, char **err)
{
	struct handler_child ch;
	char **env = copy_env(h, slot);
	int rc = handler_child_start(h->command.v, env, &h->run_as, &h->limits,
				     &ch, err);
	struct proc_copy *c;

	for (size_t k = 0; env[k]; k++)
		free(env[k]);
	free(env);
	if (rc < 0)
		return NULL;
	c = xcalloc(1, sizeof(*c));
	c->ops = ops;
	c->owner = owner;
	c->loop = loop;
	c->h = h;
	c->number = number;
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
	ev_prepare_init(&c->flush_w, prep_cb);
	c->in_w.data = c->out_w.data = c->err_w.data = c->start_w.data =
		c->kill_w.data = c->poll_w.data = c->flush_w.data = c;
	c->pidfd = (int)syscall(SYS_pidfd_open, c->pid, 0);
	if (c->pidfd >= 0) {
		ev_io_init(&c->pid_w, pid_cb, c->pidfd, EV_READ);
		c->pid_w.data = c;
		ev_io_start(loop, &c->pid_w);
	} else {
		ev_timer_start(loop, &c->poll_w);
	}
	ev_io_start(loop, &c->out_w);
	ev_io_start(loop, &c->err_w);
	ev_timer_start(loop, &c->start_w);
	handler_process_copy_log(c, LOG_INFO, "started %s", h->command.v[0]);
	return c;
}

void
handler_process_copy_stop_all(struct proc_copy **all, size_t n)
{
	static const char line[] = "{\"type\":\"shutdown\"}\n";

	/* The loop is done: the shutdown line goes out here (a line queued
	 * behind a full pipe is dropped: SIGTERM follows), then stdin is
	 * closed, which tells a copy the same. */
	for (size_t i = 0; i < n; i++) {
		struct proc_copy *c = all[i];
		ev_prepare_stop(c->loop, &c->flush_w);
		if (c->in_fd >= 0 && c->woff < c->wbuf.len)
			flush_out(c); /* lines of the last turn */
		if (c->in_fd >= 0 && c->woff >= c->wbuf.len &&
		    write(c->in_fd, line, sizeof(line) - 1) < 0)
			handler_process_copy_log(c, LOG_DEBUG,
						 "shutdown message not sent");
		handler_child_close(&c->in_fd);
	}
	wait_all(all, n, util_now_ms() + SHUTDOWN_GRACE_MS);
	for (size_t i = 0; i < n; i++)
		if (all[i]->pid > 0) {
			handler_process_copy_log(all[i], LOG_WARN,
						 "still running at shutdown; "
						 "sending SIGTERM");
			signal_all(all[i], SIGTERM);
		}
	wait_all(all, n, util_now_ms() + TERM_GRACE_MS);
	for (size_t i = 0; i < n; i++)
		if (all[i]->pid > 0)
			signal_all(all[i], SIGKILL);
	wait_all(all, n, util_now_ms() + 60000);
}
