/*
 * api_response: the answers of the console's API (api.h), shared by api.c
 * and api_jobs.c: JSON bodies, a statement's error as the page shows it
 * with its HTTP status, result rows as JSON, and ids from a path.
 */
#include "web/api_response.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "db/rowjson.h"
#include "db/sqlstate.h"

void
web_response_error(struct web_response *out, int status, const char *msg)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddItemToObject(o, "error", rowjson_string(msg));
	web_response_json(out, o);
	out->status = status;
}

void
web_response_json(struct web_response *out, cJSON *item)
{
	char *text = cJSON_PrintUnformatted(item);
	cJSON_Delete(item);
	if (!text)
		abort(); /* out of memory, as in xmalloc() */
	free(out->body);
	out->body = xstrdup(text);
	cJSON_free(text);
	out->len = strlen(out->body);
	out->status = 200;
	out->content_type = "application/json";
	out->content_disposition = NULL;
}

/*
 * The HTTP status for a failed statement, from its SQLSTATE (the first
 * five characters of text): what the request asked for is wrong (22: bad
 * data, such as a time that does not parse or a limit of the wrong type),
 * names nothing (42704: no such queue or schedule, 404), forbidden in the state
 * things are in (55000, 23: a constraint), not granted to the console's role
 * (42501, 403: docs/security.md gives the grants), or the database failed
 * (57014: statement_timeout).
 */
static int
status_of(struct db_conn *db, const char *text)
{
	if (!db_connected(db))
		return 503;
	if (sqlstate_is(text, SQLSTATE_CLASS_DATA))
		return 400;
	if (sqlstate_is(text, SQLSTATE_UNDEFINED_OBJECT))
		return 404;
	if (sqlstate_is(text, SQLSTATE_INSUFFICIENT_PRIVILEGE))
		return 403;
	if (sqlstate_is(text, SQLSTATE_CLASS_INTEGRITY) ||
	    sqlstate_is(text, SQLSTATE_NOT_IN_PREREQUISITE_STATE) ||
	    sqlstate_is(text, SQLSTATE_LOCK_NOT_AVAILABLE))
		return 409;
	if (sqlstate_is(text, SQLSTATE_QUERY_CANCELED))
		return 503;
	return 500;
}

void
api_fail(struct db_conn *db, struct web_response *out, const char *text)
{
	const char *msg = text;
	const char *sep = strstr(text, ": ");
	if (sep && sep - text == 5)
		msg = sep + 2;
	if (strncmp(msg, "pgjob: ", 7) == 0)
		msg += 7;
	const char *hint = db_connected(db) ? db_error_hint(db) : NULL;
	cJSON *o = cJSON_CreateObject();
	cJSON_AddItemToObject(o, "error", rowjson_string(msg));
	if (hint)
		cJSON_AddItemToObject(o, "hint", rowjson_string(hint));
	int status = status_of(db, text);
	web_response_json(out, o);
	out->status = status;
}

struct db_rows *
api_query(struct db_conn *db, struct web_response *out, const char *sql, int n,
	  const char *const *p)
{
	char *err;
	struct db_rows *res = db_query(db, sql, n, p, &err);
	if (res)
		return res;
	api_fail(db, out, err);
	free(err);
	return NULL;
}

struct db_rows *
api_query_optional(struct db_conn *db, struct web_response *out,
		   const char *sql, int n, const char *const *p, int *missing)
{
	char *err;
	*missing = 0;
	struct db_rows *res = db_query(db, sql, n, p, &err);
	if (res)
		return res;
	if (sqlstate_is(err, SQLSTATE_UNDEFINED_TABLE) ||
	    sqlstate_is(err, SQLSTATE_UNDEFINED_FUNCTION)) {
		free(err);
		*missing = 1;
		return api_query(db, out, "select where false", 0, NULL);
	}
	api_fail(db, out, err);
	free(err);
	return NULL;
}

double
api_plan_rows(struct db_conn *db, struct web_response *out, const char *sql,
	      int np, const char *const *p)
{
	struct db_rows *res = api_query(db, out, sql, np, p);
	if (!res)
		return -2;
	cJSON *plan = cJSON_Parse(db_rows_text(res, 0, 0));
	db_rows_free(res);
	const cJSON *rows = cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(plan, 0),
						 "Plan"),
		"Plan Rows");
	double n = cJSON_IsNumber(rows) ? rows->valuedouble : -1;
	cJSON_Delete(plan);
	return n;
}

cJSON *
api_rows_array(const struct db_rows *res)
{
	cJSON *a = cJSON_CreateArray();
	for (int r = 0; r < db_rows_count(res); r++) {
		cJSON *o = cJSON_CreateObject();
		rowjson_add_columns(o, res, r, 0, db_rows_columns(res));
		cJSON_AddItemToArray(a, o);
	}
	return a;
}

int
api_parse_id(const char *s, char *buf, size_t len)
{
	char *end;
	if (!s || *s < '1' || *s > '9' || strlen(s) > 18)
		return -1;
	long long v = strtoll(s, &end, 10);
	if (*end || v <= 0)
		return -1;
	snprintf(buf, len, "%lld", v);
	return 0;
}
