/*
 * jobctl: the statements by which an operator moves jobs and queues by
 * hand, shared by pgjob's commands (src/cli/cli_state.c, cli_pause.c,
 * cli_limits.c) and the web console (src/web/api.c), so that a retry from
 * a browser is the retry of `pgjob retry`, word for word.
 *
 * The job statements take their jobs as $1, a bigint[] in text form
 * ("{4,5}"): one job for the CLI, a batch for the console.  Each runs in
 * the caller's transaction.  They never touch lease_token or last_error
 * (docs/daemon.md, "Leases"; the error is the operator's evidence).
 */
#ifndef PGJOBD_JOBCTL_H
#define PGJOBD_JOBCTL_H

/*
 * Locks the jobs of $1 that a retry may take, of the states $2 (a text[]:
 * the CLI's are dead and cancelled, and available when failed and waiting
 * for their next attempt, attempts > 0 or an error; the console adds
 * done), except where a job outside $1 holds their unique_key; of several
 * with one key, the newest.  Returns one row: the ids as a bigint[] (text
 * form) for jobctl_retry_sql.
 */
extern const char jobctl_retry_pick_sql[];
/*
 * The jobs of $1 kept in pgjob.jobs_done (a plain job done:
 * sql/019_jobs_done.sql) back in pgjob.jobs, as they are, done: what a
 * retry of a done job runs first, in its transaction
 * (pgjob.restore_done()).  Returns how many moved.
 */
extern const char jobctl_restore_done_sql[];
/*
 * The jobs of $1 run again, attempts 0 (the caller has decided that they
 * may: jobctl_retry_pick_sql, or the CLI's checks of one job).  A job that
 * was cancelled while it waited for its parents goes back to waiting for
 * those whose end it has not counted, or is released with their results
 * when none is left (cli_state.c says more).  Returns (state, id) per job.
 * The caller notifies channel pgjob in the same transaction.
 */
extern const char jobctl_retry_sql[];
/* The jobs of $1 in a state of $2 (a text[]: the CLI's are waiting,
 * available and running; the console's waiting and available) ->
 * cancelled; a running job's worker stops it at its next lease renewal.
 * Returns no rows. */
extern const char jobctl_cancel_sql[];
/* pgjob.pause() / pgjob.resume(): queue $1, kind $2 (null: all). */
extern const char jobctl_pause_sql[];
extern const char jobctl_resume_sql[];
/* pgjob.set_limits(): queue $1, limits $2 (a JSON object). */
extern const char jobctl_set_limits_sql[];
/* pgjob.reset_limits(): queue $1. */
extern const char jobctl_reset_limits_sql[];

#endif
