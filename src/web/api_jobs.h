/*
 * api_jobs: the console's jobs, one job, and the actions on jobs (the
 * paths are in docs/console.md, "The API"); api.c routes to them.  Each
 * fills out.
 */
#ifndef PGJOBD_WEB_API_JOBS_H
#define PGJOBD_WEB_API_JOBS_H

#include <cjson/cJSON.h>

#include "db/db.h"
#include "web/api.h"

/* jobs, jobs/count (api_count.c): the filter in q (rest unused). */
void api_jobs_list(struct db_conn *db, const char *rest,
		   const struct web_query *q, struct web_response *out);
void api_jobs_count(struct db_conn *db, const char *rest,
		    const struct web_query *q, struct web_response *out);
/* job/ID, job/ID/payload, job/ID/result: rest is what follows "job/". */
void api_job_get(struct db_conn *db, const char *rest,
		 const struct web_query *q, struct web_response *out);
/* jobs/retry, jobs/cancel, jobs/delete: action is "retry" ... */
void api_jobs_act(struct db_conn *db, const cJSON *body, const char *action,
		  struct web_response *out);

#endif
