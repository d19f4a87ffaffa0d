/*
 * api_response: what the files of the console's API (api.c: routing, the
 * overview, queues, schedules, tasks and workflows; api_jobs.c: jobs, one
 * job, and the actions on jobs) answer with.  Not for web.c: api.h is its
 * interface.
 */
#ifndef PGJOBD_WEB_API_RESPONSE_H
#define PGJOBD_WEB_API_RESPONSE_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "db/db.h"
#include "web/api.h"

/* out = status with {"error": msg} (msg escaped as JSON). */
void web_response_error(struct web_response *out, int status, const char *msg);
/* out = 200 with item printed (item freed). */
void web_response_json(struct web_response *out, cJSON *item);

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
/* out = the error text of a failed statement (SQLSTATE first) as the page
 * shows it: the message without its SQLSTATE and the schema's "pgjob: "
 * prefix, then the hint, if any, with api_query()'s status. */
void api_fail(struct db_conn *db, struct web_response *out, const char *text);
/* The rows the plan of sql, an EXPLAIN (FORMAT JSON), expects (the
 * planner's estimate); -1 when its plan cannot be read, -2 after filling
 * out with the error. */
double api_plan_rows(struct db_conn *db, struct web_response *out,
		     const char *sql, int n, const char *const *p);
/* Every row of res as an object of its columns, in a new array. */
cJSON *api_rows_array(const struct db_rows *res);
/*
 * A positive integer id from s into buf (canonical text); 0, or -1 when s
 * is not one.
 */
int api_parse_id(const char *s, char *buf, size_t len);

#endif
