/*
 * api_count: /api/jobs/count, how many jobs match a filter (see
 * api_jobs.h; the answer is in docs/console.md, "The API").
 *
 * A page that shows how many match asks with estimate=1 at each refresh:
 * past EXACT_MAX rows in the jobs' tables, the planner's estimate, said
 * so.  A bulk action's confirmation asks for the exact count.  Where a
 * partial index serves the filter, that is one statement along it, when
 * it ends within WHOLE_MS (else the request answers none counted yet).  Where
 * none does (a kind, a key, text, a time range, finished states) or that one
 * did not end, every row must be read, which for ten million jobs takes seconds
 * and could pass pgjob web's 5 s statement_timeout (api.c), failing the action
 * on the very filters that match the most.  So such a count goes down the ids
 * in windows of COUNT_WINDOW, one statement each, until it has spent
 * COUNT_BUDGET_MS, and answers how many it found so far and where to go
 * on ("next"); the page asks again from there and adds, showing its
 * progress, and the total is exact (each window as it was when read).
 * "below" is where the count started, the cursor a bulk action's first
 * step is given, so that it takes the jobs that were counted and none
 * enqueued since.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"
#include "db/rowjson.h"
#include "db/sqlstate.h"
#include "web/api_filter.h"
#include "web/api_jobs.h"
#include "web/api_response.h"

/* Rows in the jobs' tables past which /api/jobs/count?estimate=1 gives
 * the planner's estimate rather than count every match. */
#define EXACT_MAX 300000
/* Ids per statement of a count that no index serves: tens of ms, read
 * from disk, far within statement_timeout. */
#define COUNT_WINDOW 40000
/* A request counts one window more only while it has spent less: each
 * answers within the console's 100 ms, its progress shown. */
#define COUNT_BUDGET_MS 40
/* A count along an index is tried in one statement for this long (its
 * statement_timeout, in ms), alone in its request: a few dead jobs among
 * millions take a millisecond, where windows would read every id; a
 * million scheduled ones (read from the rows: the state is in no index)
 * take seconds, and go in windows from the next request. */
#define WHOLE_MS "70"

/* The matches of one range of ids, [$11, $10) ($11 null: from the
 * first). */
static const char COUNT_SQL[] =
	"select count(*) from pgjob.all_jobs where" FILTER_WHERE
	"  and id < $10::bigint and ($11::bigint is null or id >= $11::bigint)";
static const char COUNT_RANGE_SQL[] =
	"select count(*) from pgjob.all_jobs where" FILTER_WHERE_RANGE
	"  and id < $10::bigint and ($11::bigint is null or id >= $11::bigint)";

static double
now_ms(void)
{
	return (double)util_now_us() / 1e3;
}

/* The ids per window, and whether a request reads one window only: the
 * environment's PGJOBD_WEB_COUNT_WINDOW, when set, lowers it and makes
 * each request read one, so that a test takes the path of ten million
 * jobs (a count over many requests) on a few thousand. */
static long long
count_window(int *one)
{
	const char *e = getenv("PGJOBD_WEB_COUNT_WINDOW");
	long long w = e ? atoll(e) : 0;
	*one = w > 0 && w < COUNT_WINDOW;
	return *one ? w : COUNT_WINDOW;
}

/* The planner's estimate of the rows of the count's statement; -1 when
 * its plan cannot be read, -2 on an error (out filled). */
static double
estimate(struct db_conn *db, const char *const *p, struct web_response *out)
{
	return api_plan_rows(
		db, out,
		"explain (format json) select 1 from pgjob.all_jobs"
		" where" FILTER_WHERE,
		9, p);
}

/* The planner's rows of the jobs' tables; -1 (out filled). */
static double
table_rows(struct db_conn *db, struct web_response *out)
{
	struct db_rows *res =
		api_query(db, out,
			  "select coalesce(sum(greatest(reltuples, 0)), 0)"
			  " from pg_class where oid in"
			  " ('pgjob.jobs'::regclass, "
			  "'pgjob.jobs_done'::regclass)",
			  0, NULL);
	if (!res)
		return -1;
	double size = atof(db_rows_text(res, 0, 0));
	db_rows_free(res);
	return size;
}

/* The matches in [low, below) (low 0: from the first), ranged: by the
 * primary key's range; -1 (out filled). */
static long long
count_range(struct db_conn *db, const char **p, int ranged, long long below,
	    long long low, struct web_response *out)
{
	char b[24], l[24];
	snprintf(b, sizeof(b), "%lld", below);
	snprintf(l, sizeof(l), "%lld", low);
	p[9] = b;
	p[10] = low ? l : NULL;
	struct db_rows *res =
		api_query(db, out, ranged ? COUNT_RANGE_SQL : COUNT_SQL, 11, p);
	if (!res)
		return -1;
	long long n = atoll(db_rows_text(res, 0, 0));
	db_rows_free(res);
	return n;
}

/* The matches below below in one statement, if it ends within WHOLE_MS:
 * 1 (*n set), 0 when it did not, -1 (out filled). */
static int
count_whole(struct db_conn *db, const char **p, long long below, long long *n,
	    struct web_response *out)
{
	char b[24], *err = NULL;
	snprintf(b, sizeof(b), "%lld", below);
	p[9] = b;
	p[10] = NULL;
	if (db_exec(db, "begin; set local statement_timeout = '" WHOLE_MS "ms'",
		    &err) < 0) {
		api_fail(db, out, err);
		free(err);
		return -1;
	}
	struct db_rows *res = db_query(db, COUNT_SQL, 11, p, &err);
	if (!res) {
		int late = db_connected(db) &&
			   sqlstate_is(err, SQLSTATE_QUERY_CANCELED);
		db_rollback(db);
		if (!late)
			api_fail(db, out, err);
		free(err);
		return late ? 0 : -1;
	}
	*n = atoll(db_rows_text(res, 0, 0));
	db_rows_free(res);
	if (db_exec(db, "commit", &err) < 0) {
		api_fail(db, out, err);
		free(err);
		return -1;
	}
	return 1;
}

void
api_jobs_count(struct db_conn *db, const char *rest, const struct web_query *q,
	       struct web_response *out)
{
	struct filter f;
	const char *p[11];
	const char *e = q->get(q->ctx, "estimate");
	const char *b = q->get(q->ctx, "before");
	int est = e && strcmp(e, "1") == 0;
	char before[24] = "";

	if (api_filter_read(&f, q->get, q->ctx, out) < 0 ||
	    api_filter_times(db, &f, out) < 0)
		return;
	if (b && *b && api_parse_id(b, before, sizeof(before)) < 0) {
		web_response_error(out, 400, "before: not a job id");
		return;
	}
	api_filter_params(&f, p);
	if (est) {
		double size = table_rows(db, out), guess;
		if (size < 0)
			return;
		if (size > EXACT_MAX) {
			if ((guess = estimate(db, p, out)) < -1)
				return;
			if (guess >= 0) {
				cJSON *o = cJSON_CreateObject();
				cJSON_AddNumberToObject(
					o, "count", (double)(long long)guess);
				cJSON_AddTrueToObject(o, "estimate");
				web_response_json(out, o);
				return;
			}
		}
	}
	struct db_rows *res = api_query(
		db, out, "select min(id), max(id) from pgjob.all_jobs", 0,
		NULL);
	if (!res)
		return;
	long long min = atoll(db_rows_text(res, 0, 0));
	long long below =
		*before ? atoll(before) : atoll(db_rows_text(res, 0, 1)) + 1;
	db_rows_free(res);

	long long n = 0, next = 0;
	double t0 = now_ms();
	int whole = 0;
	/* A page's count (at most EXACT_MAX rows): one statement; a count
	 * along an index from the first request: one if it is quick. */
	if (est) {
		if ((n = count_range(db, p, 0, below, 0, out)) < 0)
			return;
		whole = 1;
	} else if (!*before && api_filter_indexed(&f)) {
		if ((whole = count_whole(db, p, below, &n, out)) < 0)
			return;
		/* Too long: none counted, the windows from next. */
		if (!whole)
			next = below;
	}
	if (!whole && !next) {
		int one;
		long long size = count_window(&one), top = below;
		for (;;) {
			long long low = top - size > min ? top - size : 0;
			long long k = count_range(db, p, 1, top, low, out);
			if (k < 0)
				return;
			n += k;
			if (!low)
				break;
			top = low;
			if (one || now_ms() - t0 >= COUNT_BUDGET_MS) {
				next = low;
				break;
			}
		}
	}
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "count", (double)n);
	cJSON_AddFalseToObject(o, "estimate");
	if (next)
		cJSON_AddNumberToObject(o, "next", (double)next);
	else
		cJSON_AddNullToObject(o, "next");
	cJSON_AddNumberToObject(o, "below", (double)below);
	web_response_json(out, o);
}
