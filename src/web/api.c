/*
 * api: every statement of the web console, as JSON (api.h; the paths and
 * their answers are in docs/console.md, "The API").  This file routes a
 * path to its endpoint and holds the pages of the cluster: the overview,
 * queues (and their pause and limits), schedules, tasks and workflows.
 * The jobs are in api_jobs.c.
 *
 * Every statement takes its input as parameters; a filter is one statement
 * whose terms read "($n::text is null or col = $n)", which libpq's unnamed
 * statements plan with the values known, so a term left out costs nothing
 * and a partial index still serves the terms given.  Every page that
 * refreshes reads partial indexes only (available, running, waiting and
 * dead jobs; jobs finished in the last minute), never the whole jobs
 * table, and counts stop at a thousand (the answer says which counts are
 * lower bounds): docs/performance.md has the timings with a million jobs.
 *
 * Every string an application or a handler wrote reaches the JSON through
 * db/rowjson.h, which makes it valid UTF-8.
 */
#include "web/api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/cron.h"
#include "common/util.h"
#include "db/health.h"
#include "db/jobctl.h"
#include "db/queue_counts.h"
#include "db/rowjson.h"
#include "web/api_history.h"
#include "web/api_jobs.h"
#include "web/api_response.h"
#include "web/unserved.h"

/*
 * Every queue that has jobs available, waiting, running or dead, that
 * finished jobs in the last minute, that a worker's config defines or
 * that has a row in pgjob.limits (a paused queue with no jobs is still
 * paused), counted as db/queue_counts.h says (no count past QC_CAP + 1
 * rows); the attempts done and failed in about the last minute from the
 * workers' history (QC_LAST_MINUTE).
 */
/* clang-format off */
static const char QUEUES_SQL[] =
	"with recursive"
	QC_QUEUES
	/* And the queues a worker's config defines. */
	"  union select name from pgjob.queues)"
	" select n.queue, least(o.available, " QC_CAP ") as available,"
	"  least(s.n, " QC_CAP ") as scheduled,"
	"  least(o.running, " QC_CAP ") as running,"
	"  least(w.n, " QC_CAP ") as waiting,"
	"  least(d.n, " QC_CAP ") as dead,"
	"  coalesce(f.done, 0) as done_last_minute,"
	"  coalesce(f.failed, 0) as failed_last_minute,"
	"  round(extract(epoch from now() - o.oldest)::numeric, 3)"
	"   as oldest_wait_seconds,"
	"  coalesce(l.paused, false) as paused,"
	"  coalesce(array_to_json(l.paused_kinds), '[]') as paused_kinds,"
	/* The fields whose value is a lower bound. */
	"  to_json(array_remove(array["
	"   case when o.seen > " QC_CAP " then 'available' end,"
	"   case when o.seen > " QC_CAP " then 'oldest_wait_seconds' end,"
	"   case when s.n > " QC_CAP " then 'scheduled' end,"
	"   case when w.n > " QC_CAP " then 'waiting' end,"
	"   case when d.n > " QC_CAP " then 'dead' end], null))"
	"   as at_least,"
	/* Counted in a window that may not hold them all (running jobs
	 * claimed before jobs of a higher priority came): near, not a
	 * bound. */
	"  to_json(array_remove(array["
	"   case when o.seen > " QC_CAP " then 'running' end], null))"
	"   as estimated,"
	/* The limits, when the queue has a row. */
	"  l.queue is not null as has_limits,"
	"  l.global_concurrency, l.per_key_concurrency, l.rate,"
	"  l.rate_period_ms, l.burst, l.rate_per_key,"
	"  l.rate_per_key_period_ms, l.burst_per_key, l.fair, l.source,"
	"  case when l.throttled_until > now() then l.throttled_until end"
	"   as throttled_until"
	QC_FROM_QUEUES;
/* clang-format on */

/* Column numbers of QUEUES_SQL. */
enum {
	Q_QUEUE,
	Q_AT_LEAST = 11,
	Q_ESTIMATED,
	Q_HAS_LIMITS,
	Q_LIMITS,
	Q_END = Q_LIMITS + 11,
};

/* The queues as /api/queues has them; NULL after filling out.  *capped
 * is set when a count is a lower bound. */
static cJSON *
queues_json(struct db_conn *db, struct web_response *out, int *capped)
{
	struct db_rows *res = api_query(db, out, QUEUES_SQL, 0, NULL);
	if (!res)
		return NULL;
	cJSON *a = cJSON_CreateArray();
	*capped = 0;
	for (int r = 0; r < db_rows_count(res); r++) {
		cJSON *o = cJSON_CreateObject();
		rowjson_add_columns(o, res, r, Q_QUEUE, Q_HAS_LIMITS);
		*capped |= strcmp(db_rows_text(res, r, Q_AT_LEAST), "[]") != 0;
		cJSON *l = cJSON_CreateNull();
		if (db_rows_text(res, r, Q_HAS_LIMITS)[0] == 't') {
			cJSON_Delete(l);
			l = cJSON_CreateObject();
			rowjson_add_columns(l, res, r, Q_LIMITS, Q_END);
		}
		cJSON_AddItemToObject(o, "limits", l);
		cJSON_AddItemToArray(a, o);
	}
	db_rows_free(res);
	return a;
}

static void
get_queues(struct db_conn *db, const char *rest, const struct web_query *q,
	   struct web_response *out)
{
	int capped;
	cJSON *a = queues_json(db, out, &capped);
	if (!a)
		return;
	cJSON *o = cJSON_CreateObject();
	cJSON_AddItemToObject(o, "queues", a);
	cJSON_AddBoolToObject(o, "estimates", capped);
	web_response_json(out, o);
}

/*
 * The workers, one row each, grouped into instances by the caller.  No
 * count of each one's running jobs: locked_by is in no index, and reading
 * it from the row of every running job, spread through the table, costs
 * a heap page each (the queues have the counts).
 */
static const char WORKERS_SQL[] =
	"select w.host, w.supervisor_pid, w.version, w.slot, w.pid,"
	"  w.started_at,"
	"  round(greatest(extract(epoch from now() - w.heartbeat_at), 0)"
	"   ::numeric, 3) as heartbeat_age_seconds,"
	"  array_to_json(w.kinds) as kinds, w.process_crashes,"
	"  array_to_json(w.crash_loops) as crash_loops"
	" from pgjob.workers w"
	" order by w.host, w.supervisor_pid, w.slot";

enum { W_HOST, W_SUP, W_VERSION, W_SLOT, W_END = W_SLOT + 7 };

static cJSON *
instances_json(struct db_conn *db, struct web_response *out)
{
	struct db_rows *res = api_query(db, out, WORKERS_SQL, 0, NULL);
	if (!res)
		return NULL;
	cJSON *a = cJSON_CreateArray(), *workers = NULL;
	for (int r = 0; r < db_rows_count(res); r++) {
		if (r == 0 ||
		    strcmp(db_rows_text(res, r, W_HOST),
			   db_rows_text(res, r - 1, W_HOST)) != 0 ||
		    strcmp(db_rows_text(res, r, W_SUP),
			   db_rows_text(res, r - 1, W_SUP)) != 0) {
			cJSON *i = cJSON_CreateObject();
			rowjson_add_columns(i, res, r, W_HOST, W_SLOT);
			workers = cJSON_AddArrayToObject(i, "workers");
			cJSON_AddItemToArray(a, i);
		}
		cJSON *w = cJSON_CreateObject();
		rowjson_add_columns(w, res, r, W_SLOT, W_END);
		cJSON_AddItemToArray(workers, w);
	}
	db_rows_free(res);
	return a;
}

/* The dead tuples and last vacuum of pgjob.jobs. */
static const char TABLE_SQL[] =
	"select n_dead_tup as dead_tuples, n_live_tup as live_tuples,"
	"  greatest(last_vacuum, last_autovacuum) as last_vacuum"
	" from pg_stat_user_tables where relid = 'pgjob.jobs'::regclass";

/* What the daemon's health guard watches: the oldest holder of the xmin
 * horizon (db/health.c, the statement of `pgjob doctor`), and the jobs
 * table's dead tuples. */
static cJSON *
health_json(struct db_conn *db, struct web_response *out)
{
	struct health_report rep;
	char *err;
	if (health_read_holders_now(db, 1, &rep, &err) < 0) {
		api_fail(db, out, err);
		free(err);
		return NULL;
	}
	struct db_rows *res = api_query(db, out, TABLE_SQL, 0, NULL);
	if (!res) {
		health_report_free(&rep);
		return NULL;
	}
	cJSON *o = cJSON_CreateObject();
	const struct health_holder *h = rep.nholders ? &rep.holders[0] : NULL;
	if (h && h->age_s >= 0)
		cJSON_AddNumberToObject(o, "xmin_horizon_age_seconds",
					h->age_s);
	else
		cJSON_AddNullToObject(o, "xmin_horizon_age_seconds");
	cJSON_AddNumberToObject(o, "xmin_horizon_age_xids",
				h ? (double)h->xids : 0);
	if (h) {
		char pid[32] = "";
		if (h->pid)
			snprintf(pid, sizeof(pid), " (pid %d)", h->pid);
		char *who = xasprintf("%s %s%s", health_kind_name(h->kind),
				      h->name ? h->name : "?", pid);
		cJSON_AddItemToObject(o, "holder", rowjson_string(who));
		free(who);
	} else {
		cJSON_AddNullToObject(o, "holder");
	}
	if (db_rows_count(res) > 0)
		rowjson_add_columns(o, res, 0, 0, db_rows_columns(res));
	db_rows_free(res);
	health_report_free(&rep);
	return o;
}

/* Done, failed and retried per minute over the last hour, oldest first
 * (pgjob.throughput(), sql/upgrade/014_console_state.sql). */
static const char RATES_SQL[] =
	"select * from pgjob.throughput(interval '1 hour')";

/* The overview's totals when a queue's count stopped at QC_CAP: the
 * planner's estimate of each (the statistics of pgjob.jobs), which no
 * count of ten million rows delays. */
static const struct {
	const char *name, *where;
} TOTALS[] = {
	{"available", "state = 'available' and run_at <= now()"},
	{"scheduled", "state = 'available' and run_at > now()"},
	{"running", "state = 'running'"},
	{"waiting", "state = 'waiting'"},
	{"dead", "dead"},
};

static cJSON *
totals_json(struct db_conn *db, struct web_response *out)
{
	cJSON *o = cJSON_CreateObject();
	for (size_t i = 0; i < sizeof(TOTALS) / sizeof(TOTALS[0]); i++) {
		char *sql = xasprintf("explain (format json) select 1"
				      " from pgjob.jobs where %s",
				      TOTALS[i].where);
		struct db_rows *res = api_query(db, out, sql, 0, NULL);
		free(sql);
		if (!res) {
			cJSON_Delete(o);
			return NULL;
		}
		cJSON *plan = cJSON_Parse(db_rows_text(res, 0, 0));
		db_rows_free(res);
		const cJSON *rows = cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(
				cJSON_GetArrayItem(plan, 0), "Plan"),
			"Plan Rows");
		cJSON_AddNumberToObject(o, TOTALS[i].name,
					cJSON_IsNumber(rows) ? rows->valuedouble
							     : 0);
		cJSON_Delete(plan);
	}
	return o;
}

static void
get_overview(struct db_conn *db, const char *rest, const struct web_query *q,
	     struct web_response *out)
{
	int missing, capped = 0;
	cJSON *o = cJSON_CreateObject(), *part;
	struct db_rows *res = api_query(db, out, "select now()", 0, NULL);
	if (!res)
		goto fail;
	cJSON_AddItemToObject(o, "now", rowjson_value(res, 0, 0));
	db_rows_free(res);
	if (!(part = queues_json(db, out, &capped)))
		goto fail;
	cJSON_AddItemToObject(o, "queues", part);
	if (!(res = api_query_optional(db, out, RATES_SQL, 0, NULL, &missing)))
		goto fail;
	cJSON_AddItemToObject(o, "rates", api_rows_array(res));
	db_rows_free(res);
	if (!(part = instances_json(db, out)))
		goto fail;
	cJSON_AddItemToObject(o, "instances", part);
	if (!(part = health_json(db, out)))
		goto fail;
	cJSON_AddItemToObject(o, "health", part);
	/* The jobs no live worker serves, by kind and queue: the overview
	 * warns of them.  At most 100 pairs; pgjob web's last reading
	 * (web/unserved.h), or asked here. */
	char *unserved = web_unserved_get();
	if (unserved) {
		cJSON_AddItemToObject(o, "unserved", cJSON_Parse(unserved));
		free(unserved);
	} else {
		if (!(res = api_query_optional(db, out, WEB_UNSERVED_SQL, 0,
					       NULL, &missing)))
			goto fail;
		cJSON_AddItemToObject(o, "unserved", api_rows_array(res));
		db_rows_free(res);
	}
	cJSON_AddBoolToObject(o, "estimates", capped);
	if (capped) {
		if (!(part = totals_json(db, out)))
			goto fail;
		cJSON_AddItemToObject(o, "estimated_totals", part);
	}
	web_response_json(out, o);
	return;
fail:
	cJSON_Delete(o);
}

/* The schedules and their state (pgjob.schedule_list, sql/014: the
 * definition of the worker that started last, as the scheduler picks it). */
static const char SCHEDULES_SQL[] =
	"select name, cron, kind, queue, coalesce(timezone, 'UTC') as timezone,"
	"  enabled, last_tick, run_requested_at,"
	"  extract(epoch from coalesce(last_tick, now()))::bigint as since"
	" from pgjob.schedule_list order by name";

enum { S_NAME, S_CRON, S_TZ = 4, S_ENABLED, S_LAST, S_RUN, S_SINCE };

/* The next tick after since, as RFC 3339, or null when the definition is
 * gone or never ticks. */
static cJSON *
next_tick(const char *expr, const char *tz, long long since)
{
	char *err;
	int64_t next;
	struct cron *c = expr ? cron_parse(expr, &err) : NULL;
	if (!c) {
		if (expr)
			free(err);
		return cJSON_CreateNull();
	}
	int rc = cron_next(c, tz, since, &next);
	cron_free(c);
	if (rc < 0)
		return cJSON_CreateNull();
	char buf[CRON_TIME_LEN];
	cron_format_utc(next, buf);
	return cJSON_CreateString(buf);
}

static void
get_schedules(struct db_conn *db, const char *rest, const struct web_query *q,
	      struct web_response *out)
{
	struct db_rows *res = api_query(db, out, SCHEDULES_SQL, 0, NULL);
	if (!res)
		return;
	cJSON *a = cJSON_CreateArray();
	for (int r = 0; r < db_rows_count(res); r++) {
		cJSON *o = cJSON_CreateObject();
		rowjson_add_columns(o, res, r, S_NAME, S_SINCE);
		cJSON_AddItemToObject(
			o, "next_tick",
			next_tick(db_rows_value(res, r, S_CRON),
				  db_rows_text(res, r, S_TZ),
				  atoll(db_rows_text(res, r, S_SINCE))));
		cJSON_AddItemToArray(a, o);
	}
	db_rows_free(res);
	cJSON *o = cJSON_CreateObject();
	cJSON_AddItemToObject(o, "schedules", a);
	web_response_json(out, o);
}

/* Leased tasks are leases named "task:NAME:PARTITION" (worker/tasks.c);
 * the other leases are the cluster's duties (scheduler, pruning ...). */
static const char TASKS_SQL[] =
	"select substring(name from '^task:(.*):[0-9]+$') as name,"
	"  substring(name from ':([0-9]+)$')::int as partition,"
	"  holder, token, expires_at,"
	"  coalesce(expires_at < now(), true) as expired"
	" from pgjob.leases where name ~ '^task:.*:[0-9]+$'"
	" order by 1, 2";
static const char DUTIES_SQL[] =
	"select name, holder, token, expires_at,"
	"  coalesce(expires_at < now(), true) as expired"
	" from pgjob.leases where name !~ '^task:.*:[0-9]+$' order by name";

static void
get_tasks(struct db_conn *db, const char *rest, const struct web_query *q,
	  struct web_response *out)
{
	struct db_rows *t = api_query(db, out, TASKS_SQL, 0, NULL), *d = NULL;
	if (!t || !(d = api_query(db, out, DUTIES_SQL, 0, NULL))) {
		db_rows_free(t);
		return;
	}
	cJSON *o = cJSON_CreateObject();
	cJSON_AddItemToObject(o, "tasks", api_rows_array(t));
	cJSON_AddItemToObject(o, "duties", api_rows_array(d));
	db_rows_free(t);
	db_rows_free(d);
	web_response_json(out, o);
}

#define WORKFLOWS_PAGE 50

/* A workflow's row; state: running until every step has ended, then
 * failed when one ended dead or cancelled, else done. */
#define WORKFLOW_COLUMNS                                                       \
	"select id, name, created_at, steps, ended, failed, finished_at,"      \
	"  case when finished_at is null then 'running'"                       \
	"   when failed > 0 then 'failed' else 'done' end as state"            \
	" from pgjob.workflows"

static void
get_workflows(struct db_conn *db, const char *rest, const struct web_query *q,
	      struct web_response *out)
{
	char before[24], limit[8];
	const char *b = q->get(q->ctx, "before");
	if (b && api_parse_id(b, before, sizeof(before)) < 0) {
		web_response_error(out, 400, "before: not a workflow id");
		return;
	}
	snprintf(limit, sizeof(limit), "%d", WORKFLOWS_PAGE);
	const char *p[] = {b ? before : NULL, limit};
	struct db_rows *res = api_query(db, out,
					WORKFLOW_COLUMNS
					" where $1::bigint is null or id < $1"
					" order by id desc limit $2::int",
					2, p);
	if (!res)
		return;
	cJSON *o = cJSON_CreateObject();
	int n = db_rows_count(res);
	cJSON_AddItemToObject(o, "workflows", api_rows_array(res));
	cJSON_AddItemToObject(o, "next",
			      n == WORKFLOWS_PAGE ? rowjson_value(res, n - 1, 0)
						  : cJSON_CreateNull());
	db_rows_free(res);
	web_response_json(out, o);
}

static void
get_workflow(struct db_conn *db, const char *id, const struct web_query *q,
	     struct web_response *out)
{
	char wid[24];
	if (api_parse_id(id, wid, sizeof(wid)) < 0) {
		web_response_error(out, 404, "no such workflow");
		return;
	}
	const char *p[] = {wid};
	struct db_rows *w =
		api_query(db, out, WORKFLOW_COLUMNS " where id = $1", 1, p);
	struct db_rows *s = NULL, *e = NULL;
	if (!w)
		return;
	if (db_rows_count(w) == 0) {
		db_rows_free(w);
		web_response_error(out, 404, "no such workflow");
		return;
	}
	/* Along jobs_workflow_idx; a workflow has at most
	 * pgjob.workflow_max_steps() steps and workflow_max_edges() edges. */
	s = api_query(db, out,
		      "select id, step, kind, queue, state, attempts,"
		      "  left(last_error, 300) as last_error"
		      " from pgjob.jobs where workflow_id = $1 order by id",
		      1, p);
	if (s)
		e = api_query(db, out,
			      "select d.parent, d.child from pgjob.jobs c"
			      " join pgjob.job_deps d on d.child = c.id"
			      " where c.workflow_id = $1"
			      " order by d.parent, d.child",
			      1, p);
	if (s && e) {
		cJSON *o = cJSON_CreateObject(), *wf = cJSON_CreateObject();
		rowjson_add_columns(wf, w, 0, 0, db_rows_columns(w));
		cJSON_AddItemToObject(o, "workflow", wf);
		cJSON_AddItemToObject(o, "steps", api_rows_array(s));
		cJSON_AddItemToObject(o, "edges", api_rows_array(e));
		web_response_json(out, o);
	}
	db_rows_free(w);
	db_rows_free(s);
	db_rows_free(e);
}

/*
 * The session's settings (api.h): every timestamp in one format, the one
 * rowjson.c makes RFC 3339; no statement longer than 5 s; and no JIT
 * compilation.  The planner's cost of the queues statement (a few small
 * index scans per queue) passes jit_above_cost, and compiling it takes
 * many times what the statement runs: nothing the console runs is long
 * enough to win it back.
 */
int
web_api_session(struct db_conn *db, char **err)
{
	return db_exec(db,
		       "set statement_timeout = '5s'; "
		       "set datestyle = 'ISO, YMD'; set jit = off",
		       err);
}

/* A string member of body, or NULL when absent or null; *bad is set when
 * it is there with another type. */
static const char *
member(const cJSON *body, const char *key, int *bad)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(body, key);
	if (!v || cJSON_IsNull(v))
		return NULL;
	if (!cJSON_IsString(v)) {
		*bad = 1;
		return NULL;
	}
	return v->valuestring;
}

/* Runs one statement of an action and answers {"ok": true}. */
static void
act(struct db_conn *db, struct web_response *out, const char *sql, int n,
    const char *const *p)
{
	struct db_rows *res = api_query(db, out, sql, n, p);
	if (!res)
		return;
	db_rows_free(res);
	cJSON *o = cJSON_CreateObject();
	cJSON_AddTrueToObject(o, "ok");
	web_response_json(out, o);
}

/* queues/pause, queues/resume: {"queue", "kind"?}, pgjob.pause() and
 * pgjob.resume() as `pgjob pause` and `pgjob resume` run them. */
static void
post_pause(struct db_conn *db, const cJSON *body, const char *sql,
	   struct web_response *out)
{
	int bad = 0;
	const char *queue = member(body, "queue", &bad);
	const char *kind = member(body, "kind", &bad);
	if (bad || !queue) {
		web_response_error(out, 400,
				   "expected {\"queue\": name, \"kind\": name "
				   "or null}");
		return;
	}
	const char *p[] = {queue, kind};
	act(db, out, sql, 2, p);
}

/*
 * queues/limits: {"queue", "set": {key: value or null ...}, "reset":
 * bool}: reset first, then set, in one transaction, as `pgjob limits
 * --reset --set ...` does; pgjob.set_limits() refuses an unknown key or a
 * value of the wrong type (400, with the keys it knows).
 */
static void
post_limits(struct db_conn *db, const cJSON *body, const char *arg,
	    struct web_response *out)
{
	int bad = 0;
	const char *queue = member(body, "queue", &bad);
	const cJSON *set = cJSON_GetObjectItemCaseSensitive(body, "set");
	const cJSON *reset = cJSON_GetObjectItemCaseSensitive(body, "reset");
	if (bad || !queue || (set && !cJSON_IsObject(set)) ||
	    (reset && !cJSON_IsBool(reset)) || (!set && !cJSON_IsTrue(reset))) {
		web_response_error(out, 400,
				   "expected {\"queue\": name, \"set\": "
				   "{limit: value}, \"reset\": bool}");
		return;
	}
	char *json = set ? cJSON_PrintUnformatted(set) : NULL;
	const char *p[] = {queue, json};
	struct db_rows *res = api_query(db, out, "begin", 0, NULL);
	if (res && cJSON_IsTrue(reset)) {
		db_rows_free(res);
		res = api_query(db, out, jobctl_reset_limits_sql, 1, p);
	}
	if (res && set) {
		db_rows_free(res);
		res = api_query(db, out, jobctl_set_limits_sql, 2, p);
	}
	if (res) {
		db_rows_free(res);
		res = api_query(db, out, "commit", 0, NULL);
	}
	cJSON_free(json);
	if (!res) {
		db_rollback(db);
		return;
	}
	db_rows_free(res);
	cJSON *o = cJSON_CreateObject();
	cJSON_AddTrueToObject(o, "ok");
	web_response_json(out, o);
}

/*
 * schedules/run {"name"} (what: "run"): pgjob.schedule_run(), the scheduler
 * duty enqueues one job of it at its next turn; schedules/enable
 * {"name", "enabled"} (what: "enable"): pgjob.schedule_enable() (sql/014).  A
 * name that no worker defines is a 404 (42704).
 */
static void
post_schedule(struct db_conn *db, const cJSON *body, const char *what,
	      struct web_response *out)
{
	int bad = 0, run = strcmp(what, "run") == 0;
	const char *name = member(body, "name", &bad);
	const cJSON *en = cJSON_GetObjectItemCaseSensitive(body, "enabled");
	if (bad || !name || (!run && !cJSON_IsBool(en))) {
		web_response_error(out, 400,
				   run ? "expected {\"name\": schedule}"
				       : "expected {\"name\": schedule, "
					 "\"enabled\": bool}");
		return;
	}
	const char *p[] = {name, cJSON_IsTrue(en) ? "true" : "false"};
	if (run)
		act(db, out, "select pgjob.schedule_run(name => $1)", 1, p);
	else
		act(db, out,
		    "select pgjob.schedule_enable(name => $1,"
		    " enabled => $2::boolean)",
		    2, p);
}

/* The pages (GET): a path that ends in "/" takes what follows as rest
 * ("job/42/payload": rest "42/payload"). */
static const struct {
	const char *path;
	void (*fn)(struct db_conn *db, const char *rest,
		   const struct web_query *q, struct web_response *out);
} gets[] = {
	{"overview", get_overview},	{"jobs", api_jobs_list},
	{"jobs/count", api_jobs_count}, {"job/", api_job_get},
	{"queues", get_queues},		{"schedules", get_schedules},
	{"tasks", get_tasks},		{"workflows", get_workflows},
	{"workflow/", get_workflow},	{"history", api_history},
};

/* The actions (POST), each with the argument its function takes. */
static const struct {
	const char *path;
	void (*fn)(struct db_conn *db, const cJSON *body, const char *arg,
		   struct web_response *out);
	const char *arg;
} posts[] = {
	{"jobs/retry", api_jobs_act, "retry"},
	{"jobs/cancel", api_jobs_act, "cancel"},
	{"jobs/delete", api_jobs_act, "delete"},
	{"queues/pause", post_pause, jobctl_pause_sql},
	{"queues/resume", post_pause, jobctl_resume_sql},
	{"queues/limits", post_limits, NULL},
	{"schedules/run", post_schedule, "run"},
	{"schedules/enable", post_schedule, "enable"},
};

int
web_api_get(struct db_conn *db, const char *path, const struct web_query *q,
	    struct web_response *out)
{
	out->content_type = "application/json";
	out->content_disposition = NULL;
	for (size_t i = 0; i < sizeof(gets) / sizeof(gets[0]); i++) {
		size_t n = strlen(gets[i].path);
		if (gets[i].path[n - 1] == '/'
			    ? strncmp(path, gets[i].path, n) == 0
			    : strcmp(path, gets[i].path) == 0) {
			gets[i].fn(db, path + n, q, out);
			return db_connected(db) ? 0 : -1;
		}
	}
	web_response_error(out, 404, "no such page");
	return db_connected(db) ? 0 : -1;
}

int
web_api_post(struct db_conn *db, const struct web_user *u, const char *path,
	     const cJSON *body, struct web_response *out)
{
	out->content_type = "application/json";
	out->content_disposition = NULL;
	/* web.c checked the role already; a read-only user never acts,
	 * whatever reaches here. */
	if (!u || !u->operator) {
		web_response_error(out, 403, "read-only user");
		return 0;
	}
	if (!cJSON_IsObject(body)) {
		web_response_error(out, 400, "expected a JSON object");
		return 0;
	}
	for (size_t i = 0; i < sizeof(posts) / sizeof(posts[0]); i++)
		if (strcmp(path, posts[i].path) == 0) {
			posts[i].fn(db, body, posts[i].arg, out);
			return db_connected(db) ? 0 : -1;
		}
	web_response_error(out, 404, "no such action");
	return db_connected(db) ? 0 : -1;
}
