/*
 * Integration: pgjob.enqueue_many() in SQL and `pgjob enqueue --file` on
 * the command line, against a freshly migrated database.  Each test uses
 * kinds of its own, so counts by kind stay exact.
 */
#include "testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *ci;

static int
setup(void **state)
{
	ci = t_db_migrated("t_enqueue_many");
	return 0;
}

static int
teardown(void **state)
{
	free(ci);
	return 0;
}

static long long
count_kind(PGconn *c, const char *kind_like)
{
	return t_long(
		c, "select count(*) from pgjob.all_jobs where kind like '%s'",
		kind_like);
}

static void
test_many_order_and_options(void **state)
{
	PGconn *c = t_connect(ci);
	/* The ids come back in the order of the elements, one each. */
	t_exec(c, "create temp table m_ids as select * from "
		  "pgjob.enqueue_many('[{\"kind\": \"m_a\"}, {\"kind\": "
		  "\"m_b\"}, {\"kind\": \"m_c\"}]') with ordinality e(id, n)");
	t_assert_value(
		c, "m_a,m_b,m_c|3",
		"select string_agg(j.kind, ',' order by e.n) || '|' || "
		"count(*) from m_ids e join pgjob.all_jobs j on j.id = e.id");

	/* Every key, and the defaults of the ones left out or null. */
	long long id = t_long(
		c, "select id from pgjob.enqueue_many('[{\"kind\": \"m_all\", "
		   "\"payload\": {\"to\": \"a@b\"}, \"queue\": \"slow\", "
		   "\"run_at\": \"2030-01-02T03:04:05Z\", \"priority\": -5, "
		   "\"max_attempts\": 3, \"unique_key\": \"m-u\", "
		   "\"ordering_key\": \"tenant-7\", \"limit_key\": \"acct-1\", "
		   "\"cost\": 4}]') id");
	t_assert_job(c, id,
		     "concat_ws('|', kind, payload->>'to', queue, "
		     "run_at = '2030-01-02 03:04:05+00', priority, "
		     "max_attempts, unique_key, ordering_key, limit_key, cost, "
		     "state)",
		     "m_all|a@b|slow|t|-5|3|m-u|tenant-7|acct-1|4|available");
	id = t_long(c, "select id from pgjob.enqueue_many('[{\"kind\": "
		       "\"m_def\", \"payload\": null, \"queue\": null, "
		       "\"run_at\": null}]') id");
	t_assert_job(c, id,
		     "concat_ws('|', payload::text, queue, run_at <= now(), "
		     "priority, coalesce(max_attempts::text, 'null'), cost, "
		     "unique_key is null)",
		     "{}|default|t|0|null|1|t");

	/* An empty array enqueues nothing and returns no row. */
	t_assert_value(c, "0", "select count(*) from pgjob.enqueue_many('[]')");
	PQfinish(c);
}

static void
test_many_unique_keys(void **state)
{
	PGconn *c = t_connect(ci);
	long long held = t_long(c, "select pgjob.enqueue('mu_old', '{}', "
				   "unique_key => 'mu-1')");
	/* Against a row: the holder's id.  Within the array: the first
	 * element with the key wins, the later ones get its id. */
	char *ids = t_value(
		c,
		"select string_agg(id::text, ',' order by n) from "
		"pgjob.enqueue_many('[{\"kind\": \"mu_new\", \"unique_key\": "
		"\"mu-1\"}, {\"kind\": \"mu_new\", \"unique_key\": "
		"\"mu-2\"}, {\"kind\": \"mu_new\", \"unique_key\": "
		"\"mu-2\"}, {\"kind\": \"mu_new\"}]') with ordinality "
		"e(id, n)");
	long long a, b, b2, d;
	assert_int_equal(sscanf(ids, "%lld,%lld,%lld,%lld", &a, &b, &b2, &d),
			 4);
	free(ids);
	assert_int_equal(a, held);
	assert_int_equal(b, b2);
	assert_true(b != d && b != held);
	assert_int_equal(count_kind(c, "mu_new"), 2);
	t_assert_job(c, b, "unique_key", "mu-2");

	/* A key whose job has ended is free again, as with enqueue(). */
	t_exec(c,
	       "update pgjob.jobs set state = 'done', finished_at = now() "
	       "where id = %lld",
	       held);
	long long again = t_long(c, "select id from pgjob.enqueue_many("
				    "'[{\"kind\": \"mu_new\", \"unique_key\": "
				    "\"mu-1\"}]') id");
	assert_true(again != held);
	t_assert_job(c, again, "concat_ws('|', kind, unique_key, state)",
		     "mu_new|mu-1|available");

	/* Keys nobody holds go in with one plain INSERT (schema 20): each
	 * element's job has its key, its ids rise with the elements. */
	t_exec(c, "create temp table mf_ids as select * from "
		  "pgjob.enqueue_many((select jsonb_agg(jsonb_build_object("
		  "'kind', 'mu_fresh', 'unique_key', 'mf-' || i) order by i) "
		  "from generate_series(1, 200) i)) with ordinality e(id, n)");
	t_assert_value(c, "200|200",
		       "select count(*) || '|' || count(*) filter (where "
		       "j.unique_key = 'mf-' || e.n) from mf_ids e join "
		       "pgjob.jobs j on j.id = e.id");
	t_assert_value(c, "t",
		       "select bool_and(id > prev) from (select id, lag(id, 1, "
		       "0::bigint) over (order by (regexp_match(unique_key, "
		       "'\\d+'))[1]::int) prev from pgjob.jobs where kind = "
		       "'mu_fresh') x");
	/* The last of 200 elements meets a held key: the plain INSERT is
	 * undone and the array arbitrated, so the 199 go in once and the
	 * last answers with its holder. */
	long long holder = t_long(c, "select pgjob.enqueue('mu_held', '{}', "
				     "unique_key => 'mh-last')");
	t_exec(c, "create temp table mh_ids as select * from "
		  "pgjob.enqueue_many((select jsonb_agg(jsonb_build_object("
		  "'kind', 'mu_late', 'unique_key', case when i = 200 then "
		  "'mh-last' else 'ml-' || i end) order by i) from "
		  "generate_series(1, 200) i)) with ordinality e(id, n)");
	assert_int_equal(count_kind(c, "mu_late"), 199);
	t_assert_value(c, "1",
		       "select count(*) from pgjob.jobs where "
		       "unique_key = 'mh-last'");
	assert_int_equal(t_long(c, "select id from mh_ids where n = 200"),
			 holder);
	/* The undone INSERT drew its ids: the arbitrated rows' come after. */
	assert_true(t_long(c, "select min(id) from mh_ids where n < 200") >
		    holder + 199);
	t_assert_value(c, "199|199",
		       "select count(*) || '|' || count(*) filter (where "
		       "j.unique_key = 'ml-' || e.n) from mh_ids e join "
		       "pgjob.jobs j on j.id = e.id where e.n < 200");

	/* A key that another transaction has just taken: the call waits for
	 * it to commit (whether it started waiting or not, the answer is the
	 * same), then answers with its job. */
	PGconn *other = t_connect(ci);
	t_exec(other, "begin");
	long long first = t_long(other, "select id from pgjob.enqueue_many("
					"'[{\"kind\": \"mu_tx\", "
					"\"unique_key\": \"mu-tx\"}]') id");
	assert_int_equal(PQsendQuery(c, "select id from pgjob.enqueue_many("
					"'[{\"kind\": \"mu_tx\", "
					"\"unique_key\": \"mu-tx\"}]') id"),
			 1);
	t_exec(other, "commit");
	PGresult *res = PQgetResult(c);
	assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
	assert_int_equal(atoll(PQgetvalue(res, 0, 0)), first);
	PQclear(res);
	assert_null(PQgetResult(c));
	assert_int_equal(count_kind(c, "mu_tx"), 1);

	/* One that rolls back: the waiting call's job goes in after all. */
	t_exec(other, "begin");
	long long gone = t_long(other, "select id from pgjob.enqueue_many("
				       "'[{\"kind\": \"mu_rb\", "
				       "\"unique_key\": \"mu-rb\"}]') id");
	assert_int_equal(PQsendQuery(c, "select id from pgjob.enqueue_many("
					"'[{\"kind\": \"mu_rb\", "
					"\"unique_key\": \"mu-rb\"}]') id"),
			 1);
	t_exec(other, "rollback");
	res = PQgetResult(c);
	assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
	long long kept = atoll(PQgetvalue(res, 0, 0));
	PQclear(res);
	assert_null(PQgetResult(c));
	assert_true(kept != gone);
	t_assert_job(c, kept, "concat_ws('|', kind, unique_key, state)",
		     "mu_rb|mu-rb|available");
	assert_int_equal(count_kind(c, "mu_rb"), 1);
	PQfinish(other);
	PQfinish(c);
}

/* Each bad array: SQLSTATE, the message (with the element's index), and
 * nothing of the call written. */
static void
test_many_errors(void **state)
{
	static const struct {
		const char *jobs;
		const char *state;
		const char *msg;
	} cases[] = {
		{"{\"kind\": \"me\"}", "22023",
		 "pgjob.enqueue_many: jobs must be a JSON array of job "
		 "objects, not object"},
		{"[{\"kind\": \"me\"}, 7]", "22023",
		 "pgjob.enqueue_many: jobs[1]: a job must be a JSON object, "
		 "not number"},
		{"[{\"kind\": \"me\"}, {\"kind\": \"\"}]", "22023",
		 "pgjob.enqueue_many: jobs[1]: kind must not be empty"},
		{"[{\"kind\": \"me\"}, {\"payload\": {}}]", "22023",
		 "pgjob.enqueue_many: jobs[1]: kind must be a string"},
		{"[{\"kind\": \"me\", \"payload\": [1]}]", "22023",
		 "pgjob.enqueue_many: jobs[0]: payload must be a JSON object, "
		 "not array"},
		{"[{\"kind\": \"me\"}, {\"kind\": \"me\", \"priority\": "
		 "40000}]",
		 "22003",
		 "pgjob.enqueue_many: jobs[1]: priority 40000 is out "
		 "of range"},
		{"[{\"kind\": \"me\", \"priority\": \"high\"}]", "22023",
		 "pgjob.enqueue_many: jobs[0]: priority must be an integer, "
		 "not \"high\""},
		{"[{\"kind\": \"me\", \"run_at\": \"infinity\"}]", "22008",
		 "pgjob.enqueue_many: jobs[0]: run_at must be a finite time, "
		 "not infinity"},
		{"[{\"kind\": \"me\", \"run_at\": \"soon\"}]", "22023",
		 "pgjob.enqueue_many: jobs[0]: run_at must be a time, not "
		 "\"soon\""},
		{"[{\"kind\": \"me\", \"max_attempts\": 0}]", "22023",
		 "pgjob.enqueue_many: jobs[0]: max_attempts must be at least "
		 "1, not 0"},
		{"[{\"kind\": \"me\", \"cost\": -1}]", "22023",
		 "pgjob.enqueue_many: jobs[0]: cost must be between 0 and "
		 "1000000, not -1"},
		{"[{\"kind\": \"me\", \"queue\": 5}]", "22023",
		 "pgjob.enqueue_many: jobs[0]: queue must be a string, not "
		 "number"},
		{"[{\"kind\": \"me\", \"depends_on\": [1]}]", "22023",
		 "pgjob.enqueue_many: jobs[0]: depends_on is not taken here"},
		/* A hostile key comes back escaped, as JSON. */
		{"[{\"kind\": \"me\", \"x\\u001b[2J\\n\": 1}]", "22023",
		 "pgjob.enqueue_many: jobs[0]: unknown key "
		 "\"x\\u001b[2J\\n\""},
	};
	PGconn *c = t_connect(ci);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *msg = t_expect_sqlstate(c, cases[i].state,
					      "select pgjob.enqueue_many('%s')",
					      cases[i].jobs);
		assert_string_equal(msg, cases[i].msg);
		free(msg);
	}
	assert_int_equal(count_kind(c, "me"), 0);

	/* A payload over the limit in element 3 of 5: it is named, and
	 * nothing goes in, not even elements 0 to 2. */
	t_exec(c, "update pgjob.settings set max_payload_bytes = 100");
	char *msg = t_expect_sqlstate(
		c, "54000",
		"select pgjob.enqueue_many(jsonb_agg(jsonb_build_object("
		"'kind', 'me_big', 'payload', jsonb_build_object('pad', "
		"repeat('x', case when i = 3 then 200 else 10 end)))"
		" order by i)) from generate_series(0, 4) i");
	assert_string_equal(msg, "pgjob.enqueue_many: jobs[3]: payload of "
				 "211 bytes is over the limit of 100 bytes");
	free(msg);
	t_exec(c, "update pgjob.settings set max_payload_bytes = 1048576");
	assert_int_equal(count_kind(c, "me%"), 0);
	PQfinish(c);
}

static void
test_many_notify(void **state)
{
	PGconn *listener = t_connect(ci);
	PGconn *c = t_connect(ci);
	t_exec(listener, "listen pgjob");

	/* 1,000 jobs in one call: one notification, not 1,000. */
	t_exec(c, "select count(*) from pgjob.enqueue_many((select "
		  "jsonb_agg(jsonb_build_object('kind', 'mn', 'payload', "
		  "jsonb_build_object('i', i))) from generate_series(1, 1000) "
		  "i))");
	assert_int_equal(t_notifications(listener), 1);
	assert_int_equal(count_kind(c, "mn"), 1000);

	/* Future work wakes nobody. */
	t_exec(c, "select pgjob.enqueue_many('[{\"kind\": \"mn_later\", "
		  "\"run_at\": \"2999-01-01T00:00:00Z\"}]')");
	assert_int_equal(t_notifications(listener), 0);
	PQfinish(c);
	PQfinish(listener);
}

/* An idle pgjobd that polls once in 10 minutes gets bulk-enqueued jobs
 * done: its workers were woken by the NOTIFY. */
static void
test_many_wakes_daemon(void **state)
{
	PGconn *c = t_connect(ci);
	pid_t p = t_start("many", ci,
			  "workers: 1\npoll_interval: 10m\n"
			  "handlers:\n"
			  "  mw: { type: exec, command: [\"/bin/true\"] }\n");
	t_wait_workers(c, 1, 30);
	/* The worker's first look for work has come and gone. */
	t_wait_log("many", "ready", 1, 30);
	t_exec(c, "select count(*) from pgjob.enqueue_many((select "
		  "jsonb_agg(jsonb_build_object('kind', 'mw')) from "
		  "generate_series(1, 50)))");
	t_wait_until(
		c, 60,
		"select count(*) = 50 from pgjob.all_jobs where kind = 'mw' "
		"and state = 'done'");
	t_stop_clean(p);
	PQfinish(c);
}

/* Runs `pgjob --database ci enqueue --file PATH [--json]`. */
static void
enqueue_file(struct t_run *r, const char *path, int json)
{
	const char *argv[] = {"enqueue", "--file", path, json ? "--json" : NULL,
			      NULL};
	t_pgjobv(r, ci, argv);
}

/* A file of n lines of kind, one of them (bad, 1-based; 0 none) text. */
static const char *
write_lines(const char *name, int n, const char *kind, int bad,
	    const char *text)
{
	static char path[512];
	snprintf(path, sizeof(path), "%s/%s", t_tmpdir(), name);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	for (int i = 1; i <= n; i++)
		if (i == bad)
			fprintf(f, "%s\n", text);
		else
			fprintf(f,
				"{\"kind\": \"%s\", \"payload\": {\"i\": %d}}"
				"\n",
				kind, i);
	fclose(f);
	return path;
}

static void
test_cli_file(void **state)
{
	struct t_run r;
	PGconn *c = t_connect(ci);
	const char *path = t_src("examples/enqueue.jsonl");

	/* The ids, one per job line (the blank line has none), in order. */
	enqueue_file(&r, path, 0);
	assert_int_equal(r.status, 0);
	assert_string_equal(r.err, "");
	long long id[4];
	assert_int_equal(sscanf(r.out, "%lld\n%lld\n%lld\n%lld", &id[0], &id[1],
				&id[2], &id[3]),
			 4);
	t_run_free(&r);
	t_assert_job(c, id[0], "concat_ws('|', kind, payload->>'to', queue)",
		     "email|a@example.com|default");
	t_assert_job(c, id[1],
		     "concat_ws('|', kind, queue, priority, unique_key)",
		     "report|slow|-5|report-2026-12");
	t_assert_job(c, id[2], "extract(year from run_at)", "2030");
	t_assert_job(c, id[3], "concat_ws('|', kind, limit_key, cost)",
		     "sync|acct-7|3");

	/* Again with --json: the same unique key gives the same id. */
	enqueue_file(&r, path, 1);
	assert_int_equal(r.status, 0);
	char want[64];
	snprintf(want, sizeof(want), "{\"line\":3,\"id\":%lld}\n", id[1]);
	assert_non_null(strstr(r.out, want));
	assert_non_null(strstr(r.out, "{\"line\":1,\"id\":"));
	t_run_free(&r);

	/* 2,500 lines (three batches) from stdin. */
	const char *lines = write_lines("many.jsonl", 2500, "cf_stdin", 0, "");
	char env[1100];
	snprintf(env, sizeof(env), "T_CONNINFO=%s", ci);
	const char *envs[] = {env, NULL};
	const char *argv[] = {"/bin/sh",
			      "-c",
			      "\"$0\" --database \"$T_CONNINFO\" enqueue "
			      "--file - < \"$1\"",
			      t_bin("pgjob"),
			      lines,
			      NULL};
	t_run(&r, 60, envs, argv);
	assert_int_equal(r.status, 0);
	t_run_free(&r);
	t_assert_value(
		c, "2500|2500|1|2500",
		"select concat_ws('|', count(*), count(distinct "
		"payload->'i'), min((payload->>'i')::int), "
		"max((payload->>'i')::int)) from pgjob.all_jobs where kind "
		"= 'cf_stdin'");

	/* An empty file: nothing printed, nothing enqueued, success. */
	const char *empty = write_lines("empty.jsonl", 0, "", 0, "");
	enqueue_file(&r, empty, 0);
	assert_int_equal(r.status, 0);
	assert_string_equal(r.out, "");
	assert_string_equal(r.err, "");
	t_run_free(&r);
	PQfinish(c);
}

/* Each bad line: FILE:LINE and why, exit 1, and nothing of the file
 * enqueued, not even the batches before it. */
static void
test_cli_file_errors(void **state)
{
	static const struct {
		int bad;
		const char *line;
		const char *why;
	} cases[] = {
		{2500, "{\"kind\": \"cf_bad\", \"payload\": [1]}",
		 "payload must be a JSON object, not array"},
		{1200, "{\"kind\": \"cf_bad\",", "not valid JSON"},
		{3, "[1, 2]", "a job must be a JSON object"},
		{4, "{\"kind\": \"cf_bad\"} trailing", "not valid JSON"},
		{5, "{\"kind\": \"\"}", "kind must not be empty"},
		{1001, "{\"kind\": \"cf_bad\", \"run_at\": \"tomorrowish\"}",
		 "run_at must be a time, not \"tomorrowish\""},
		/* Hostile text comes back escaped, on one line. */
		{6, "{\"kind\": \"cf_bad\", \"\\u001b]0;owned\\u0007\": 1}",
		 "unknown key \"\\u001b]0;owned\\u0007\""},
	};
	PGconn *c = t_connect(ci);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct t_run r;
		const char *path = write_lines("bad.jsonl", 2600, "cf_bad",
					       cases[i].bad, cases[i].line);
		enqueue_file(&r, path, 0);
		assert_int_equal(r.status, 1);
		assert_string_equal(r.out, "");
		char want[512];
		snprintf(want, sizeof(want), "pgjob: %s:%d: %s\n", path,
			 cases[i].bad, cases[i].why);
		/* The first line; a hint may follow. */
		assert_memory_equal(r.err, want, strlen(want));
		t_run_free(&r);
	}
	assert_int_equal(count_kind(c, "cf_bad"), 0);

	/* A line longer than the payload limit and 64 KiB: refused as it is
	 * read, never held whole. */
	t_exec(c, "update pgjob.settings set max_payload_bytes = 1000");
	char *big = malloc(70000);
	assert_non_null(big);
	memset(big, 'x', 69999);
	big[69999] = 0;
	memcpy(big, "{\"kind\": \"cf_bad\", \"payload\": {\"x\": \"", 37);
	struct t_run r;
	const char *path = write_lines("long.jsonl", 3, "cf_bad", 2, big);
	free(big);
	enqueue_file(&r, path, 0);
	t_exec(c, "update pgjob.settings set max_payload_bytes = 1048576");
	assert_int_equal(r.status, 1);
	char want[512];
	snprintf(want, sizeof(want),
		 "pgjob: %s:2: the line is longer than 66536 bytes (the "
		 "payload limit and 65536 for the other keys)\n",
		 path);
	assert_string_equal(r.err, want);
	t_run_free(&r);
	assert_int_equal(count_kind(c, "cf_bad"), 0);

	/* Options that belong to single jobs do not go with --file. */
	const char *argv[] = {"enqueue", "--file", path, "--queue", "q", NULL};
	t_pgjobv(&r, ci, argv);
	assert_int_equal(r.status, 2);
	assert_string_equal(r.err, "pgjob: enqueue: --file takes no KIND, JSON "
				   "or job option (each line has its own)\n");
	t_run_free(&r);
	PQfinish(c);
}

/*
 * The enqueue-only role of docs/security.md (usage on the schema, execute
 * on pgjob.enqueue_many, no right on pgjob.jobs nor pgjob.settings):
 * enqueue --file works, and the rules hold for it.
 */
static void
test_cli_file_role(void **state)
{
	PGconn *c = t_connect(ci);
	char role[64], ce[1200];
	snprintf(role, sizeof(role), "many_enqueue_%d", (int)getpid());
	t_exec(c, "create role %s login", role);
	t_exec(c, "grant usage on schema pgjob to %s", role);
	t_exec(c, "grant execute on function pgjob.enqueue_many to %s", role);
	snprintf(ce, sizeof(ce), "%s user=%s", ci, role);

	struct t_run r;
	const char *path = write_lines("role.jsonl", 30, "cf_role", 0, "");
	const char *argv[] = {"enqueue", "--file", path, NULL};
	t_pgjobv(&r, ce, argv);
	assert_int_equal(r.status, 0);
	assert_string_equal(r.err, "");
	t_run_free(&r);
	assert_int_equal(count_kind(c, "cf_role"), 30);

	path = write_lines("role_bad.jsonl", 30, "cf_role", 7,
			   "{\"kind\": \"cf_role\", \"max_attempts\": 0}");
	const char *bad[] = {"enqueue", "--file", path, NULL};
	t_pgjobv(&r, ce, bad);
	assert_int_equal(r.status, 1);
	assert_non_null(strstr(r.err, "role_bad.jsonl:7: max_attempts must "
				      "be at least 1, not 0"));
	t_run_free(&r);
	assert_int_equal(count_kind(c, "cf_role"), 30);
	t_exec(c, "drop owned by %s", role);
	t_exec(c, "drop role %s", role);
	PQfinish(c);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_many_order_and_options),
		cmocka_unit_test(test_many_unique_keys),
		cmocka_unit_test(test_many_errors),
		cmocka_unit_test(test_many_notify),
		cmocka_unit_test(test_many_wakes_daemon),
		cmocka_unit_test(test_cli_file),
		cmocka_unit_test(test_cli_file_errors),
		cmocka_unit_test(test_cli_file_role),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
