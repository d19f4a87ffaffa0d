/*
 * jobctl: the statements by which an operator steers queues by hand,
 * shared by pgjob's commands (src/cli/cli_pause.c, cli_limits.c) and the
 * web console (src/web/api.c), so that a pause from a browser is the pause
 * of `pgjob pause`, word for word.  The actions on jobs (retry, cancel,
 * delete) are functions of the schema, which both call:
 * sql/upgrade/033_job_actions.sql.
 */
#ifndef PGJOBD_JOBCTL_H
#define PGJOBD_JOBCTL_H

/* pgjob.pause() / pgjob.resume(): queue $1, kind $2 (null: all). */
extern const char jobctl_pause_sql[];
extern const char jobctl_resume_sql[];
/* pgjob.set_limits(): queue $1, limits $2 (a JSON object). */
extern const char jobctl_set_limits_sql[];
/* pgjob.reset_limits(): queue $1. */
extern const char jobctl_reset_limits_sql[];

#endif
