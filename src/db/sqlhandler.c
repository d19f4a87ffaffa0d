/*
 * sqlhandler: an sql handler's job in one transaction on the worker's own
 * connection: its lease checked under a row lock, its statement run, the
 * job marked done, all committed together or rolled back together (so the
 * end of an sql job is never written apart from its work).  The worker's
 * side, its turn on the connection and what an outcome means for the job,
 * is src/worker/sqlhandler.c.
 */
#include "db/sqlhandler.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/failpoint.h"
#include "common/job.h"
#include "common/util.h"
#include "db/db.h"
#include "db/internal.h"
#include "db/sqlstate.h"

struct sql_ctx {
	queue_sql_fn *cb;
	void *arg;
};

static int
failed(const PGresult *r)
{
	ExecStatusType st = PQresultStatus(r);
	return st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK;
}

/* How the sql handler's group ended; *error (caller frees) for FAILED and
 * CONN_LOST. */
static enum queue_sql_end
sql_end(PGresult **res, int n, char **error)
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
		if (i == 1 && sqlstate_is(state, SQLSTATE_PJ_LEASE_LOST))
			return QUEUE_SQL_LEASE;
		*error = db_error_text(NULL, res[i]);
		/* query_canceled: only statement_timeout cancels the
		 * handler's statement on the worker's own connection. */
		if (i == 2 && sqlstate_is(state, SQLSTATE_QUERY_CANCELED))
			return QUEUE_SQL_TIMED_OUT;
		return QUEUE_SQL_FAILED;
	}
	return QUEUE_SQL_DONE;
}

static void
on_sql(void *arg, PGresult **res, int n)
{
	struct sql_ctx *c = arg;
	char *error;
	enum queue_sql_end end = sql_end(res, n, &error);
	c->cb(c->arg, end, error);
	free(error);
	free(c);
}

int
queue_run_sql(struct dbev *d, const struct job *job, const char *statement,
	      int64_t timeout_ms, queue_sql_fn *cb, void *arg)
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
		/* The worker's session turns JIT, custom plans, sequential
		 * and bitmap scans off for its own statements (session.c);
		 * the handler's gets the values it would have had. */
		{"select set_config('statement_timeout', $1, true),"
		 " set_config(name, reset_val, true) from pg_settings"
		 " where name in ('jit', 'plan_cache_mode', 'enable_seqscan',"
		 "  'enable_bitmapscan')",
		 1, NULL, p_timeout, NULL},
		{"select pgjob.lock_lease($1, $2)", 2, NULL, p_lease, NULL},
		{statement, 2, types, p_stmt, NULL},
		/* Its wall time is its transaction's so far (now() is when
		 * it began); CPU and memory are the server's, not its own. */
		{"update pgjob.jobs set state = 'done', finished_at = now(),"
		 " locked_until = null,"
		 " last_wall_ms = least(round(extract(epoch from"
		 "  clock_timestamp() - now()) * 1000), 2147483647)::int,"
		 " last_cpu_ms = null, last_max_rss_kb = null"
		 " where id = $1 and lease_token = $2"
		 " and coalesce(state, '') = 'running'",
		 2, NULL, p_lease, NULL},
	};
	struct sql_ctx *ctx = xcalloc(1, sizeof(*ctx));
	*ctx = (struct sql_ctx){cb, arg};
	dbev_failpoints(d, FP_SQL_HANDLER_SEND, FP_SQL_HANDLER_RESULT);
	return dbev_send_group(d, st, 4, on_sql, ctx);
}
