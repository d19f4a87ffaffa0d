/*
 * handler_check: what config_load() cannot see in the file alone, checked
 * on this host as the handlers will meet it when they run, so that
 * `pgjobd --check-config` and a reload refuse a config that would only fail
 * job after job:
 *
 *   exec, tasks  the program exists and is executable, found as the exec
 *                handler finds it (handler_child_resolve(): the path as
 *                written, or the command's own PATH);
 *   plugin       the library loads, has the symbol, with this ABI version
 *                and a run function: tried in a forked child, so that no
 *                plugin code (a constructor, a crash) ever runs in the
 *                calling process, the supervisor; the child reports
 *                dlerror()'s text through a pipe, bounded;
 *   http         libcurl parses the url and finds a host in it.
 *
 * A plugin's init is not called: it may reach out (a connection, a file),
 * which is the worker's business when it starts.
 */
#include "handlers/handler_check.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pgjobd/plugin.h"

#include "common/config.h"
#include "common/text.h"
#include "common/util.h"
#include "handlers/handler_child.h"
#include "handlers/handler_http.h"
#include "handlers/handler_plugin.h"

/* The most of a child's report that is read; dlerror() text is short. */
#define REPORT_MAX 1024
/* A library whose constructors take longer than this to load is killed. */
#define LOAD_SECONDS 10
/* The longest the report is waited for. */
#define REPORT_SECONDS (LOAD_SECONDS + 2)

/* Adds "file:line:col: section.name.key: " + the safe form of msg. */
static void
add(struct config_errors *errs, const struct config *c, const char *section,
    const char *name, const char *key, struct config_at at, const char *msg)
{
	struct buf b = {0};

	text_safe_append(&b, msg, NULL, NULL);
	config_errors_add(errs, "%s:%d:%d: %s.%s.%s: %s", c->path, at.line,
			  at.column, section, name, key, b.data ? b.data : "");
	buf_free(&b);
}

static void
check_program(struct config_errors *errs, const struct config *c,
	      const char *section, const char *name, const struct strlist *argv,
	      const struct strlist *env, struct config_at at)
{
	static char *const none[] = {NULL};
	struct stat st;
	int err = 0;
	char *path, *msg;

	if (argv->n == 0)
		return;
	path = handler_child_resolve(argv->v[0], env->v ? env->v : none, &err);
	/* Found: what resolve set err to while it looked counts no more. */
	if (path)
		err = 0;
	/* A path as written is not looked at by resolve: exec will. */
	if (path && stat(path, &st) < 0)
		err = errno;
	else if (path && !S_ISREG(st.st_mode))
		err = EISDIR;
	else if (path && access(path, X_OK) < 0)
		err = errno;
	if (path && !err) {
		free(path);
		return;
	}
	if (err == EACCES)
		msg = xasprintf("\"%s\": not executable", argv->v[0]);
	else if (!strchr(argv->v[0], '/'))
		msg = xasprintf("\"%s\": not found in PATH", argv->v[0]);
	else if (err == EISDIR)
		msg = xasprintf("\"%s\": not a file", argv->v[0]);
	else
		msg = xasprintf("\"%s\": %s", argv->v[0], strerror(err));
	add(errs, c, section, name, "command[0]", at, msg);
	free(msg);
	free(path);
}

/*
 * In the child: loads the plugin and writes what is wrong to fd, as one
 * letter for the key at fault (L library, S symbol) and the message; writes
 * nothing when it is usable.  Never returns.
 */
static void __attribute__((noreturn))
probe(const char *path, const char *sym, int fd)
{
	const struct pgjobd_plugin *p;
	void *dl;
	char out[REPORT_MAX];
	int n = 0;

	sigset_t alrm;

	sigemptyset(&alrm);
	sigaddset(&alrm, SIGALRM);
	sigprocmask(SIG_UNBLOCK, &alrm, NULL);
	signal(SIGALRM, SIG_DFL);
	alarm(LOAD_SECONDS);
	dlerror();
	if (!(dl = dlopen(path, RTLD_NOW | RTLD_LOCAL)))
		n = snprintf(out, sizeof(out), "Lcannot load: %s", dlerror());
	else if (!(p = dlsym(dl, sym)))
		n = snprintf(out, sizeof(out), "Sno symbol \"%s\" in %s", sym,
			     path);
	else if (p->abi_version < PGJOBD_PLUGIN_ABI_MIN ||
		 p->abi_version > PGJOBD_PLUGIN_ABI)
		n = snprintf(
			out, sizeof(out),
			"Splugin ABI version %u, this pgjobd takes %d to %d "
			"(library %s)",
			(unsigned)p->abi_version, PGJOBD_PLUGIN_ABI_MIN,
			PGJOBD_PLUGIN_ABI, path);
	else if (!p->run)
		n = snprintf(out, sizeof(out), "S\"%s\" has no run function",
			     sym);
	if (n > 0 && write(fd, out, strnlen(out, sizeof(out))) < 0)
		_exit(1);
	_exit(0);
}

/*
 * Reads the child's report into buf (at most len - 1 bytes, NUL ended),
 * until end of file or, should something the library started keep the
 * pipe open, REPORT_SECONDS.  Returns 0, or -1 when the time ran out.
 */
static int
read_report(int fd, char *buf, size_t len)
{
	int64_t end = util_now_ms() + REPORT_SECONDS * 1000;
	struct pollfd p = {.fd = fd, .events = POLLIN};
	size_t got = 0;
	ssize_t n;

	int rc = 0;

	while (got < len - 1) {
		int64_t left = end - util_now_ms();
		int r = left > 0 ? poll(&p, 1, (int)left) : 0;
		if (r < 0 && errno == EINTR)
			continue; /* a SIGCHLD: the pipe may still be empty */
		if (r == 0) {
			rc = -1;
			break;
		}
		n = read(fd, buf + got, len - 1 - got);
		if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
			break;
		if (n > 0)
			got += (size_t)n;
	}
	buf[got] = '\0';
	return rc;
}

static void
check_plugin(struct config_errors *errs, const struct config *c,
	     const struct handler_conf *h)
{
	char report[REPORT_MAX + 1] = "", *path, *msg = NULL;
	int fds[2], status = 0;
	pid_t pid;

	if (!h->library || !h->symbol)
		return;
	path = handler_plugin_path(h->library);
	if (pipe2(fds, O_CLOEXEC) < 0) {
		msg = xasprintf("cannot check it: %s", strerror(errno));
		add(errs, c, "handlers", h->kind, "library", h->at_library,
		    msg);
		goto out;
	}
	if ((pid = fork()) < 0) {
		msg = xasprintf("cannot check it: %s", strerror(errno));
		add(errs, c, "handlers", h->kind, "library", h->at_library,
		    msg);
		close(fds[0]);
		close(fds[1]);
		goto out;
	}
	if (pid == 0) {
		close(fds[0]);
		probe(path, h->symbol, fds[1]);
	}
	close(fds[1]);
	int late = read_report(fds[0], report, sizeof(report)) < 0;
	if (late)
		kill(pid, SIGKILL);
	close(fds[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (report[0] == 'L' || report[0] == 'S')
		add(errs, c, "handlers", h->kind,
		    report[0] == 'L' ? "library" : "symbol",
		    report[0] == 'L' ? h->at_library : h->at_symbol,
		    report + 1);
	else if (late || (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)) {
		msg = xasprintf("loading %s did not end within %ds", path,
				late ? REPORT_SECONDS : LOAD_SECONDS);
		add(errs, c, "handlers", h->kind, "library", h->at_library,
		    msg);
	} else if (WIFSIGNALED(status) || WEXITSTATUS(status) != 0) {
		msg = WIFSIGNALED(status)
			      ? xasprintf("loading %s killed the checking "
					  "process (signal %d)",
					  path, WTERMSIG(status))
			      : xasprintf("loading %s: the checking process "
					  "exited %d",
					  path, WEXITSTATUS(status));
		add(errs, c, "handlers", h->kind, "library", h->at_library,
		    msg);
	}
out:
	free(msg);
	free(path);
}

size_t
handler_check_config(const struct config *c, struct config_errors *errs)
{
	static const struct strlist noenv = {NULL, 0};
	size_t before = errs->n;
	const char *why;

	for (size_t i = 0; i < c->nhandlers; i++) {
		const struct handler_conf *h = &c->handlers[i];

		if (h->type == HANDLER_EXEC || h->type == HANDLER_PROCESS)
			check_program(errs, c, "handlers", h->kind, &h->command,
				      &h->env, h->at_program);
		else if (h->type == HANDLER_PLUGIN)
			check_plugin(errs, c, h);
		else if (h->type == HANDLER_HTTP && h->url &&
			 (why = handler_http_check_url(h->url)))
			add(errs, c, "handlers", h->kind, "url", h->at_url,
			    why);
	}
	for (size_t i = 0; i < c->ntasks; i++)
		check_program(errs, c, "tasks", c->tasks[i].name,
			      &c->tasks[i].command, &noenv,
			      c->tasks[i].at_program);
	return errs->n - before;
}
