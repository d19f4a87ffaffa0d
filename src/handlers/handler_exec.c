/*
 * handler_exec: runs an exec handler's command as a child process on the
 * worker's libev loop.
 *
 * No shell: argv comes straight from the config.  The child gets a clean
 * environment (PATH and PGJOB_*, plus the handler's env), its own process
 * group, pipes on 0, 1 and 2 and no other descriptor, the handler's user
 * and group if it names them, its resource limits (setrlimit(), between
 * the clone and the execve), and SIGKILL when the worker dies
 * (handler_child.c, which process handlers' copies share).  The payload is
 * written to its stdin without blocking; stdout is kept up to 1 MiB (the
 * rest is read and discarded so the child never blocks), stderr's last
 * 4 KiB become the error text.
 *
 * The worker's loop is not libev's default loop, which would reap every
 * child with waitpid(-1) and lose the rusage; so there is no ev_child here.
 * The child is watched through a pidfd (ev_io) and reaped with wait4().
 * When it exits, its whole process group gets SIGKILL before it is reaped
 * (while the zombie still holds the group id): a handler leaves nothing
 * behind.  Then whatever the pipes hold is read and the run completes; the
 * pipes are not waited on for EOF, since a grandchild that left the group
 * may still hold them.
 */
#include "handlers/handler_exec.h"

#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <ev.h>

#include "common/config.h"
#include "common/duration.h"
#include "common/log.h"
#include "common/pgtext.h"
#include "common/size.h"
#include "common/util.h"
#include "handlers/handler_child.h"

#define STDOUT_MAX    (1024 * 1024)
#define STDERR_TAIL   4096
#define KILL_GRACE_MS 5000

struct exec_run {
	void *run; /* handler.c's, handed back to finish */
	handler_finish_fn *finish;
	struct ev_loop *loop;
	struct log_job lj; /* names the job in log lines */
	/* A leased task's run: its name (borrowed from the config) and
	 * partition, which its log lines name instead of a job. */
	const char *task;
	int partition;
	const struct run_as *run_as; /* borrowed from the config, or NULL */
	const struct exec_limits *limits; /* likewise */
	int64_t timeout_ms;
	pid_t pid; /* also the process group id; 0 once reaped */
	int pidfd; /* -1: exit is polled with poll_w instead */
	int in_fd; /* our ends of the pipes; -1 once closed */
	int out_fd;
	int err_fd;
	ev_io pid_w, in_w, out_w, err_w;
	ev_timer timeout_w, kill_w, poll_w;
	const char *in; /* stdin (a job's payload), borrowed from the run */
	size_t in_len;
	size_t in_off;
	struct buf out;
	size_t out_dropped;
	char err[STDERR_TAIL]; /* ring buffer of the stderr tail */
	size_t err_total;      /* stderr bytes seen */
	int64_t start_ms;
	char *why; /* owned: "timed out after 30s", "stopped: ..." or NULL */
	int timed_out; /* its timeout, not a stop, sent the SIGTERM */
	bool stopped;  /* by handler_exec_stop(): the worker decides the end */
};

static void xlog(const struct exec_run *x, int level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * A log line about this run.  A job's names the job (log_job); a leased
 * task's has no job id or attempt to name, so it says task=NAME
 * partition=N at the start of its message instead.
 */
static void
xlog(const struct exec_run *x, int level, const char *fmt, ...)
{
	char msg[2048];
	va_list ap;

	if (!log_enabled(level))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (x->task)
		log_msg(level, "task=%s partition=%d: %s", x->task,
			x->partition, msg);
	else
		log_job(level, &x->lj, "%s", msg);
}

/* Signals the child's process group, and the child in case it left it. */
static void
signal_all(struct exec_run *x, int sig)
{
	handler_child_signal(x->pid, sig);
}

/* True once the child has exited (it is not reaped). */
static bool
child_exited(struct exec_run *x)
{
	return handler_child_exited(x->pid);
}

/* stdout: kept up to STDOUT_MAX, the rest read and dropped. */
static bool
keep_out(void *arg, const char *p, size_t n)
{
	struct exec_run *x = arg;
	size_t room = STDOUT_MAX - x->out.len;
	size_t k = n < room ? n : room;

	if (k)
		buf_append(&x->out, p, k);
	x->out_dropped += n - k;
	return true;
}

/* stderr: its last STDERR_TAIL bytes, in a ring. */
static bool
keep_err(void *arg, const char *p, size_t n)
{
	struct exec_run *x = arg;

	if (n > STDERR_TAIL) {
		x->err_total += n - STDERR_TAIL;
		p += n - STDERR_TAIL;
		n = STDERR_TAIL;
	}
	size_t pos = x->err_total % STDERR_TAIL;
	size_t first = n < STDERR_TAIL - pos ? n : STDERR_TAIL - pos;
	memcpy(x->err + pos, p, first);
	memcpy(x->err, p + first, n - first);
	x->err_total += n;
	return true;
}

/*
 * Reads what *fd holds now, at most rounds chunks.  At EOF or on an error
 * the stream is closed.
 */
static void
drain(struct exec_run *x, int *fd, ev_io *w, int rounds)
{
	handler_child_read(x->loop, fd, w, rounds,
			   fd == &x->out_fd ? keep_out : keep_err, x);
}

static void
out_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct exec_run *x = w->data;
	drain(x, &x->out_fd, &x->out_w, HANDLER_CHILD_READ_ROUNDS);
}

static void
err_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct exec_run *x = w->data;
	drain(x, &x->err_fd, &x->err_w, HANDLER_CHILD_READ_ROUNDS);
}

static void
close_stdin(struct exec_run *x)
{
	ev_io_stop(x->loop, &x->in_w);
	handler_child_close(&x->in_fd);
}

static void
in_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct exec_run *x = w->data;
	while (x->in_off < x->in_len) {
		ssize_t n = write(x->in_fd, x->in + x->in_off,
				  x->in_len - x->in_off);
		if (n >= 0) {
			x->in_off += (size_t)n;
			continue;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return;
		/* EPIPE: the child does not read its stdin; that is its
		 * business (the worker ignores SIGPIPE). */
		if (errno != EPIPE)
			xlog(x, LOG_DEBUG, "writing stdin: %s",
			     strerror(errno));
		break;
	}
	close_stdin(x);
}

static void
kill_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct exec_run *x = w->data;

	xlog(x, LOG_WARN, "still running after SIGTERM; sending SIGKILL");
	signal_all(x, SIGKILL);
}

/* SIGTERM now, SIGKILL after min(5 s, timeout); takes why. */
static void
terminate(struct exec_run *x, char *why)
{
	int64_t grace = KILL_GRACE_MS;

	if (x->why) {
		free(why);
		return;
	}
	x->why = why;
	ev_timer_stop(x->loop, &x->timeout_w);
	if (x->timeout_ms > 0 && x->timeout_ms < grace)
		grace = x->timeout_ms;
	signal_all(x, SIGTERM);
	ev_timer_set(&x->kill_w, (double)grace / 1000., 0.);
	ev_timer_start(x->loop, &x->kill_w);
}

static void
timeout_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct exec_run *x = w->data;
	char d[32];

	if (child_exited(x))
		return; /* it made it: the pid watcher reports it */
	duration_format(x->timeout_ms, d, sizeof(d));
	xlog(x, LOG_WARN, "timed out after %s; sending SIGTERM", d);
	if (!x->why)
		x->timed_out = 1;
	terminate(x, xasprintf("timed out after %s", d));
}

void
handler_exec_stop(struct exec_run *x, const char *why)
{
	xlog(x, LOG_INFO, "stopping: %s", why);
	if (!x->why)
		x->stopped = true;
	terminate(x, xasprintf("stopped: %s", why));
}

/* The stderr tail as sanitized text, trailing whitespace removed; caller
 * frees. */
static char *
err_tail(const struct exec_run *x)
{
	size_t n = x->err_total < STDERR_TAIL ? x->err_total : STDERR_TAIL;
	size_t start = (x->err_total - n) % STDERR_TAIL;
	size_t first = n < STDERR_TAIL - start ? n : STDERR_TAIL - start;
	size_t skip = x->err_total > STDERR_TAIL ? 3 : 0;
	char *s = xmalloc(skip + n + 1);

	memcpy(s, "...", skip);
	memcpy(s + skip, x->err + start, first);
	memcpy(s + skip + first, x->err, n - first);
	n += skip;
	while (n > skip && isspace((unsigned char)s[n - 1]))
		n--;
	if (n == skip)
		n = 0;
	s[n] = '\0';
	pgtext_sanitize(s, n);
	return s;
}

/* stdout, trimmed, when it is JSON; else NULL.  Caller frees. */
static char *
stdout_json(const struct exec_run *x)
{
	const char *s = x->out.data;
	size_t len = x->out.len;

	if (x->out_dropped || len == 0)
		return NULL;
	while (len && isspace((unsigned char)*s))
		s++, len--;
	while (len && isspace((unsigned char)s[len - 1]))
		len--;
	if (len && pgtext_is_jsonb(s, len))
		return xstrndup(s, len);
	/* Text that was meant as JSON but that PostgreSQL would refuse (a raw
	 * tab in a string) is worth a warning; plain text is not. */
	xlog(x, len && *s && strchr("{[\"", *s) ? LOG_WARN : LOG_DEBUG,
	     "stdout is not JSON that PostgreSQL accepts (%zu bytes); no "
	     "result",
	     x->out.len);
	return NULL;
}

/* retry_in from an exit-75 stdout {"retry_in": 30 | "30s"}, or -1. */
static int64_t
stdout_retry_in(const struct exec_run *x)
{
	char *text = stdout_json(x);
	cJSON *j = text ? cJSON_Parse(text) : NULL;
	cJSON *r = cJSON_GetObjectItemCaseSensitive(j, "retry_in");
	int64_t ms = -1;

	if (cJSON_IsNumber(r) && r->valuedouble >= 0 && r->valuedouble < 1e12)
		ms = (int64_t)(r->valuedouble * 1000. + 0.5);
	else if (cJSON_IsString(r))
		duration_parse(r->valuestring, &ms, NULL);
	if (r && ms < 0)
		xlog(x, LOG_WARN,
		     "retry_in is not a duration; the backoff decides");
	cJSON_Delete(j);
	free(text);
	return ms;
}

/*
 * The limit that ended a failed attempt, or NULL (caller frees): SIGXCPU,
 * or SIGKILL once the CPU time reached cpu (the hard limit, a second
 * later, of a command that ignored SIGXCPU), names cpu; SIGXFSZ names
 * file_size.  Not an exit after much CPU time: ru counts the children the
 * command waited for too, and the limit is each process's own.  The other
 * limits make a system call fail (ENOMEM, EMFILE, EAGAIN), which the command
 * reports itself.
 */
static char *
limit_hit(const struct exec_run *x, int status, const struct rusage *ru)
{
	const struct exec_limits *l = x->limits;
	int sig = status >= 0 && WIFSIGNALED(status) ? WTERMSIG(status) : 0;
	char v[SIZE_LEN], how[32];

	if (!l || x->why || status < 0 ||
	    (WIFEXITED(status) && WEXITSTATUS(status) == 0))
		return NULL;
	if (sig == SIGXCPU)
		snprintf(how, sizeof(how), "SIGXCPU");
	else if (sig == SIGKILL)
		snprintf(how, sizeof(how), "SIGKILL");
	else if (sig)
		snprintf(how, sizeof(how), "signal %d", sig);
	else
		snprintf(how, sizeof(how), "exit status %d",
			 WEXITSTATUS(status));
	if (l->cpu_ms > 0 && (sig == SIGXCPU ||
			      (sig == SIGKILL && util_cpu_ms(ru) >= l->cpu_ms)))
		return xasprintf("cpu limit %s reached (%s)",
				 duration_format(l->cpu_ms, v, sizeof(v)), how);
	if (l->file_size > 0 && sig == SIGXFSZ)
		return xasprintf("file_size limit %s reached (SIGXFSZ)",
				 size_format(l->file_size, v, sizeof(v)));
	return NULL;
}

/* "exit status 3", "killed by signal 9 (core dumped)"; caller frees. */
static char *
describe_status(int status)
{
	if (status < 0)
		return xstrdup("exit status unknown (reaped elsewhere)");
	if (WIFEXITED(status))
		return xasprintf("exit status %d", WEXITSTATUS(status));
	return xasprintf("killed by signal %d%s", WTERMSIG(status),
			 WCOREDUMP(status) ? " (core dumped)" : "");
}

/* what: how the command ended (limit_hit() or describe_status()). */
static void
make_result(struct exec_run *x, int status, const char *what,
	    struct handler_result *res)
{
	char *tail, *how = NULL;

	res->outcome = OUTCOME_RETRY;
	res->retry_in_ms = -1;
	res->snooze = false;
	if (!x->why && status >= 0 && WIFEXITED(status)) {
		switch (WEXITSTATUS(status)) {
		case 0:
			res->outcome = OUTCOME_DONE;
			res->result = stdout_json(x);
			return;
		case 65: /* EX_DATAERR */
			res->outcome = OUTCOME_DEAD;
			break;
		case 75: /* EX_TEMPFAIL */
			res->retry_in_ms = stdout_retry_in(x);
			/* With a retry_in it chose when: a snooze. */
			res->snooze = res->retry_in_ms >= 0;
			break;
		}
	}
	res->timed_out = x->timed_out;
	/* Kept with the failed attempt (a signal has no exit status). */
	if (status >= 0 && WIFEXITED(status)) {
		res->has_status = true;
		res->status = WEXITSTATUS(status);
	}
	if (x->why)
		what = how = xasprintf("%s (%s)", x->why, what);
	tail = err_tail(x);
	res->error = tail[0] ? xasprintf("%s: %s", what, tail) : xstrdup(what);
	free(tail);
	free(how);
}

/*
 * The attempt's one line: how it ended, and the outcome this module
 * reports.  A stopped run has none of its own (the worker decides: a
 * cancel, a lost lease, a shutdown), and neither has a task, which its
 * duty restarts whatever happened.
 */
static void
log_attempt(const struct exec_run *x, const char *what, const struct rusage *ru,
	    const struct handler_result *res)
{
	static const char *names[] = {"done", "retry", "dead"};
	char *how;
	int64_t cpu = util_cpu_ms(ru);

	if (x->out_dropped)
		xlog(x, LOG_WARN, "stdout over 1 MiB discarded (%zu bytes)",
		     x->out_dropped);
	if (x->stopped)
		how = xasprintf("%s (%s)", x->why, what);
	else if (x->task)
		how = xasprintf("%s%s%s", x->why ? x->why : "",
				x->why ? ", " : "", what);
	else
		how = xasprintf("%s%s%s -> %s", x->why ? x->why : "",
				x->why ? ", " : "", what,
				res->snooze ? "snooze" : names[res->outcome]);
	xlog(x,
	     res->outcome == OUTCOME_DONE || x->stopped || res->snooze
		     ? LOG_INFO
		     : LOG_WARN,
	     "%s, wall %lld ms, cpu %lld ms, max rss %ld KiB", how,
	     (long long)(util_now_ms() - x->start_ms), (long long)cpu,
	     ru->ru_maxrss);
	free(how);
}

/* The child has exited: kill what it left, reap it, read what is left of
 * its output, and complete the run. */
static void
child_gone(struct exec_run *x)
{
	struct handler_result res = {.outcome = OUTCOME_RETRY,
				     .retry_in_ms = -1};
	struct rusage ru = {0};
	int status = -1;
	pid_t r;

	/* The zombie still holds the group id: nobody else can have it. */
	kill(-x->pid, SIGKILL);
	handler_child_forget(x->pid);
	do
		r = wait4(x->pid, &status, 0, &ru);
	while (r < 0 && errno == EINTR);
	if (r < 0) {
		status = -1;
		memset(&ru, 0, sizeof(ru));
	}
	x->pid = 0;
	drain(x, &x->out_fd, &x->out_w, 4 * HANDLER_CHILD_READ_ROUNDS);
	drain(x, &x->err_fd, &x->err_w, 4 * HANDLER_CHILD_READ_ROUNDS);
	char *what = limit_hit(x, status, &ru);
	if (!what)
		what = describe_status(status);
	make_result(x, status, what, &res);
	/* ru_maxrss is in KiB on Linux; the child's alone (wait4()). */
	if (r >= 0) {
		res.measured = true;
		res.cpu_ms = util_cpu_ms(&ru);
		res.max_rss_kb = ru.ru_maxrss;
	}
	log_attempt(x, what, &ru, &res);
	free(what);
	x->finish(x->run, &res); /* frees x */
}

static void
pid_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	child_gone(w->data);
}

/* Without pidfd_open (kernel before 5.3, or a seccomp filter). */
static void
poll_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct exec_run *x = w->data;
	if (child_exited(x))
		child_gone(x);
}

static void
watch(struct exec_run *x)
{
	ev_io_init(&x->in_w, in_cb, x->in_fd, EV_WRITE);
	ev_io_init(&x->out_w, out_cb, x->out_fd, EV_READ);
	ev_io_init(&x->err_w, err_cb, x->err_fd, EV_READ);
	ev_init(&x->kill_w, kill_cb);
	ev_timer_init(&x->timeout_w, timeout_cb, (double)x->timeout_ms / 1000.,
		      0.);
	ev_timer_init(&x->poll_w, poll_cb, 0.05, 0.05);
	x->pid_w.data = x->in_w.data = x->out_w.data = x->err_w.data = x;
	x->kill_w.data = x->timeout_w.data = x->poll_w.data = x;

	x->pidfd = (int)syscall(SYS_pidfd_open, x->pid, 0);
	if (x->pidfd >= 0) {
		ev_io_init(&x->pid_w, pid_cb, x->pidfd, EV_READ);
		x->pid_w.data = x;
		ev_io_start(x->loop, &x->pid_w);
	} else {
		log_debug("pidfd_open: %s; polling for the child's exit",
			  strerror(errno));
		ev_timer_start(x->loop, &x->poll_w);
	}
	if (x->in_len > 0)
		ev_io_start(x->loop, &x->in_w);
	else
		handler_child_close(&x->in_fd);
	ev_io_start(x->loop, &x->out_w);
	ev_io_start(x->loop, &x->err_w);
	if (x->timeout_ms > 0)
		ev_timer_start(x->loop, &x->timeout_w);
}

struct exec_run *
handler_exec_start(void *run, struct ev_loop *loop,
		   const struct exec_spec *spec, handler_finish_fn *finish,
		   struct handler_result *fail)
{
	struct exec_run *x;
	struct handler_child child;

	if (!spec->argv || !spec->argv[0]) {
		fail->outcome = OUTCOME_RETRY;
		fail->error = xstrdup("exec handler has no command");
		return NULL;
	}
	x = xcalloc(1, sizeof(*x));
	x->run = run;
	x->finish = finish;
	x->loop = loop;
	x->lj = spec->lj;
	x->task = spec->task;
	x->partition = spec->partition;
	x->run_as = spec->run_as;
	x->limits = spec->limits;
	x->timeout_ms = spec->timeout_ms;
	x->in = spec->input ? spec->input : "";
	x->in_len = strlen(x->in);
	x->pidfd = x->in_fd = x->out_fd = x->err_fd = -1;
	x->start_ms = util_now_ms();
	if (handler_child_start(spec->argv, spec->env, x->run_as, x->limits,
				&child, &fail->error) < 0) {
		fail->outcome = OUTCOME_RETRY;
		xlog(x, LOG_WARN, "%s", fail->error);
		free(x);
		return NULL;
	}
	x->pid = child.pid;
	x->in_fd = child.in_fd;
	x->out_fd = child.out_fd;
	x->err_fd = child.err_fd;
	watch(x);
	return x;
}

void
handler_exec_free(struct exec_run *x)
{
	ev_io_stop(x->loop, &x->pid_w);
	ev_io_stop(x->loop, &x->in_w);
	ev_io_stop(x->loop, &x->out_w);
	ev_io_stop(x->loop, &x->err_w);
	ev_timer_stop(x->loop, &x->timeout_w);
	ev_timer_stop(x->loop, &x->kill_w);
	ev_timer_stop(x->loop, &x->poll_w);
	if (x->pid > 0) { /* not reached through child_gone(): no zombie */
		signal_all(x, SIGKILL);
		handler_child_forget(x->pid);
		while (waitpid(x->pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	handler_child_close(&x->pidfd);
	handler_child_close(&x->in_fd);
	handler_child_close(&x->out_fd);
	handler_child_close(&x->err_fd);
	buf_free(&x->out);
	free(x->why);
	free(x);
}
