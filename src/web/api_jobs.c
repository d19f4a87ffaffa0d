/*
 * api_jobs: the console's jobs, one job, and what an operator does to
 * them (retry, cancel, delete), by ids or by everything a filter matches.
 * See api_jobs.h.
 *
 * The list is newest first with a keyset cursor (id < before), or oldest
 * first (order=asc, id > after), never an OFFSET.  Where no index serves
 * the filter (text in payloads and errors, a kind, a key, a time range,
 * finished states), a request reads windows of WINDOW ids (Q_WINDOW with
 * a text search) past its cursor, one after the other until it has a page
 * or has spent BUDGET_MS, so that a rare match never makes one request
 * read a million rows: the answer's searched_to says where it stopped,
 * and the page asks again from there, request after request, until its
 * page is full (a filter shows what matches, however deep).  Waiting,
 * available, running and dead jobs (of a queue, or all), and a workflow's,
 * are read along their partial indexes, whole: a kind or any other term
 * more would let the planner walk the primary key in the hope of a page
 * soon, through the whole table when nothing matches, so with those the
 * windows apply too.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/text.h"
#include "common/util.h"
#include "db/rowjson.h"
#include "web/api_filter.h"
#include "web/api_jobs.h"
#include "web/api_response.h"
#include "web/bulk_yield.h"

/* Payloads and results above this many bytes are cut in job/ID (the
 * download endpoints send them whole). */
#define API_DOC_MAX 65536

/* Ids a window reads; with a text search (a jsonb to text per row, so
 * that a window, which cannot stop half-way, takes about the budget below:
 * a request takes the budget and one window at most). */
#define WINDOW	 20000
#define Q_WINDOW 4000
/* A request reads one window more only while it has spent less than this
 * (a page that refreshes answers well within 100 ms). */
#define BUDGET_MS 25
/* Jobs per page: by default, and at most. */
#define PAGE	 50
#define PAGE_MAX 200
/* Ids in one request's list (one statement, one transaction). */
#define BATCH 10000
/*
 * Jobs per statement (and transaction) of an action on a filter's
 * matches: a page's step of 5,000 is five.  A statement of 5,000 retries
 * or deletes took seconds on a loaded machine and met the 5 s
 * statement_timeout, stopping a bulk action half-way; one of 1,000 ends
 * well within it and holds its rows' locks a fifth as long.
 */
#define ACT_BATCH 1000

/* The list's columns, of the jobs that match where (FILTER_WHERE, or
 * FILTER_WHERE_RANGE for a window of ids); last_error's end: a
 * traceback's last line says what went wrong. */
#define LIST_SELECT(where)                                                     \
	"select id, queue, kind, state, attempts, max_attempts, priority,"     \
	"  run_at, created_at, finished_at,"                                   \
	"  right(last_error, 300) as last_error"                               \
	" from pgjob.all_jobs where" where
/* Below cursor $10 down to $11; oldest first, above cursor $10 up to $11. */
#define LIST_DESC                                                              \
	"  and ($10::bigint is null or id < $10::bigint)"                      \
	"  and ($11::bigint is null or id >= $11::bigint)"                     \
	" order by id desc limit $12::int"
#define LIST_ASC                                                               \
	"  and ($10::bigint is null or id > $10::bigint)"                      \
	"  and ($11::bigint is null or id <= $11::bigint)"                     \
	" order by id limit $12::int"

/* [range][asc]: along the filter's index, or a window of ids; newest or
 * oldest first. */
static const char *const LIST_SQL[2][2] = {
	{LIST_SELECT(FILTER_WHERE) LIST_DESC,
	 LIST_SELECT(FILTER_WHERE) LIST_ASC},
	{LIST_SELECT(FILTER_WHERE_RANGE) LIST_DESC,
	 LIST_SELECT(FILTER_WHERE_RANGE) LIST_ASC},
};

static double
now_ms(void)
{
	return (double)util_now_us() / 1e3;
}

/* Reads the jobs of one window of ids (range: past cursor to edge, or to
 * the end when edge is 0), or along the filter's index (!range), past
 * cursor into a: below it, or (asc) above it; returns how many, or -1 (out
 * filled). */
static int
read_window(struct db_conn *db, const struct filter *f, bool asc, bool range,
	    long long cursor, long long edge, long n, cJSON *a, long long *last,
	    struct web_response *out)
{
	char before[24], low[24], limit[8];
	const char *p[12];
	snprintf(before, sizeof(before), "%lld", cursor);
	snprintf(low, sizeof(low), "%lld", edge);
	snprintf(limit, sizeof(limit), "%ld", n);
	api_filter_params(f, p);
	p[9] = cursor ? before : NULL;
	p[10] = edge ? low : NULL;
	p[11] = limit;
	struct db_rows *res = api_query(db, out, LIST_SQL[range][asc], 12, p);
	if (!res)
		return -1;
	int rows = db_rows_count(res);
	for (int r = 0; r < rows; r++) {
		cJSON *o = cJSON_CreateObject();
		rowjson_add_columns(o, res, r, 0, db_rows_columns(res));
		cJSON_AddItemToArray(a, o);
	}
	if (rows)
		*last = atoll(db_rows_text(res, rows - 1, 0));
	db_rows_free(res);
	return rows;
}

/*
 * The lowest (lowest) or the highest id of pgjob.all_jobs into *v (0: no
 * job); -1: out filled.  Asked apart and only when needed: the lowest
 * walks jobs_pkey from its start, past the entries of every job ended
 * since vacuum last came (a drain of a backlog leaves millions: 40 to
 * 400 ms a page during one), where the highest is the newest entry, all
 * that the console's first page, the newest jobs, needs.
 */
static int
id_bound(struct db_conn *db, bool lowest, long long *v,
	 struct web_response *out)
{
	struct db_rows *res =
		api_query(db, out,
			  lowest ? "select min(id) from pgjob.all_jobs"
				 : "select max(id) from pgjob.all_jobs",
			  0, NULL);
	if (!res)
		return -1;
	*v = atoll(db_rows_text(res, 0, 0));
	db_rows_free(res);
	return 0;
}

/*
 * The page below cursor (0: from the newest), or (asc) above it (0: from
 * the oldest), n jobs at most, into a.  Windowed: *searched_to is the
 * last id read (the lowest, or the highest) when the windows ran out of
 * budget before the page was full, else 0 (the end was reached).  Returns
 * how many, or -1 (out filled).  Newest first, the lowest id is read only
 * once a window came back short, to know whether it was the last: a
 * window past the lowest id reads what the last window would.
 */
static int
read_page(struct db_conn *db, const struct filter *f, bool asc,
	  long long cursor, long n, cJSON *a, long long *last,
	  long long *searched_to, struct web_response *out)
{
	*searched_to = 0;
	if (api_filter_indexed(f) && !api_filter_open_state(f))
		return read_window(db, f, asc, false, cursor, 0, n, a, last,
				   out);
	long long min = 0, max = 0;
	bool have_min = api_filter_indexed(f) || (asc && cursor == 0);
	if (have_min && id_bound(db, true, &min, out) < 0)
		return -1;
	if ((asc || cursor == 0 || api_filter_indexed(f)) &&
	    id_bound(db, false, &max, out) < 0)
		return -1;
	if (api_filter_indexed(f)) {
		/* The ids left to search, past the cursor. */
		long long span = asc ? max - (cursor ? cursor : min) + 1
				     : (cursor ? cursor : max) - min + 1;
		int w = api_filter_windows_sooner(db, f, span, n, out);
		if (w < 0)
			return -1;
		if (!w)
			return read_window(db, f, asc, false, cursor, 0, n, a,
					   last, out);
	}
	if (cursor == 0)
		cursor = asc ? min - 1 : max + 1;
	long long size = f->q ? Q_WINDOW : WINDOW;
	double t0 = now_ms();
	int got = 0;
	for (;;) {
		/* The window's far end; 0: none, the last window. */
		long long edge = asc ? (cursor + size < max ? cursor + size : 0)
				     : (cursor - size > (have_min ? min : 0)
						? cursor - size
						: 0);
		int rows = read_window(db, f, asc, true, cursor, edge, n - got,
				       a, last, out);
		if (rows < 0)
			return -1;
		got += rows;
		if (got == n || edge == 0)
			return got;
		if (!asc && !have_min) {
			if (id_bound(db, true, &min, out) < 0)
				return -1;
			have_min = true;
			/* That window reached the lowest id: the last. */
			if (edge <= min)
				return got;
		}
		cursor = edge;
		if (now_ms() - t0 >= BUDGET_MS) {
			*searched_to = edge;
			return got;
		}
	}
}

void
api_jobs_list(struct db_conn *db, const char *rest, const struct web_query *q,
	      struct web_response *out)
{
	struct filter f;
	const char *b = q->get(q->ctx, "before");
	const char *l = q->get(q->ctx, "limit");
	const char *order = q->get(q->ctx, "order");
	bool asc = order && strcmp(order, "asc") == 0;
	char before[24] = "";
	long long last = 0, searched_to;
	long n = PAGE;

	if (api_filter_read(&f, q->get, q->ctx, out) < 0 ||
	    api_filter_times(db, &f, out) < 0)
		return;
	if (order && *order && !asc && strcmp(order, "desc") != 0) {
		web_response_error(out, 400, "order: asc or desc");
		return;
	}
	/* Oldest first, the cursor is "after". */
	if (asc)
		b = q->get(q->ctx, "after");
	if (b && *b && api_parse_id(b, before, sizeof(before)) < 0) {
		web_response_error(out, 400,
				   asc ? "after: not a job id"
				       : "before: not a job id");
		return;
	}
	if (l && *l) {
		char *end;
		n = strtol(l, &end, 10);
		if (*end || n < 1 || n > PAGE_MAX) {
			web_response_error(out, 400,
					   "limit: a number from 1 to 200");
			return;
		}
	}
	cJSON *jobs = cJSON_CreateArray();
	int rows = read_page(db, &f, asc, atoll(before), n, jobs, &last,
			     &searched_to, out);
	if (rows < 0) {
		cJSON_Delete(jobs);
		return;
	}
	cJSON *o = cJSON_CreateObject();
	cJSON_AddItemToObject(o, "jobs", jobs);
	if (rows == n)
		cJSON_AddNumberToObject(o, "next", (double)last);
	else
		cJSON_AddNullToObject(o, "next");
	if (searched_to)
		cJSON_AddNumberToObject(o, "searched_to", (double)searched_to);
	else
		cJSON_AddNullToObject(o, "searched_to");
	web_response_json(out, o);
}

/*
 * The attempts of a job, oldest first: those pgjob.attempts keeps (every
 * attempt that did not end done, sql/013), the newest 1000 at most, and
 * the one the job row describes, running or done (its worker is
 * locked_by, which stays on an ended row).
 */
static const char ATTEMPTS_SQL[] =
	"select token, attempt, started_at, finished_at, worker, outcome,"
	"  status, error, wall_ms, cpu_ms, max_rss_kb from ("
	"  select token, attempt, started_at, finished_at, worker, outcome,"
	"   status, left(error, 8192) as error, wall_ms, cpu_ms, max_rss_kb"
	"  from pgjob.attempts where job_id = $1"
	"  order by token desc, attempt desc limit 1000) a"
	" union all"
	" select lease_token, attempts, attempted_at,"
	"  case when state = 'done' then finished_at end, locked_by, state,"
	"  null, null,"
	"  case when state = 'done' then last_wall_ms end,"
	"  case when state = 'done' then last_cpu_ms end,"
	"  case when state = 'done' then last_max_rss_kb end"
	" from pgjob.all_jobs where id = $1 and state in ('running', 'done')"
	"  and attempted_at is not null"
	" order by 1, 2";

/* Appends s to b as one shell word: '...', a quote as '\''. */
static void
shell_word(struct buf *b, const char *s)
{
	buf_append(b, " '", 2);
	for (; *s; s++)
		if (*s == '\'')
			buf_append(b, "'\\''", 4);
		else
			buf_append(b, s, 1);
	buf_append(b, "'", 1);
}

/* 1 when s is valid UTF-8 without a control character (C0, DEL, C1): what
 * can be pasted into a terminal as it shows. */
static int
pasteable(const char *s)
{
	uint32_t cp;
	while (*s) {
		size_t n = text_char(s, &cp);
		if (!n || text_is_control(cp))
			return 0;
		s += n;
	}
	return 1;
}

/* Column col of res by name; -1 when there is none. */
static int
column(const struct db_rows *res, const char *name)
{
	for (int c = 0; c < db_rows_columns(res); c++)
		if (strcmp(db_rows_name(res, c), name) == 0)
			return c;
	return -1;
}

/*
 * `pgjob enqueue` of a job like this one, every argument a single-quoted
 * shell word; null when it cannot be pasted safely (a control character
 * or a byte that is not UTF-8 in a kind, a queue or a key: the payload's
 * JSON text escapes its own) or is too long to paste (a payload above
 * API_DOC_MAX).  The options come first and "--" ends them, so that a
 * kind that starts with "-" is not read as an option.
 */
static cJSON *
enqueue_command(const struct db_rows *job)
{
	static const struct {
		const char *column, *option;
	} opts[] = {
		{"queue", "--queue"},
		{"priority", "--priority"},
		{"max_attempts", "--max-attempts"},
		{"unique_key", "--unique-key"},
		{"ordering_key", "--ordering-key"},
		{"limit_key", "--limit-key"},
	};
	const char *payload = db_rows_text(job, 0, column(job, "payload"));
	if (strlen(payload) > API_DOC_MAX)
		return cJSON_CreateNull();
	struct buf b = {0};
	buf_append(&b, "pgjob enqueue", 13);
	for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
		int c = column(job, opts[i].column);
		const char *v = c >= 0 ? db_rows_value(job, 0, c) : NULL;
		if (!v || (strcmp(opts[i].column, "priority") == 0 &&
			   strcmp(v, "0") == 0))
			continue;
		buf_appendf(&b, " %s", opts[i].option);
		shell_word(&b, v);
	}
	buf_append(&b, " --", 3);
	shell_word(&b, db_rows_text(job, 0, column(job, "kind")));
	shell_word(&b, payload);
	cJSON *item = pasteable(b.data) ? cJSON_CreateString(b.data)
					: cJSON_CreateNull();
	buf_free(&b);
	return item;
}

/* The job row as JSON; a payload or result above API_DOC_MAX as its
 * first API_DOC_MAX bytes, as text. */
static cJSON *
job_json(const struct db_rows *job)
{
	cJSON *o = cJSON_CreateObject();
	for (int c = 0; c < db_rows_columns(job); c++) {
		const char *name = db_rows_name(job, c);
		const char *v = db_rows_value(job, 0, c);
		int doc = strcmp(name, "payload") == 0 ||
			  strcmp(name, "result") == 0;
		size_t len = v ? strlen(v) : 0;
		if (!doc || len <= API_DOC_MAX) {
			cJSON_AddItemToObject(o, name,
					      rowjson_value(job, 0, c));
		} else {
			char key[32];
			cJSON_AddNullToObject(o, name);
			snprintf(key, sizeof(key), "%s_text", name);
			cJSON_AddItemToObject(o, key,
					      rowjson_string_n(v, API_DOC_MAX));
		}
		if (doc) {
			char key[32];
			snprintf(key, sizeof(key), "%s_truncated", name);
			cJSON_AddBoolToObject(o, key, len > API_DOC_MAX);
			snprintf(key, sizeof(key), "%s_bytes", name);
			cJSON_AddNumberToObject(o, key, (double)len);
		}
	}
	return o;
}

/* The lease of a running job, else null. */
static cJSON *
lease_json(const struct db_rows *job)
{
	int s = column(job, "state");
	if (strcmp(db_rows_text(job, 0, s), "running") != 0)
		return cJSON_CreateNull();
	cJSON *o = cJSON_CreateObject();
	cJSON_AddItemToObject(o, "holder",
			      rowjson_value(job, 0, column(job, "locked_by")));
	cJSON_AddItemToObject(
		o, "locked_until",
		rowjson_value(job, 0, column(job, "locked_until")));
	cJSON_AddItemToObject(
		o, "token", rowjson_value(job, 0, column(job, "lease_token")));
	return o;
}

/* job/ID/payload, job/ID/result: the whole document, as a download. */
static void
job_download(struct db_conn *db, const char *id, const char *what,
	     struct web_response *out)
{
	/* Borrowed by out until the next request of this thread. */
	static _Thread_local char disposition[96];
	const char *p[] = {id};
	struct db_rows *res = api_query(
		db, out,
		strcmp(what, "payload") == 0
			? "select payload from pgjob.all_jobs where id = $1"
			: "select result from pgjob.all_jobs where id = $1",
		1, p);
	if (!res)
		return;
	if (db_rows_count(res) == 0 || !db_rows_value(res, 0, 0)) {
		db_rows_free(res);
		web_response_error(
			out, 404,
			strcmp(what, "payload") == 0
				? "no such job"
				: "no such job, or it has no result");
		return;
	}
	web_response_json(out, rowjson_value(res, 0, 0));
	db_rows_free(res);
	snprintf(disposition, sizeof(disposition),
		 "attachment; filename=\"job-%s-%s.json\"", id, what);
	out->content_disposition = disposition;
}

/* Reads what job/ID shows besides the row: attempts, parents, children. */
static int
job_related(struct db_conn *db, const char *id, cJSON *o,
	    struct web_response *out)
{
	static const struct {
		const char *key, *sql;
	} parts[] = {
		{"attempts", ATTEMPTS_SQL},
		{"parents", "select p.id, p.state, p.step"
			    " from pgjob.job_deps d"
			    " join pgjob.jobs p on p.id = d.parent"
			    " where d.child = $1 order by p.id"},
		/* A batch's parent can have many: the first 1000. */
		{"children",
		 "select c.id, c.state, c.step"
		 " from pgjob.job_deps d"
		 " join pgjob.jobs c on c.id = d.child"
		 " where d.parent = $1 order by d.child limit 1000"},
		/* Its timeline (sql/schema/functions/job_timeline.sql). */
		{"timeline", "select at, event, attempt, worker, wait_ms,"
			     " detail from pgjob.job_timeline($1)"},
	};
	const char *p[] = {id};
	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
		struct db_rows *res = api_query(db, out, parts[i].sql, 1, p);
		if (!res)
			return -1;
		cJSON_AddItemToObject(o, parts[i].key, api_rows_array(res));
		db_rows_free(res);
	}
	return 0;
}

void
api_job_get(struct db_conn *db, const char *rest, const struct web_query *q,
	    struct web_response *out)
{
	char id[24];
	const char *slash = strchr(rest, '/');
	char *num =
		slash ? xstrndup(rest, (size_t)(slash - rest)) : xstrdup(rest);
	int bad = api_parse_id(num, id, sizeof(id)) < 0;
	free(num);
	if (bad || (slash && strcmp(slash, "/payload") != 0 &&
		    strcmp(slash, "/result") != 0)) {
		web_response_error(out, 404, "no such job");
		return;
	}
	if (slash) {
		job_download(db, id, slash + 1, out);
		return;
	}
	const char *p[] = {id};
	/* trace_id: the trace's id alone, which the page's fields show and a
	 * tracing tool searches by (docs/tracing.md). */
	struct db_rows *job =
		api_query(db, out,
			  "select j.*, substr(j.traceparent, 4, 32) as trace_id"
			  " from pgjob.all_jobs j where j.id = $1",
			  1, p);
	if (!job)
		return;
	if (db_rows_count(job) == 0) {
		db_rows_free(job);
		web_response_error(out, 404, "no such job");
		return;
	}
	cJSON *o = cJSON_CreateObject();
	cJSON_AddItemToObject(o, "job", job_json(job));
	cJSON_AddItemToObject(o, "lease", lease_json(job));
	cJSON_AddItemToObject(o, "enqueue_command", enqueue_command(job));
	db_rows_free(job);
	if (job_related(db, id, o, out) < 0) {
		cJSON_Delete(o);
		return;
	}
	web_response_json(out, o);
}

/* The next batch b of a filter's matches below cursor $10 in the states
 * that action $11 takes (pgjob.action_states()), newest first, at most
 * $12: how many, the lowest, and (after this) how many the action
 * changed. */
#define BATCH_SQL(acted)                                                       \
	"with b as (select id from pgjob.all_jobs where" FILTER_WHERE          \
	"   and ($10::bigint is null or id < $10::bigint)"                     \
	"   and state = any(pgjob.action_states($11))"                         \
	"  order by id desc limit $12::int)"                                   \
	" select (select count(*) from b), (select min(id) from b), " acted

/*
 * The actions are the schema's functions (sql/upgrade/033_job_actions.sql),
 * which `pgjob retry` and `pgjob cancel` call too: the rules of each, which
 * states it takes and what it leaves as it is, are there.  A request acts
 * on its ids, or on a filter's matches a batch at a time, in one statement
 * each (one round trip and one transaction: the statements below show it,
 * and no test counts them), and answers how many jobs the action changed.
 * From the console, cancel leaves running jobs alone (a bulk action would
 * stop work in flight by surprise) unless a job's page asks with
 * "stop_running", after its own confirmation.
 */
static const struct {
	const char *name;
	/* $1 the ids (bigint[] text), $2 stop_running: how many acted on. */
	const char *ids_sql;
	/* BATCH_SQL: a batch of a filter's matches. */
	const char *batch_sql;
} actions[] = {
	{"retry",
	 "select count(*) filter (where state is not null)"
	 " from pgjob.retry_jobs($1::bigint[])",
	 BATCH_SQL("(select count(*) from pgjob.retry_jobs("
		   "array(select id from b)) r where r.state is not null)")},
	{"cancel",
	 "select count(*) filter (where state is not null)"
	 " from pgjob.cancel_jobs($1::bigint[], $2::boolean)",
	 BATCH_SQL("(select count(*) from pgjob.cancel_jobs("
		   "array(select id from b)) r where r.state is not null)")},
	{"delete",
	 "select count(*) filter (where deleted)"
	 " from pgjob.delete_jobs($1::bigint[])",
	 BATCH_SQL("(select count(*) from pgjob.delete_jobs("
		   "array(select id from b)) r where r.deleted)")},
};

/* The action named name; -1 for none. */
static int
action_of(const char *name)
{
	for (size_t i = 0; i < sizeof(actions) / sizeof(actions[0]); i++)
		if (strcmp(name, actions[i].name) == 0)
			return (int)i;
	return -1;
}

/* The ids of body's "ids" as "{1,2}" (caller frees); NULL when it is not
 * an array of 1 to BATCH job ids. */
static char *
ids_text(const cJSON *ids)
{
	const cJSON *it;
	int n = 0;
	if (!cJSON_IsArray(ids))
		return NULL;
	struct buf b = {0};
	buf_append(&b, "{", 1);
	cJSON_ArrayForEach(it, ids)
	{
		double v = cJSON_IsNumber(it) ? it->valuedouble : 0;
		if (v < 1 || v > 9007199254740991.0 ||
		    v != (double)(long long)v || ++n > BATCH) {
			buf_free(&b);
			return NULL;
		}
		buf_appendf(&b, "%s%lld", n > 1 ? "," : "", (long long)v);
	}
	buf_append(&b, "}", 1);
	if (n == 0) {
		buf_free(&b);
		return NULL;
	}
	return b.data;
}

/* How many of a filter's matches are in the states that action $11 takes,
 * and the newest of them. */
static const char TAKES_SQL[] =
	"select count(*), max(id) + 1 from pgjob.all_jobs where" FILTER_WHERE
	"   and ($10::bigint is null or id < $10::bigint)"
	"   and state = any(pgjob.action_states($11))";

/*
 * Every match of the filter in the states the action takes, a batch per
 * statement, from the newest down, and never more than expect, the number
 * the operator confirmed: when more would be taken now (asked at the
 * first step only), nothing is done and the answer is 409 with that
 * count, to be confirmed again.  Jobs
 * enqueued meanwhile are not among them.  With a step (the page's
 * "limit"), it stops after about that many and sets next to where to go
 * on (as "before", expecting what is left), so that a page can show how
 * far an action on a million jobs has come; before is "" or such a cursor.
 */
static int
act_filter(struct db_conn *db, int action, const struct filter *f,
	   long long expect, const char *before, long long step,
	   long long *affected, long long *next, bool *yielded,
	   struct web_response *out)
{
	const char *p[12];
	char cursor[24] = "", limit[16];
	struct db_rows *res;
	api_filter_params(f, p);
	snprintf(cursor, sizeof(cursor), "%s", before);
	p[10] = actions[action].name;
	/*
	 * The count only without a cursor: a step from one (before) takes
	 * no more than what is left of the count confirmed (expect, as the
	 * page sends it), and counting what is left below the cursor at
	 * every step read the matches again and again (for a million jobs
	 * in steps of 5,000: a hundred million rows).  The page's first
	 * step starts from the count's "below" (api_count.c), which counted
	 * in windows what one statement here could not count within
	 * statement_timeout on ten million jobs.
	 */
	if (!*cursor) {
		p[9] = NULL;
		res = api_query(db, out, TAKES_SQL, 11, p);
		if (!res)
			return -1;
		long long takes = atoll(db_rows_text(res, 0, 0));
		snprintf(cursor, sizeof(cursor), "%s", db_rows_text(res, 0, 1));
		db_rows_free(res);
		if (takes > expect) {
			cJSON *o = cJSON_CreateObject();
			cJSON_AddStringToObject(
				o, "error",
				"more jobs match than were confirmed: "
				"confirm the new count");
			cJSON_AddNumberToObject(o, "count", (double)takes);
			web_response_json(out, o);
			out->status = 409;
			return -1;
		}
		if (takes == 0)
			return 0;
	}
	for (;;) {
		long long left = expect - *affected;
		if (left <= 0)
			return 0;
		if (step && *affected >= step) {
			*next = atoll(cursor);
			return 0;
		}
		long long lim = left < ACT_BATCH ? left : (long long)ACT_BATCH;
		if (step && step - *affected < lim)
			lim = step - *affected;
		snprintf(limit, sizeof(limit), "%lld", lim);
		p[11] = limit;
		p[9] = *cursor ? cursor : NULL;
		double t0 = now_ms();
		res = api_query(db, out, actions[action].batch_sql, 12, p);
		if (!res)
			return -1;
		if (bulk_yield(db, now_ms() - t0))
			*yielded = true;
		long long n = atoll(db_rows_text(res, 0, 0));
		if (n > 0)
			snprintf(cursor, sizeof(cursor), "%s",
				 db_rows_text(res, 0, 1));
		*affected += atoll(db_rows_text(res, 0, 2));
		db_rows_free(res);
		if (n < atoll(limit))
			return 0;
	}
}

/* A bulk action's "expect": an integer from 0; -1 when it is not. */
static long long
expect_of(const cJSON *body)
{
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(body, "expect");
	double v = cJSON_IsNumber(e) ? e->valuedouble : -1;

	if (v < 0 || v > 9007199254740991.0 || v != (double)(long long)v)
		return -1;
	return (long long)v;
}

void
api_jobs_act(struct db_conn *db, const cJSON *body, const char *action,
	     struct web_response *out)
{
	const cJSON *ids = cJSON_GetObjectItemCaseSensitive(body, "ids");
	const cJSON *fo = cJSON_GetObjectItemCaseSensitive(body, "filter");
	const cJSON *stop =
		cJSON_GetObjectItemCaseSensitive(body, "stop_running");
	long long affected = 0, expect, step = 0, next = 0;
	char before[24] = "";
	bool yielded = false;
	bool stop_running = cJSON_IsTrue(stop);
	int act = action_of(action);
	struct db_rows *res;
	int rc;

	if (act < 0) {
		web_response_error(out, 404, "no such action");
		return;
	}
	if ((ids != NULL) == (fo != NULL)) {
		web_response_error(out, 400,
				   "expected {\"ids\": [job ids]} or "
				   "{\"filter\": {...}, \"expect\": n}");
		return;
	}
	if (stop &&
	    (!cJSON_IsBool(stop) || strcmp(action, "cancel") != 0 || !ids)) {
		web_response_error(out, 400,
				   "stop_running: true or false, in a cancel "
				   "by ids only");
		return;
	}
	if (ids) {
		char *text = ids_text(ids);
		if (!text) {
			web_response_error(out, 400,
					   "ids: 1 to 10000 job ids (positive "
					   "integers)");
			return;
		}
		const char *p[] = {text, stop_running ? "true" : "false"};
		res = api_query(db, out, actions[act].ids_sql,
				strcmp(action, "cancel") == 0 ? 2 : 1, p);
		free(text);
		if (!res)
			return;
		affected = atoll(db_rows_text(res, 0, 0));
		db_rows_free(res);
		rc = 0;
	} else {
		struct filter f;
		if (!cJSON_IsObject(fo)) {
			web_response_error(out, 400,
					   "filter: an object, as the query "
					   "of /api/jobs");
			return;
		}
		const cJSON *st =
			cJSON_GetObjectItemCaseSensitive(body, "limit");
		const cJSON *bf =
			cJSON_GetObjectItemCaseSensitive(body, "before");
		if ((st && (!cJSON_IsNumber(st) || st->valuedouble < 1 ||
			    st->valuedouble > 1e9)) ||
		    (bf && (!cJSON_IsString(bf) ||
			    api_parse_id(bf->valuestring, before,
					 sizeof(before)) < 0))) {
			web_response_error(out, 400,
					   "limit: a number of jobs from 1; "
					   "before: a job id, as a string");
			return;
		}
		step = st ? (long long)st->valuedouble : 0;
		if ((expect = expect_of(body)) < 0) {
			web_response_error(out, 400,
					   "expect: the number of jobs "
					   "confirmed, an integer from 0");
			return;
		}
		if (api_filter_strict(fo, out) < 0 ||
		    api_filter_read(&f, api_json_get, (void *)fo, out) < 0 ||
		    api_filter_times(db, &f, out) < 0)
			return;
		rc = act_filter(db, act, &f, expect, before, step, &affected,
				&next, &yielded, out);
	}
	if (rc < 0)
		return;
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "affected", (double)affected);
	if (next)
		cJSON_AddNumberToObject(o, "next", (double)next);
	else
		cJSON_AddNullToObject(o, "next");
	if (fo)
		cJSON_AddBoolToObject(o, "yielded", yielded);
	web_response_json(out, o);
}
