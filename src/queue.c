/*
 * queue: the claim, finish and renew statements.
 *
 * The claim takes, per queue, up to that queue's free capacity: first jobs
 * whose lease expired (their worker died), then due jobs by priority, run_at
 * and id.  It is one UPDATE ... FROM (SELECT ... FOR UPDATE SKIP LOCKED),
 * so it commits at once and concurrent claimers skip each other's rows.
 */
#include "queue.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "db.h"
#include "failpoint.h"
#include "handler.h"
#include "util.h"

/*
 * Per queue (q.name, up to q.lim jobs, in mode q.mode): jobs whose lease
 * expired; then by mode, due jobs by priority, run_at, id (parallel); the
 * head of the queue, its lowest unfinished id, if it is due (serial); the
 * head of each ordering_key, if due (per_key; jobs without a key are
 * independent).  A serial or per_key head that waits for a retry holds back
 * the jobs behind it.  SKIP LOCKED on the head itself never moves a claimer
 * on to the next job: it finds nothing, as it should.
 */
static const char claim_sql[] =
	"with q(name, lim, mode) as ("
	"  select * from unnest($2::text[], $3::int[], $6::text[])),"
	" cand as ("
	"  select c.id from q cross join lateral ("
	"   select e.id from (select j.id from pgjob.jobs j"
	"     where j.state = 'running' and j.locked_until < now()"
	"       and j.queue = q.name and j.kind = any($1::text[])"
	"     limit q.lim for update skip locked) e"
	"   union all"
	"   select a.id from (select j.id from pgjob.jobs j"
	"     where q.mode = 'parallel' and j.state = 'available'"
	"       and j.queue = q.name and j.run_at <= now()"
	"       and j.kind = any($1::text[])"
	"     order by j.priority, j.run_at, j.id"
	"     limit q.lim for update skip locked) a"
	"   union all"
	"   select s.id from (select j.id from pgjob.jobs j"
	"     where q.mode = 'serial' and j.id = (select min(h.id)"
	"       from pgjob.jobs h where h.queue = q.name"
	"        and h.state in ('available', 'running'))"
	"       and j.state = 'available' and j.run_at <= now()"
	"       and j.kind = any($1::text[])"
	"     for update skip locked) s"
	"   union all"
	"   select k.id from (select j.id from pgjob.jobs j"
	"     where q.mode = 'per_key' and j.state = 'available'"
	"       and j.queue = q.name and j.run_at <= now()"
	"       and j.kind = any($1::text[])"
	"       and (j.ordering_key is null or not exists ("
	"        select 1 from pgjob.jobs o where o.queue = q.name"
	"         and o.ordering_key = j.ordering_key and o.id < j.id"
	"         and o.state in ('available', 'running')))"
	"     order by j.priority, j.run_at, j.id"
	"     limit q.lim for update skip locked) k"
	"   limit q.lim) c)"
	" update pgjob.jobs j set state = 'running', locked_by = $4,"
	"  locked_until = now() + $5::bigint * interval '1 millisecond',"
	"  lease_token = j.lease_token + 1, attempts = j.attempts + 1"
	/* An array, so that the planner looks the rows up by id rather
	 * than joining the whole table. */
	" where j.id = any(array(select id from cand))"
	" returning j.id, j.kind, j.queue, j.payload, j.attempts,"
	"  coalesce(j.max_attempts, 0), j.lease_token, j.ordering_key";

int
queue_claim(struct dbev *d, const struct queue_claim_req *req,
	    dbev_result_fn cb, void *arg)
{
	int64_t *lim = xcalloc(req->nqueues, sizeof(int64_t));
	for (size_t i = 0; i < req->nqueues; i++)
		lim[i] = req->limits[i];
	char *kinds = queue_text_array(req->kinds, req->nkinds);
	char *queues = queue_text_array(req->queues, req->nqueues);
	char *limits = queue_int_array(lim, req->nqueues);
	char *modes = queue_text_array(req->modes, req->nqueues);
	char lease[24];
	snprintf(lease, sizeof(lease), "%lld", (long long)req->lease_ms);
	const char *p[] = {kinds, queues, limits, req->locked_by, lease, modes};
	dbev_failpoints(d, FP_CLAIM_SEND, FP_CLAIM_RESULT);
	int rc = dbev_send_prepared(d, "pgjob_claim", 6, p, cb, arg);
	free(modes);
	free(lim);
	free(kinds);
	free(queues);
	free(limits);
	return rc;
}

struct job **
queue_claim_rows(const void *pgresult, int *n)
{
	const PGresult *res = pgresult;
	*n = PQntuples(res);
	struct job **jobs = xcalloc((size_t)*n, sizeof(*jobs));
	for (int i = 0; i < *n; i++) {
		struct job *j = xcalloc(1, sizeof(*j));
		j->id = strtoll(PQgetvalue(res, i, 0), NULL, 10);
		j->kind = xstrdup(PQgetvalue(res, i, 1));
		j->queue = xstrdup(PQgetvalue(res, i, 2));
		j->payload = xstrdup(PQgetvalue(res, i, 3));
		j->attempt = atoi(PQgetvalue(res, i, 4));
		j->max_attempts = atoi(PQgetvalue(res, i, 5));
		j->lease_token = strtoll(PQgetvalue(res, i, 6), NULL, 10);
		if (!PQgetisnull(res, i, 7))
			j->ordering_key = xstrdup(PQgetvalue(res, i, 7));
		jobs[i] = j;
	}
	return jobs;
}

static const char finish_sql[] =
	"update pgjob.jobs j set state = r.state, result = r.result,"
	"  last_error = coalesce(r.error, j.last_error),"
	"  finished_at = case when r.state <> 'available' then now() end,"
	"  run_at = case when r.state = 'available'"
	"   then now() + r.delay_ms * interval '1 millisecond'"
	"   else j.run_at end,"
	"  attempts = j.attempts - case when r.refund then 1 else 0 end,"
	"  locked_by = null, locked_until = null"
	" from jsonb_to_recordset($1::jsonb) as r(id bigint, token bigint,"
	"  state text, result jsonb, error text, delay_ms bigint, refund bool)"
	" where j.id = r.id and j.lease_token = r.token"
	"  and j.state = 'running'"
	" returning j.id";

int
queue_finish(struct dbev *d, const struct queue_finish *f, size_t n,
	     dbev_result_fn cb, void *arg)
{
	cJSON *arr = cJSON_CreateArray();
	for (size_t i = 0; i < n; i++) {
		cJSON *o = cJSON_CreateObject();
		char num[24];
		/* Raw, so that 64-bit ids never pass through a double. */
		snprintf(num, sizeof(num), "%lld", (long long)f[i].id);
		cJSON_AddItemToObject(o, "id", cJSON_CreateRaw(num));
		snprintf(num, sizeof(num), "%lld", (long long)f[i].token);
		cJSON_AddItemToObject(o, "token", cJSON_CreateRaw(num));
		cJSON_AddStringToObject(o, "state", f[i].state);
		if (f[i].result)
			cJSON_AddItemToObject(o, "result",
					      cJSON_CreateRaw(f[i].result));
		if (f[i].error)
			cJSON_AddStringToObject(o, "error", f[i].error);
		snprintf(num, sizeof(num), "%lld", (long long)f[i].delay_ms);
		cJSON_AddItemToObject(o, "delay_ms", cJSON_CreateRaw(num));
		cJSON_AddBoolToObject(o, "refund", f[i].refund);
		cJSON_AddItemToArray(arr, o);
	}
	char *json = cJSON_PrintUnformatted(arr);
	cJSON_Delete(arr);
	if (!json)
		abort(); /* cJSON only fails on out-of-memory */
	const char *p[] = {json};
	dbev_failpoints(d, FP_FINISH_SEND, FP_FINISH_RESULT);
	int rc = dbev_send_prepared(d, "pgjob_finish", 1, p, cb, arg);
	cJSON_free(json);
	return rc;
}

/*
 * Renews every (id, token) still held; returns one row per job asked for:
 * id, renewed, and whether an operator cancelled it (pgjob cancel sets a
 * running job's state to cancelled, and its worker stops the handler).
 */
static const char renew_sql[] =
	"with r as (select * from unnest($1::bigint[], $2::bigint[])"
	"   as r(id, token)),"
	" u as (update pgjob.jobs j"
	"  set locked_until = now() + $3::bigint * interval '1 millisecond'"
	"  from r where j.id = r.id and j.lease_token = r.token"
	"   and j.state = 'running' returning j.id)"
	" select r.id, u.id is not null,"
	"  coalesce(j.state = 'cancelled' and j.lease_token = r.token, false)"
	" from r left join u on u.id = r.id"
	"  left join pgjob.jobs j on j.id = r.id";

int
queue_renew(struct dbev *d, const int64_t *ids, const int64_t *tokens, size_t n,
	    int64_t lease_ms, dbev_result_fn cb, void *arg)
{
	char *a = queue_int_array(ids, n);
	char *b = queue_int_array(tokens, n);
	char lease[24];
	snprintf(lease, sizeof(lease), "%lld", (long long)lease_ms);
	const char *p[] = {a, b, lease};
	dbev_failpoints(d, FP_RENEW_SEND, FP_RENEW_RESULT);
	int rc = dbev_send_prepared(d, "pgjob_renew", 3, p, cb, arg);
	free(a);
	free(b);
	return rc;
}

void
queue_prepare(struct dbev *d)
{
	/* Parsed and planned once per connection, not once per batch. */
	dbev_prepare(d, "pgjob_claim", claim_sql, 6);
	dbev_prepare(d, "pgjob_finish", finish_sql, 1);
	dbev_prepare(d, "pgjob_renew", renew_sql, 3);
}

int
queue_run_sql(struct dbev *d, const struct job *job, const char *statement,
	      int64_t timeout_ms, dbev_group_fn cb, void *arg)
{
	static const Oid types[] = {3802 /* jsonb */, 20 /* int8 */};
	char id[24], token[24], timeout[24];
	snprintf(id, sizeof(id), "%lld", (long long)job->id);
	snprintf(token, sizeof(token), "%lld", (long long)job->lease_token);
	snprintf(timeout, sizeof(timeout), "%lld", (long long)timeout_ms);
	const char *p_timeout[] = {timeout};
	const char *p_lease[] = {id, token};
	const char *p_stmt[] = {job->payload, id};
	/* Set locally: it ends with this transaction. */
	struct dbev_stmt st[] = {
		{"select set_config('statement_timeout', $1, true)", 1, NULL,
		 p_timeout},
		{"select pgjob.lock_lease($1, $2)", 2, NULL, p_lease},
		{statement, 2, types, p_stmt},
		{"update pgjob.jobs set state = 'done', finished_at = now(),"
		 " locked_by = null, locked_until = null"
		 " where id = $1 and lease_token = $2 and state = 'running'",
		 2, NULL, p_lease},
	};
	dbev_failpoints(d, FP_SQL_HANDLER_SEND, FP_SQL_HANDLER_RESULT);
	return dbev_send_group(d, st, 4, cb, arg);
}

static int
failed(const PGresult *r)
{
	ExecStatusType st = PQresultStatus(r);
	return st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK;
}

enum queue_sql_end
queue_sql_result(PGresult **res, int n, char **error)
{
	*error = NULL;
	for (int i = 0; i < n; i++) {
		if (!res[i]) {
			*error = xstrdup("the connection broke while the "
					 "statement ran");
			return QUEUE_SQL_CONN_LOST;
		}
		if (!failed(res[i]))
			continue;
		const char *state =
			PQresultErrorField(res[i], PG_DIAG_SQLSTATE);
		if (i == 1 && state && strcmp(state, "PJ001") == 0)
			return QUEUE_SQL_LEASE;
		*error = db_error_text(NULL, res[i]);
		return QUEUE_SQL_FAILED;
	}
	return QUEUE_SQL_DONE;
}

char *
queue_text_array(const char *const *v, size_t n)
{
	struct buf b = {0};
	buf_append(&b, "{", 1);
	for (size_t i = 0; i < n; i++) {
		buf_append(&b, i ? ",\"" : "\"", i ? 2 : 1);
		for (const char *s = v[i]; *s; s++) {
			if (*s == '"' || *s == '\\')
				buf_append(&b, "\\", 1);
			buf_append(&b, s, 1);
		}
		buf_append(&b, "\"", 1);
	}
	buf_append(&b, "}", 1);
	return b.data;
}

char *
queue_int_array(const int64_t *v, size_t n)
{
	struct buf b = {0};
	buf_append(&b, "{", 1);
	for (size_t i = 0; i < n; i++)
		buf_appendf(&b, "%s%lld", i ? "," : "", (long long)v[i]);
	buf_append(&b, "}", 1);
	return b.data;
}
