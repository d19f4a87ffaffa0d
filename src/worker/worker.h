/*
 * worker: one worker process.  It holds its own libpq connection (made after
 * the fork), a slot, and one libev loop that listens for new work, claims
 * jobs up to its free capacity, runs their handlers, renews their leases and
 * writes their ends in batches.
 */
#ifndef PGJOBD_WORKER_H
#define PGJOBD_WORKER_H

#include <signal.h>

struct config;
struct stats;

/*
 * The signals a worker watches (a stop: SIGTERM, SIGINT; a retire:
 * SIGUSR2).  The supervisor forks a worker with them blocked, and
 * worker_main() unblocks them once its loop watches them, so that one sent
 * in between waits for the worker instead of reaching the handlers it
 * inherited from the supervisor.
 */
void worker_signals(sigset_t *set);

/*
 * Runs the worker until it is told to stop.  parent_fd is the read end of a
 * pipe whose write end only the supervisor holds: its EOF means the
 * supervisor is gone.  Returns the process exit code: 0 after a clean stop,
 * EXIT_TEMPFAIL (75) when no slot is free, EXIT_CONFIG (78) when the schema
 * or config cannot work.  stats is the area shared with the supervisor
 * (may be NULL) and index this worker's entry in it; number is its number
 * in its instance (worker=N in log lines, the supervisor's and its own).
 */
int worker_main(const struct config *cfg, int parent_fd, int supervisor_pid,
		struct stats *stats, int index, int number);

#endif
