/*
 * What the files of the web console's API share (api.c: dispatch, the
 * overview, queues, schedules, tasks and workflows; api_jobs.c: jobs, one
 * job, and the actions on jobs).  Not for web.c: api.h is its interface.
 */
#ifndef PGJOBD_WEB_API_INTERNAL_H
#define PGJOBD_WEB_API_INTERNAL_H

#include <cjson/cJSON.h>

#include "db/db.h"
#include "web/api.h"

/* Payloads and results above this many bytes are cut in job/ID (the
 * download endpoints send them whole). */
#define API_DOC_MAX 65536

/*
 * Runs sql.  Returns the rows (caller frees), or NULL after filling out
 * with the error: 400 for input the database refused (a bad time, an
 * unknown queue), 409 for a state that forbids it, 503 when the
 * connection is gone or the statement ran out of time, 500 otherwise.
 */
struct db_rows *api_query(struct db_conn *db, struct web_response *out,
			  const char *sql, int n, const char *const *p);
/* Like api_query() but a missing relation or function (42P01, 42883: a
 * schema before the migration that adds it) gives an empty result with
 * *missing = 1 instead of an error. */
struct db_rows *api_query_optional(struct db_conn *db, struct web_response *out,
				   const char *sql, int n, const char *const *p,
				   int *missing);
/* Every row of res as an object of its columns, in a new array. */
cJSON *api_rows_array(const struct db_rows *res);
/*
 * A positive integer id from s into buf (canonical text); 0, or -1 when s
 * is not one.
 */
int api_parse_id(const char *s, char *buf, size_t len);

/* The endpoints of api_jobs.c; each returns 0 with out filled. */
void api_jobs_list(struct db_conn *db, const struct web_query *q,
		   struct web_response *out);
void api_jobs_count(struct db_conn *db, const struct web_query *q,
		    struct web_response *out);
/* job/ID, job/ID/payload, job/ID/result: rest is what follows "job/". */
void api_job_get(struct db_conn *db, const char *rest,
		 struct web_response *out);
/* jobs/retry, jobs/cancel, jobs/delete: action is "retry" ... */
void api_jobs_act(struct db_conn *db, const char *action, const cJSON *body,
		  struct web_response *out);

#endif
