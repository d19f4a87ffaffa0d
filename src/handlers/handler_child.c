/*
 * handler_child: a handler's child process, an exec handler's command or a
 * process handler's copy (see the header): its start, the record of its
 * process group for the supervisor, its exit, and its pipes read in
 * bounded pieces.
 */
#include "handlers/handler_child.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
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

#include <ev.h>

#include "common/config.h"
#include "common/failpoint.h"
#include "common/util.h"

#define READ_CHUNK 65536

char *
handler_child_resolve(const char *argv0, char *const *env, int *err)
{
	const char *path = HANDLER_CHILD_PATH;

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

void
handler_child_close(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/*
 * The process groups of this worker's running commands, in memory the
 * supervisor shares (handler_child_set_pgid_table()): when the worker dies
 * without stopping them, the supervisor kills them.  A command's child
 * records its own group, before its execve() (see child_main()); the worker
 * forgets it once the command is reaped.
 */
static int32_t *pgids;
static int npgids;

void
handler_child_set_pgid_table(int32_t *table, int n)
{
	pgids = table;
	npgids = n;
}

/* Records (or forgets, with on = 0) pid as a running group.  Called in the
 * child of spawn_child() too: plain stores, no lock, nothing instrumented. */
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
 * What the child of spawn_child() needs, all prepared by the parent: the child
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
	    struct handler_child *c, const char **step)
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
	handler_child_close(&p[0][0]);
	handler_child_close(&p[1][1]);
	handler_child_close(&p[2][1]);
	c->in_fd = p[0][1];
	c->out_fd = p[1][0];
	c->err_fd = p[2][0];
	if (rc != 0) {
		c->pid = 0;
		handler_child_close(&c->in_fd);
		handler_child_close(&c->out_fd);
		handler_child_close(&c->err_fd);
		return rc;
	}
	fcntl(c->in_fd, F_SETFL, O_NONBLOCK);
	fcntl(c->out_fd, F_SETFL, O_NONBLOCK);
	fcntl(c->err_fd, F_SETFL, O_NONBLOCK);
	return 0;
}

int
handler_child_start(char *const *argv, char *const *env,
		    const struct run_as *as, const struct exec_limits *limits,
		    struct handler_child *c, char **err)
{
	const char *step = NULL;
	int rc = 0;
	char *path = handler_child_resolve(argv[0], env, &rc);

	*c = (struct handler_child){0, -1, -1, -1};
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
handler_child_forget(pid_t pid)
{
	note_pgid(pid, 0);
}

void
handler_child_signal(pid_t pid, int sig)
{
	if (pid <= 0)
		return;
	kill(-pid, sig);
	kill(pid, sig);
}

bool
handler_child_exited(pid_t pid)
{
	siginfo_t si = {0};

	if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0)
		return errno == ECHILD;
	return si.si_pid != 0;
}

bool
handler_child_read(struct ev_loop *loop, int *fd, ev_io *w, int rounds,
		   handler_child_take_fn *take, void *arg)
{
	char chunk[READ_CHUNK];

	while (*fd >= 0 && rounds-- > 0) {
		ssize_t n = read(*fd, chunk, sizeof(chunk));
		if (n > 0) {
			if (!take(arg, chunk, (size_t)n))
				return false;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return false;
		ev_io_stop(loop, w);
		handler_child_close(fd);
		return true;
	}
	return false;
}
