/*
 * supervisor: the parent process.  It has no database connection; it forks
 * the workers, reaps and restarts them with backoff, forwards stop signals
 * and rolls the workers over to a new config on SIGHUP.
 */
#ifndef PGJOBD_SUPERVISOR_H
#define PGJOBD_SUPERVISOR_H

struct config;

/*
 * Runs until stopped.  cfg is taken over (freed on exit or replaced on
 * reload).  workers > 0 overrides cfg->workers, and database (when not
 * NULL) database.conninfo, across reloads too.
 * Returns the exit code: 0 after a clean stop, EXIT_CONFIG when a worker
 * exited with it.
 */
int supervisor_run(const char *config_path, struct config *cfg, int workers,
		   const char *database);

#endif
