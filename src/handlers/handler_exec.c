/*
 * handler_exec: runs an exec handler's command as a child process on the
 * worker's libev loop.
 *
 * No shell: argv comes straight from the config.  The child gets a clean
 * environment (PATH and PGJOB_*, plus the handler's env), its own process
 * group, pipes on 0, 1 and 2 and no other descriptor, the handler's user
 * and group if it names them, its resource limits (setrlimit(), between
 * the clone and the execve), and SIGKILL when the worker dies (spawn()).
 * The payload is
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
#include "common/failpoint.h"
#include "common/duration.h"
#include "handlers/handler_exec.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <ev.h>

#include "common/config.h"
#include "common/log.h"
#include "common/pgtext.h"
#include "common/size.h"
#include "common/util.h"

#define STDOUT_MAX    (1024 * 1024)
#define STDERR_TAIL   4096
#define KILL_GRACE_MS 5000
#define READ_CHUNK    65536
#define READ_ROUNDS   16 /* chunks per callback, so one child cannot hog */

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

char *
handler_exec_resolve(const char *argv0, char *const *env, int *err)
{
	const char *path = HANDLER_EXEC_PATH;

	if (strchr(argv0, '/'))
		return xstrdup(argv0);
	for (size_t i = 0; env[i]; i++)
		if (strncmp(env[i], "PATH=", 5) == 0)
			path = env[i] + 5;
	*err = ENOENT;
	while (*path) {
		size_t len = strcspn(path, ":");
		char *cand = xasprintf("%.*s%s%s", (int)len, path,
				       len ? "/" : "", argv0);
		struct stat st;

		if (stat(cand, &st) == 0 && S_ISREG(st.st_mode)) {
			if (access(cand, X_OK) == 0)
				return cand;
			*err = EACCES;
		}
		free(cand);
		path += len + (path[len] == ':');
	}
	return NULL;
}

/* A pipe whose both ends are close-on-exec and above stderr. */
static int
make_pipe(int fds[2])
{
	if (pipe2(fds, O_CLOEXEC) < 0)
		return -1;
	for (int i = 0; i < 2; i++) {
		if (fds[i] > 2)
			continue;
		int fd = fcntl(fds[i], F_DUPFD_CLOEXEC, 3);
		int e = errno;
		close(fds[i]);
		fds[i] = fd;
		if (fd < 0) {
			close(fds[1 - i]);
			errno = e;
			return -1;
		}
	}
	return 0;
}

static void
close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/*
 * The process groups of this worker's running commands, in memory the
 * supervisor shares (handler_exec_set_pgid_table()): when the worker dies
 * without stopping them, the supervisor kills them.  A command's child
 * records its own group, before its execve() (see child_main()); the worker
 * forgets it once the command is reaped.
 */
static int32_t *pgids;
static int npgids;

void
handler_exec_set_pgid_table(int32_t *table, int n)
{
	pgids = table;
	npgids = n;
}

/* Records (or forgets, with on = 0) pid as a running group.  Called in the
 * child of spawn() too: plain stores, no lock, nothing instrumented. */
__attribute__((no_sanitize_address)) static void
note_pgid(pid_t pid, int on)
{
	for (int i = 0; i < npgids; i++) {
		int32_t want = on ? 0 : (int32_t)pid;
		if (__atomic_load_n(&pgids[i], __ATOMIC_RELAXED) == want) {
			__atomic_store_n(&pgids[i], on ? (int32_t)pid : 0,
					 __ATOMIC_RELAXED);
			return;
		}
	}
}

/*
 * What the child of spawn() needs, all prepared by the parent: the child
 * shares the worker's memory (CLONE_VM) until its execve(), on a stack of
 * its own, while the worker waits (CLONE_VFORK).  So it does system calls
 * only: no allocation, no lock, no stdio, and no handler of the worker's
 * may run in it (every signal is blocked until the dispositions are back
 * to their defaults).
 */
struct spawn_args {
	const char *path;
	char *const *argv, *const *env;
	int fds[3];		 /* become 0, 1, 2 */
	pid_t parent;		 /* the worker */
	const struct run_as *as; /* NULL: stay pgjobd's user */
	/* setrlimit()'s, prepared: n of them. */
	struct {
		int resource;
		struct rlimit rl;
		const char *step;
	} lim[5];
	int nlim;
	/* Written by the child when a step fails, read by the parent. */
	int err;
	const char *step; /* NULL: the execve itself */
};

/* The child's stack.  One spawn at a time: the worker is suspended until
 * the child has exec'd or exited. */
static char spawn_stack[64 * 1024] __attribute__((aligned(64)));

__attribute__((noreturn, no_sanitize_address)) static void
child_fail(struct spawn_args *a, const char *step)
{
	a->err = errno;
	a->step = step;
	_exit(127);
}

/*
 * The child, from clone() to execve().  The order matters: credentials
 * change before PR_SET_PDEATHSIG, which a change of credentials clears;
 * then the check that the worker is still the parent, since it may have
 * died before PR_SET_PDEATHSIG was set (and the signal would never come).
 * The set*id calls are raw system calls: glibc's wrappers would signal
 * every thread of the process to change theirs too, and the worker's
 * threads (libcurl's resolver) are not this child's.  The limits come
 * before them, while a root worker's child still may raise a hard limit
 * (CAP_SYS_RESOURCE goes with the uid); RLIMIT_NPROC counts the real
 * uid's processes whenever the kernel checks it (the setresuid marks the
 * process, the execve then fails, and every fork of the command after),
 * so the order changes nothing there.  setrlimit() is one system call
 * (prlimit64) with no lock.  RLIMIT_AS here bounds only
 * what the child maps itself, and it maps nothing more before the execve,
 * which gives it an address space of its own.
 */
__attribute__((no_sanitize_address)) static int
child_main(void *arg)
{
	struct spawn_args *a = arg;
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	sigset_t none;

	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			sigaction(sig, &dfl, NULL); /* glibc's own: EINVAL */
	/* A session of its own, and so a process group of its own (the
	 * group the worker and the supervisor kill): no controlling
	 * terminal, so that a command, even one run as another user, cannot
	 * reach the terminal pgjobd was started from (TIOCSTI injects
	 * keystrokes into it; docs/security.md). */
	if (setsid() < 0)
		child_fail(a, "setsid");
	/* The group is known to the supervisor from here on, before the
	 * command can start anything in it: were the worker to die as
	 * clone() returns, before it could record the group itself, the
	 * command's parent-death signal would kill the command but not what
	 * the command had started (the worker shares this memory while it
	 * waits, and runs no other spawn meanwhile). */
	note_pgid(getpid(), 1);
	for (int i = 0; i < a->nlim; i++)
		if (setrlimit(a->lim[i].resource, &a->lim[i].rl) < 0)
			child_fail(a, a->lim[i].step);
	if (a->as) {
		const struct run_as *as = a->as;
		if (syscall(SYS_setgroups, (size_t)as->ngroups, as->groups) < 0)
			child_fail(a, "setgroups");
		if (syscall(SYS_setresgid, as->gid, as->gid, as->gid) < 0)
			child_fail(a, "setgid");
		if (as->uid != (uid_t)-1 &&
		    syscall(SYS_setresuid, as->uid, as->uid, as->uid) < 0)
			child_fail(a, "setuid");
	}
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		child_fail(a, "prctl");
	if (getppid() != a->parent)
		_exit(127); /* the worker is gone: nobody to run it for */
	for (int i = 0; i < 3; i++)
		if (dup2(a->fds[i], i) < 0)
			child_fail(a, "dup2");
	closefrom(3);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	execve(a->path, a->argv, a->env);
	child_fail(a, NULL);
}

/*
 * The handler's limits as setrlimit() arguments, for the child.  Soft and
 * hard are the same, so the command cannot raise them again; but cpu's hard
 * limit is a second later: at the soft one the kernel sends SIGXCPU, which
 * a command may catch to clean up, and at the hard one SIGKILL.
 */
static void
prepare_limits(struct spawn_args *a, const struct exec_limits *l)
{
	const struct {
		int resource;
		int64_t v;
		const char *step;
	} t[] = {
		{RLIMIT_CPU, l->cpu_ms / 1000, "limits.cpu: setrlimit"},
		{RLIMIT_AS, l->memory, "limits.memory: setrlimit"},
		{RLIMIT_NOFILE, l->open_files, "limits.open_files: setrlimit"},
		{RLIMIT_NPROC, l->processes, "limits.processes: setrlimit"},
		{RLIMIT_FSIZE, l->file_size, "limits.file_size: setrlimit"},
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		if (t[i].v <= 0)
			continue;
		a->lim[a->nlim].resource = t[i].resource;
		a->lim[a->nlim].rl.rlim_cur = (rlim_t)t[i].v;
		a->lim[a->nlim].rl.rlim_max =
			(rlim_t)t[i].v + (t[i].resource == RLIMIT_CPU);
		a->lim[a->nlim].step = t[i].step;
		a->nlim++;
	}
}

/*
 * Starts path with the child's pipes on 0, 1, 2, every other descriptor
 * closed, its own process group, default signal dispositions (the worker
 * ignores SIGPIPE; a child must not inherit that), an empty signal mask,
 * the handler's user and group, and SIGKILL as its parent-death signal:
 * if the worker dies, even by SIGKILL, the command dies with it.  Like
 * glibc's posix_spawn, which cannot set that signal, it is a clone() with
 * CLONE_VM | CLONE_VFORK (no copy of the worker's page tables, as a
 * fork() would make).  Returns 0, or an errno with *step naming the step
 * that failed (NULL: the execve).
 */
static int
spawn_child(const struct run_as *as, const struct exec_limits *limits,
	    const char *path, char *const *argv, char *const *env,
	    struct exec_child *c, const char **step)
{
	int p[3][2] = {{-1, -1}, {-1, -1}, {-1, -1}};
	struct spawn_args a = {
		.path = path,
		.argv = argv,
		.env = env,
		.parent = getpid(),
		.as = as && as->set ? as : NULL,
	};
	sigset_t all, old;
	int rc = 0;

	*step = NULL;
	c->pid = 0;
	if (limits)
		prepare_limits(&a, limits);
	for (int i = 0; i < 3 && rc == 0; i++)
		if (make_pipe(p[i]) < 0)
			rc = errno;
	a.fds[0] = p[0][0];
	a.fds[1] = p[1][1];
	a.fds[2] = p[2][1];
	if (rc == 0 && FAILPOINT(FP_EXEC_SPAWN))
		rc = EAGAIN;
	if (rc == 0) {
		sigfillset(&all);
		sigprocmask(SIG_SETMASK, &all, &old);
		c->pid = clone(child_main, spawn_stack + sizeof(spawn_stack),
			       CLONE_VM | CLONE_VFORK | SIGCHLD, &a);
		rc = c->pid < 0 ? errno : 0;
		sigprocmask(SIG_SETMASK, &old, NULL);
	}
	if (rc == 0 && a.err) {
		/* It exited before or at execve(): forget its group (if it got
		 * as far as recording it) and reap it. */
		rc = a.err;
		*step = a.step;
		note_pgid(c->pid, 0);
		while (waitpid(c->pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	if (rc == 0 && FAILPOINT(FP_EXEC_CRASH))
		kill(c->pid, SIGKILL);
	if (rc == 0 && FAILPOINT(FP_EXEC_WORKER_DIES)) {
		/* The command has had a second to start children of its own
		 * (which its parent-death signal does not reach). */
		struct timespec second = {.tv_sec = 1};
		while (nanosleep(&second, &second) < 0 && errno == EINTR)
			;
		raise(SIGKILL);
	}
	close_fd(&p[0][0]);
	close_fd(&p[1][1]);
	close_fd(&p[2][1]);
	c->in_fd = p[0][1];
	c->out_fd = p[1][0];
	c->err_fd = p[2][0];
	if (rc != 0) {
		c->pid = 0;
		close_fd(&c->in_fd);
		close_fd(&c->out_fd);
		close_fd(&c->err_fd);
		return rc;
	}
	fcntl(c->in_fd, F_SETFL, O_NONBLOCK);
	fcntl(c->out_fd, F_SETFL, O_NONBLOCK);
	fcntl(c->err_fd, F_SETFL, O_NONBLOCK);
	return 0;
}

static int
spawn(struct exec_run *x, const char *path, char *const *argv, char *const *env,
      const char **step)
{
	struct exec_child c;
	int rc = spawn_child(x->run_as, x->limits, path, argv, env, &c, step);

	x->pid = c.pid;
	x->in_fd = c.in_fd;
	x->out_fd = c.out_fd;
	x->err_fd = c.err_fd;
	return rc;
}

int
handler_exec_spawn(char *const *argv, char *const *env, const struct run_as *as,
		   const struct exec_limits *limits, struct exec_child *c,
		   char **err)
{
	const char *step = NULL;
	int rc = 0;
	char *path = handler_exec_resolve(argv[0], env, &rc);

	*c = (struct exec_child){0, -1, -1, -1};
	if (path)
		rc = spawn_child(as && as->set ? as : NULL, limits, path, argv,
				 env, c, &step);
	free(path);
	if (rc == 0)
		return 0;
	*err = xasprintf("could not start %s: %s%s%s", argv[0],
			 step ? step : "", step ? ": " : "", strerror(rc));
	return -1;
}

void
handler_exec_forget(pid_t pid)
{
	note_pgid(pid, 0);
}

/* Signals the child's process group, and the child in case it left it. */
static void
signal_all(struct exec_run *x, int sig)
{
	if (x->pid <= 0)
		return;
	kill(-x->pid, sig);
	kill(x->pid, sig);
}

/* True once the child has exited (it is not reaped). */
static bool
child_exited(struct exec_run *x)
{
	siginfo_t si = {0};

	if (waitid(P_PID, (id_t)x->pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0)
		return errno == ECHILD;
	return si.si_pid != 0;
}

static void
keep(struct exec_run *x, bool is_out, const char *p, size_t n)
{
	if (is_out) {
		size_t room = STDOUT_MAX - x->out.len;
		size_t k = n < room ? n : room;
		if (k)
			buf_append(&x->out, p, k);
		x->out_dropped += n - k;
		return;
	}
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
}

/*
 * Reads what *fd holds now, at most rounds chunks.  At EOF or on an error
 * the stream is closed.
 */
static void
drain(struct exec_run *x, int *fd, ev_io *w, int rounds)
{
	char chunk[READ_CHUNK];
	bool is_out = fd == &x->out_fd;

	while (*fd >= 0 && rounds-- > 0) {
		ssize_t n = read(*fd, chunk, sizeof(chunk));
		if (n > 0) {
			keep(x, is_out, chunk, (size_t)n);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		ev_io_stop(x->loop, w);
		close_fd(fd);
	}
}

static void
out_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct exec_run *x = w->data;
	drain(x, &x->out_fd, &x->out_w, READ_ROUNDS);
}

static void
err_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct exec_run *x = w->data;
	drain(x, &x->err_fd, &x->err_w, READ_ROUNDS);
}

static void
close_stdin(struct exec_run *x)
{
	ev_io_stop(x->loop, &x->in_w);
	close_fd(&x->in_fd);
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
	note_pgid(x->pid, 0);
	do
		r = wait4(x->pid, &status, 0, &ru);
	while (r < 0 && errno == EINTR);
	if (r < 0) {
		status = -1;
		memset(&ru, 0, sizeof(ru));
	}
	x->pid = 0;
	drain(x, &x->out_fd, &x->out_w, 4 * READ_ROUNDS);
	drain(x, &x->err_fd, &x->err_w, 4 * READ_ROUNDS);
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
		close_fd(&x->in_fd);
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
	char *path;
	const char *step = NULL;
	int rc = 0;

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
	path = handler_exec_resolve(spec->argv[0], spec->env, &rc);
	if (path)
		rc = spawn(x, path, spec->argv, spec->env, &step);
	free(path);
	if (rc != 0) {
		fail->outcome = OUTCOME_RETRY;
		fail->error = xasprintf("could not start %s: %s%s%s",
					spec->argv[0], step ? step : "",
					step ? ": " : "", strerror(rc));
		xlog(x, LOG_WARN, "%s", fail->error);
		free(x);
		return NULL;
	}
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
		note_pgid(x->pid, 0);
		while (waitpid(x->pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	close_fd(&x->pidfd);
	close_fd(&x->in_fd);
	close_fd(&x->out_fd);
	close_fd(&x->err_fd);
	buf_free(&x->out);
	free(x->why);
	free(x);
}
