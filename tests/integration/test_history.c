/*
 * Integration: the history per queue and kind (sql/schema/tables/history.sql,
 * src/worker/history.c).  Real pgjobd workers run jobs whose wait and run
 * times are known (an exec `sleep`, jobs due seconds before the daemon
 * starts): their heartbeats write counts and histograms, and
 * pgjob.history(), pgjob.history_summary(), `pgjob stats` and the
 * console's /api/history say them, the percentiles within a bucket; the
 * pruning duty rolls minutes past 24 hours up to hours and deletes hours
 * past 30 days; a job's timeline (pgjob.job_timeline(), `pgjob show`, the
 * console's job page) lists its events in order; 250 kinds count as 200
 * and "(other)".
 */
#include "testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/util.h"
#include "db/db.h"
#include "web/api.h"

/* GET path?query on a connection of its own, as the console's. */
static cJSON *
api_get(const char *ci, const char *path, const char *query, int status)
{
	struct db_conn *db = t_web_db(ci);
	cJSON *j = t_web_get(db, path, query, status);
	db_close(db);
	return j;
}

static const char *
config(const char *ci)
{
	return t_config(
		"hist", ci,
		"workers: 1\nlease: 3s\n"
		"handlers:\n"
		"  slow: { type: exec, command: [\"/bin/sleep\", \"0.3\"] }\n"
		"  bad: { type: exec, command: [\"/bin/false\"],"
		" max_attempts: 2, backoff: { base: 100ms, max: 100ms } }\n");
}

/* The summary row of kind k over the last hour, one column. */
#define SUMMARY(col, k)                                                        \
	"select " col " from pgjob.history_summary(interval '1 hour')"         \
	" where kind = '" k "'"

static void
test_counts_and_percentiles(void **state)
{
	char *ci = t_db_migrated("t_history");
	PGconn *c = t_connect(ci);
	/* 10 slow jobs (300 ms each) due 5 s before any worker runs, so
	 * each waits at least 5 s; 2 bad ones: 4 failed attempts, 2 of
	 * them retried. */
	t_exec(c, "select pgjob.enqueue('slow') from generate_series(1, 10)");
	long long bad = t_long(c, "select pgjob.enqueue('bad')");
	t_exec(c, "select pgjob.enqueue('bad')");
	t_exec(c, "update pgjob.jobs set run_at = now() - interval '5 seconds'"
		  " where kind = 'slow'");
	pid_t d = t_daemon(config(ci), 0, "hist");
	t_wait_ended(c, 12, 60);
	t_wait_until(c, 30,
		     "select coalesce(sum(done), 0) = 10"
		     " and coalesce(sum(failed), 0) = 4"
		     " from pgjob.history_minutes");
	t_assert_value(
		c, "10/0/0",
		SUMMARY("concat_ws('/', done, failed, retried)", "slow"));
	t_assert_value(c, "0/4/2",
		       SUMMARY("concat_ws('/', done, failed, retried)", "bad"));
	/* Every attempt in the histograms, once: 10 and 4 run times; a
	 * wait for each start. */
	t_assert_value(c, "10/10",
		       "select concat_ws('/', (select sum(e) from"
		       "  pgjob.history_minutes, unnest(run_ms) e"
		       "  where kind = 'slow'), (select sum(e) from"
		       "  pgjob.history_minutes, unnest(wait_ms) e"
		       "  where kind = 'slow'))");
	t_assert_value(c, "4",
		       "select sum(e) from pgjob.history_minutes,"
		       " unnest(run_ms) e where kind = 'bad'");
	/* The percentiles are the upper bounds of their buckets: at least
	 * what was measured, less than a factor 1.42 above a bucket's
	 * lower bound. */
	t_assert_value(c, "t",
		       SUMMARY("run_p50 >= 300 and run_p50 <= run_p95"
			       " and run_p95 <= run_p99",
			       "slow"));
	t_assert_value(
		c, "t",
		SUMMARY("wait_p50 >= 5000 and wait_p99 >= wait_p50", "slow"));
	/* A bound is a power of the square root of 2. */
	t_assert_value(c, "t",
		       SUMMARY("abs(log(2, run_p50::numeric) * 2"
			       " - round(log(2, run_p50::numeric) * 2)) < 0.01",
			       "slow"));

	/* The series: one row per minute, oldest first, the counts summed. */
	t_assert_value(c, "60/10/4/2",
		       "select concat_ws('/', count(*), sum(done), sum(failed),"
		       " sum(retried)) from pgjob.history(null, null,"
		       " interval '1 hour')");
	/* A minute where nothing ran has no percentile (not the last
	 * bucket's bound). */
	t_assert_value(c, "t",
		       "select count(run_p50) between 1 and 2"
		       " and count(wait_p99) between 1 and 2"
		       " from pgjob.history(null, null, interval '1 hour')");
	t_assert_value(c, "10",
		       "select sum(done) from pgjob.history('default', 'slow',"
		       " interval '24 hours', interval '10 minutes')");
	t_assert_value(c, "0",
		       "select sum(done) from pgjob.history('nosuch', null,"
		       " interval '1 hour')");
	char *m = t_expect_sqlstate(c, "22023",
				    "select * from pgjob.history(null, null,"
				    " interval '1 hour', interval '1 second')");
	free(m);

	/* pgjob stats, as a table and as JSON. */
	struct t_run r;
	t_pgjob(&r, ci, "stats", NULL);
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, "WAIT P95"));
	assert_non_null(strstr(r.out, "slow"));
	t_run_free(&r);
	t_pgjob(&r, ci, "stats", "--range", "7d", "--json", NULL);
	assert_int_equal(r.status, 0);
	cJSON *j = cJSON_Parse(r.out);
	assert_non_null(j);
	assert_int_equal(cJSON_GetArraySize(j), 2);
	const cJSON *row = cJSON_GetArrayItem(j, 1); /* bad < slow */
	assert_string_equal(cJSON_GetObjectItem(row, "kind")->valuestring,
			    "slow");
	assert_int_equal(cJSON_GetObjectItem(row, "done")->valuedouble, 10);
	assert_true(cJSON_GetObjectItem(row, "run_p50")->valuedouble >= 300);
	cJSON_Delete(j);
	t_run_free(&r);
	t_pgjob(&r, ci, "stats", "--range", "2h", NULL);
	assert_int_equal(r.status, 2);
	t_run_free(&r);

	/* The console's history. */
	j = api_get(ci, "history", "queue=default&range=1h", 200);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "series")),
			 60);
	assert_int_equal(cJSON_GetObjectItem(j, "step_seconds")->valuedouble,
			 60);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "kinds")),
			 2);
	cJSON_Delete(j);
	j = api_get(ci, "history", "kind=bad&range=24h", 200);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "kinds")),
			 1);
	cJSON_Delete(j);
	cJSON_Delete(api_get(ci, "history", "range=1y", 400));

	/* The timeline of a bad job: enqueued, then two attempts, each
	 * started and ended, in order, with the wait before each start. */
	t_assert_value(c, "enqueued,started,ended,started,ended",
		       "select string_agg(event, ',')"
		       " from pgjob.job_timeline(%lld)",
		       bad);
	t_assert_value(c, "2/t",
		       "select concat_ws('/', count(wait_ms),"
		       " bool_and(wait_ms >= 0))"
		       " from pgjob.job_timeline(%lld) where event = 'started'",
		       bad);
	t_assert_value(c, "t",
		       "select array_agg(at) = array_agg(at order by at)"
		       " from pgjob.job_timeline(%lld)",
		       bad);
	char path[64];
	snprintf(path, sizeof(path), "job/%lld", bad);
	j = api_get(ci, path, NULL, 200);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "timeline")),
			 5);
	cJSON_Delete(j);
	char id[24];
	snprintf(id, sizeof(id), "%lld", bad);
	t_pgjob(&r, ci, "show", id, NULL);
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, "timeline"));
	assert_non_null(strstr(r.out, "started"));
	t_run_free(&r);

	t_stop_clean(d);
	PQfinish(c);
	free(ci);
}

/*
 * The pruning duty at a worker's start: two minutes of an hour 25 hours
 * ago become one row of that hour, their counts and histograms summed
 * (bucket by bucket); an hour 31 days ago is deleted; minutes of the
 * last 24 hours stay as they are.
 */
static void
test_rollup_and_retention(void **state)
{
	char *ci = t_db_migrated("t_history_prune");
	PGconn *c = t_connect(ci);
	t_exec(c, "insert into pgjob.history_minutes"
		  " (at, queue, kind, done, failed, retried, wait_ms, run_ms)"
		  " values (date_trunc('hour', now() - interval '25 hours'),"
		  "  'q', 'k', 3, 1, 1, '{1,2}', '{0,0,5}'),"
		  " (date_trunc('hour', now() - interval '25 hours')"
		  "  + interval '7 minutes', 'q', 'k', 4, 0, 0, '{0,1,1}',"
		  "  '{1}'),"
		  " (date_trunc('minute', now() - interval '2 hours'),"
		  "  'q', 'k', 9, 0, 0, '{}', '{}')");
	t_exec(c, "insert into pgjob.history_hours"
		  " (at, queue, kind, done) values"
		  " (date_trunc('hour', now() - interval '31 days'), 'q', 'k', "
		  "1)");
	pid_t d = t_daemon(config(ci), 0, "hist_prune");
	t_wait_until(c, 30, "select count(*) = 1 from pgjob.history_minutes");
	t_assert_value(c, "1|7/1/1|{1,3,1}|{1,0,5}",
		       "select concat_ws('|', count(*), string_agg(concat_ws("
		       " '/', done, failed, retried), ''),"
		       " string_agg(wait_ms::text, ''),"
		       " string_agg(run_ms::text, ''))"
		       " from pgjob.history_hours");
	t_assert_value(c, "t",
		       "select at = date_trunc('hour', now()"
		       " - interval '25 hours') from pgjob.history_hours");
	/* The 7-day view reads the hour and the minute: 16 done. */
	t_assert_value(c, "16",
		       "select sum(done) from pgjob.history_summary("
		       " interval '7 days')");
	t_stop_clean(d);
	/* By hand, with a clock a month on: the hours go, and the last
	 * minute becomes an hour (which the next prune would delete: one
	 * statement does not see the rows it inserts). */
	t_assert_value(
		c, "1",
		"select pgjob.history_prune(now() + interval '32 days')");
	t_assert_value(c, "0/1",
		       "select (select count(*) from pgjob.history_minutes)"
		       " || '/' || (select count(*) from pgjob.history_hours)");
	PQfinish(c);
	free(ci);
}

/*
 * A flood of kinds: 250 handlers, a job of each.  A worker counts at most
 * 200 named (queue, kind) pairs a minute; the others go into the queue's
 * "(other)", so that no job goes uncounted and the table cannot grow with
 * the kinds an application makes up.
 */
static void
test_many_kinds_capped(void **state)
{
	char *ci = t_db_migrated("t_history_kinds");
	PGconn *c = t_connect(ci);
	size_t len = 0, cap = 64 * 1024;
	char *body = xmalloc(cap);
	len += (size_t)snprintf(body + len, cap - len,
				"workers: 1\nlease: 3s\nhandlers:\n");
	for (int i = 0; i < 250; i++)
		len += (size_t)snprintf(
			body + len, cap - len,
			"  k%03d: { type: exec, command: [\"/bin/true\"] }\n",
			i);
	t_exec(c, "select pgjob.enqueue(format('k%%s', lpad(i::text, 3, '0')))"
		  " from generate_series(0, 249) i");
	pid_t d = t_daemon(t_config("hist_kinds", ci, body), 0, "hist_kinds");
	t_wait_ended(c, 250, 60);
	t_wait_until(c, 30,
		     "select coalesce(sum(done), 0) = 250"
		     " from pgjob.history_minutes");
	/* Per minute: 200 named pairs at most; all in one minute, the 50
	 * others in "(other)". */
	t_assert_value(
		c, "t",
		"select bool_and(n <= 200)"
		" and (count(*) > 1 or bool_and(o = 50 and n = 200))"
		" from (select at,"
		"  count(*) filter (where kind <> '(other)') as n,"
		"  coalesce(sum(done) filter (where kind = '(other)'), 0)"
		"   as o"
		" from pgjob.history_minutes group by at) x");
	t_stop_clean(d);
	free(body);
	PQfinish(c);
	free(ci);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_counts_and_percentiles),
		cmocka_unit_test(test_rollup_and_retention),
		cmocka_unit_test(test_many_kinds_capped),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
