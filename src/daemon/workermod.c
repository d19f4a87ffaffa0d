/*
 * workermod: loads pgjobd_worker.so in a worker, and checks conninfos in a
 * child that loads it, so that the supervisor never maps libpq (see
 * workermod.h).
 */
#include "daemon/workermod.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/config.h"
#include "db/db.h"
#include "common/log.h"
#include "common/util.h"
#include "worker/worker.h"

#define MODULE "pgjobd_worker.so"

#ifndef PGJOBD_WORKER_RELDIR
#define PGJOBD_WORKER_RELDIR "../lib/pgjobd"
#endif

/*
 * dlopen(path).  libpq pulls in GnuTLS (through OpenLDAP), whose library
 * constructor initialises it on load: some 0.8 MiB of a worker's resident
 * set, for TLS that libpq does with OpenSSL.  GNUTLS_NO_IMPLICIT_INIT=1
 * (GnuTLS's documented switch) skips that; whoever uses GnuTLS calls
 * gnutls_global_init() first anyway, as libldap does.  The variable is
 * set for the load only, so that exec handlers do not inherit it.
 */
static void *
module_dlopen(const char *path)
{
	static const char gnutls_var[] = "GNUTLS_NO_IMPLICIT_INIT";
	int set = !getenv(gnutls_var) && setenv(gnutls_var, "1", 0) == 0;

	dlerror();
	void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (set)
		unsetenv(gnutls_var);
	return dl;
}

/*
 * Opens the module, or returns NULL with why set to a message (static
 * storage).  Tries the install location relative to the executable, then
 * the executable's own directory.
 */
static void *
module_open(const char **why)
{
	static char msg[3 * PATH_MAX];
	char exe[PATH_MAX], path[2 * PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n <= 0) {
		snprintf(msg, sizeof(msg), "cannot find %s: /proc/self/exe: %s",
			 MODULE, strerror(errno));
		*why = msg;
		return NULL;
	}
	exe[n] = '\0';
	char *slash = strrchr(exe, '/');
	if (slash)
		*slash = '\0';
	const char *dirs[] = {PGJOBD_WORKER_RELDIR, "."};
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s/%s", exe, dirs[i], MODULE);
		if (access(path, F_OK) < 0)
			continue;
		void *dl = module_dlopen(path);
		if (!dl) {
			snprintf(msg, sizeof(msg), "cannot load %s", dlerror());
			*why = msg;
			return NULL;
		}
		const char *v = dlsym(dl, "worker_module_version");
		if (!v || strcmp(v, PGJOBD_VERSION) != 0) {
			snprintf(msg, sizeof(msg),
				 "%s is from pgjobd %s, not %s: reinstall "
				 "pgjobd",
				 path, v ? v : "(unknown)", PGJOBD_VERSION);
			dlclose(dl);
			*why = msg;
			return NULL;
		}
		return dl;
	}
	snprintf(msg, sizeof(msg), "cannot find %s in %s/%s nor beside %s/",
		 MODULE, exe, PGJOBD_WORKER_RELDIR, exe);
	*why = msg;
	return NULL;
}

/* The module's function named name, or NULL with why set. */
static void *
module_sym(const char *name, const char **why)
{
	void *dl = module_open(why);
	void *f = dl ? dlsym(dl, name) : NULL;

	if (dl && !f)
		*why = "the worker module is incomplete: reinstall pgjobd";
	return f;
}

int
workermod_run(const struct config *cfg, int parent_fd, int supervisor_pid,
	      struct stats *stats, int index)
{
	const char *why = NULL;
	__typeof__(worker_main) *run =
		(__typeof__(worker_main) *)module_sym("worker_main", &why);

	if (!run) {
		log_error("worker: %s", why);
		return EXIT_CONFIG;
	}
	return run(cfg, parent_fd, supervisor_pid, stats, index);
}

/*
 * The daemon's config_conninfo_valid() (config.h).  A conninfo is valid
 * when libpq can parse it, and only libpq knows its keywords; the check
 * runs in a child that loads the worker module (and so libpq) and exits
 * 0 (valid), 1 (not) or 2 (no module), which leaves the supervisor's
 * address space as it was.  libpq cannot be dlclose()d (OpenSSL stays
 * loaded for good), so it could not simply be loaded here and unloaded.
 * A config is loaded at start and on SIGHUP only, so the fork is cheap.
 */
int
config_conninfo_valid(const char *conninfo)
{
	if (!conninfo || !*conninfo)
		return 1;
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		log_error("checking database.conninfo: fork: %s",
			  strerror(errno));
		return -1;
	}
	if (pid == 0) {
		const char *why = NULL;
		__typeof__(db_conninfo_valid) *valid =
			(__typeof__(db_conninfo_valid) *)module_sym(
				"db_conninfo_valid", &why);
		if (!valid) {
			log_error("checking database.conninfo: %s", why);
			_exit(2);
		}
		_exit(valid(conninfo) ? 0 : 1);
	}
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR) {
			log_error("checking database.conninfo: waitpid: %s",
				  strerror(errno));
			return -1;
		}
	if (WIFEXITED(status) && WEXITSTATUS(status) <= 1)
		return WEXITSTATUS(status) == 0;
	if (WIFSIGNALED(status))
		log_error("checking database.conninfo: the check was killed "
			  "by signal %d",
			  WTERMSIG(status));
	return -1;
}
