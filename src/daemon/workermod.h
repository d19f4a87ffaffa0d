/*
 * workermod: the daemon's worker code, loaded after the fork.
 *
 * The supervisor never talks to the database, yet linking libpq would map
 * libpq and the dozen libraries it pulls in (OpenSSL, Kerberos, LDAP,
 * SASL, GnuTLS...) into it: more than half of its resident set (issue 6:
 * the supervisor stays under 4 MiB).  So the code that needs libpq, the
 * worker and everything it runs (src/worker.c, dbev, queue, lease, duty,
 * migrate, the handlers), is built as the module pgjobd_worker.so, which
 * each worker dlopen()s right after the fork.  The module links libpq and
 * takes everything else (config, log, stats, util...) from the pgjobd
 * executable, which exports its symbols; pgjob and the tests link the same
 * code statically.
 *
 * The module is looked for where `cmake --install` puts it, relative to
 * the executable (PGJOBD_WORKER_RELDIR, e.g. ../lib/pgjobd), so that an
 * installed tree works under any prefix or DESTDIR, then beside the
 * executable (the build tree).
 */
#ifndef PGJOBD_WORKERMOD_H
#define PGJOBD_WORKERMOD_H

struct config;
struct stats;

/*
 * In a new worker process: loads the module and runs worker_main() (see
 * worker.h) with these arguments; returns its exit code, or EXIT_CONFIG
 * (logged) when the module cannot be loaded.
 */
int workermod_run(const struct config *cfg, int parent_fd, int supervisor_pid,
		  struct stats *stats, int index);

#endif
