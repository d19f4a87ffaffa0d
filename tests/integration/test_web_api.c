/*
 * Integration: the web console's statements (src/web/api.c, api_jobs.c),
 * called as web.c calls them, on a real database with real pgjobd
 * processes: every answer must parse as JSON and say what the database
 * holds.  Hostile jobs (markup, quotes, control characters, a 1 MB
 * payload, bytes that are not UTF-8 in a SQL_ASCII database) come back
 * as valid UTF-8 text, cut where the contract says; the copy as a
 * `pgjob enqueue` command, run through a shell, enqueues the same job;
 * the text search reads bounded windows per request and says where it
 * stopped; queue counts stop at 1,000 and say so; exact counts too big
 * for a statement go in parts; the actions (retry,
 * cancel, delete by ids and by filter; pause, resume, limits; schedules)
 * do what the CLI's commands do, and a read-only user can do none of
 * them.
 */
#include "testlib.h"

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sys/prctl.h>

#include <cjson/cJSON.h>

#include "common/text.h"
#include "common/util.h"
#include "db/db.h"
#include "web/api.h"

/* POST path body as user (operator or not); asserts the status. */
static cJSON *
post(struct db_conn *db, int operator, const char * path, const char *body,
     int status)
{
	struct web_user u = {"alice", operator};
	struct web_response out = {0};
	cJSON *b = cJSON_Parse(body);
	assert_non_null(b);
	assert_int_equal(web_api_post(db, &u, path, b, &out), 0);
	cJSON_Delete(b);
	if (out.status != status)
		fail_msg("POST %s %s: %d %s", path, body, out.status, out.body);
	cJSON *j = cJSON_Parse(out.body);
	assert_non_null(j);
	free(out.body);
	return j;
}

static const cJSON *
item(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!v)
		fail_msg("no \"%s\" in %s", key, cJSON_PrintUnformatted(o));
	return v;
}

static double
num(const cJSON *o, const char *key)
{
	const cJSON *v = item(o, key);
	assert_true(cJSON_IsNumber(v));
	return v->valuedouble;
}

static const char *
str(const cJSON *o, const char *key)
{
	const cJSON *v = item(o, key);
	assert_true(cJSON_IsString(v));
	return v->valuestring;
}

/* "affected" of an action's answer. */
static long long
affected(cJSON *j)
{
	long long n = (long long)num(j, "affected");
	cJSON_Delete(j);
	return n;
}

#define HOSTILE_KIND "it's <img src=x onerror=alert(1)>"

/* A job page of hostile jobs, its download, and its enqueue command. */
static void
test_job_page(void **state)
{
	char *ci = t_db_migrated("t_web_job");
	PGconn *c = t_connect(ci);
	struct db_conn *db = t_web_db(ci);
	char path[128];

	long long id = t_long(
		c, "select pgjob.enqueue('it''s <img src=x onerror=alert(1)>',"
		   " '{\"html\": \"<script>alert(1)</script>\","
		   "   \"q\": \"''; rm -rf / #\", \"ctl\": \"a\\u001b[2Jb\"}',"
		   " queue => 'q''1', priority => 3, max_attempts => 4,"
		   " unique_key => 'k''ey')");
	long long esc = t_long(c, "select pgjob.enqueue(E'esc\\x1b[2Jkind')");
	long long big = t_long(c, "select pgjob.enqueue('big',"
				  " jsonb_build_object('big',"
				  "  repeat('x', 1000000)))");

	snprintf(path, sizeof(path), "job/%lld", id);
	cJSON *j = t_web_get(db, path, NULL, 200);
	const cJSON *job = item(j, "job");
	assert_string_equal(str(job, "kind"), HOSTILE_KIND);
	const cJSON *payload = item(job, "payload");
	assert_string_equal(str(payload, "html"), "<script>alert(1)</script>");
	assert_string_equal(str(payload, "ctl"), "a\x1b[2Jb");
	assert_false(cJSON_IsTrue(item(job, "payload_truncated")));
	assert_true(cJSON_IsNull(item(j, "lease")));
	assert_int_equal(cJSON_GetArraySize(item(j, "attempts")), 0);
	/* The command, run by a shell, enqueues the same job again (its
	 * unique key held: the same id, so it goes in as a new key). */
	const char *cmd = str(j, "enqueue_command");
	assert_int_equal(strncmp(cmd, "pgjob enqueue ", 14), 0);
	assert_null(strchr(cmd, '\x1b'));
	t_exec(c,
	       "update pgjob.jobs set state = 'done', finished_at = now() "
	       "where id = %lld",
	       id);
	char *line = xasprintf("'%s' -d '%s' enqueue --json %s", t_bin("pgjob"),
			       ci, cmd + strlen("pgjob enqueue "));
	FILE *f = popen(line, "r");
	char out[256] = "";
	assert_non_null(f);
	assert_non_null(fgets(out, sizeof(out), f));
	assert_int_equal(pclose(f), 0);
	free(line);
	long long copy = atoll(strchr(out, ':') + 1);
	assert_true(copy > big);
	t_assert_value(c, "t",
		       "select a.kind = b.kind and a.payload = b.payload"
		       " and a.queue = b.queue and a.priority = b.priority"
		       " and a.max_attempts = b.max_attempts"
		       " and a.unique_key = b.unique_key"
		       " from pgjob.all_jobs a, pgjob.all_jobs b"
		       " where a.id = %lld and b.id = %lld",
		       id, copy);
	cJSON_Delete(j);

	/* A control character in the kind: no command to paste. */
	snprintf(path, sizeof(path), "job/%lld", esc);
	j = t_web_get(db, path, NULL, 200);
	assert_true(cJSON_IsNull(item(j, "enqueue_command")));
	assert_string_equal(str(item(j, "job"), "kind"), "esc\x1b[2Jkind");
	cJSON_Delete(j);

	/* 1 MB: cut at 64 KiB on the page, whole in the download. */
	snprintf(path, sizeof(path), "job/%lld", big);
	j = t_web_get(db, path, NULL, 200);
	job = item(j, "job");
	assert_true(cJSON_IsTrue(item(job, "payload_truncated")));
	assert_true(cJSON_IsNull(item(job, "payload")));
	assert_true(num(job, "payload_bytes") > 1000000);
	assert_true(strlen(str(job, "payload_text")) <= 65536);
	assert_true(strlen(str(job, "payload_text")) > 65000);
	assert_true(cJSON_IsNull(item(j, "enqueue_command")));
	cJSON_Delete(j);
	snprintf(path, sizeof(path), "job/%lld/payload", big);
	struct web_response r;
	t_web_call(db, path, NULL, &r);
	assert_int_equal(r.status, 200);
	assert_true(r.len > 1000000);
	assert_non_null(strstr(r.content_disposition, "payload.json"));
	j = cJSON_Parse(r.body);
	assert_int_equal(strlen(str(j, "big")), 1000000);
	cJSON_Delete(j);
	free(r.body);

	/* What is not a job. */
	cJSON_Delete(t_web_get(db, "job/999999999", NULL, 404));
	cJSON_Delete(t_web_get(db, "job/abc", NULL, 404));
	cJSON_Delete(t_web_get(db, "job/-1", NULL, 404));
	snprintf(path, sizeof(path), "job/%lld/result", big);
	cJSON_Delete(t_web_get(db, path, NULL, 404));
	snprintf(path, sizeof(path), "job/%lld/other", big);
	cJSON_Delete(t_web_get(db, path, NULL, 404));
	cJSON_Delete(t_web_get(db, "nothing", NULL, 404));

	db_close(db);
	PQfinish(c);
	free(ci);
}

/* The list: filters, keyset pages, and the bounded text search. */
/* The count of filter, as a bulk action's confirmation asks for it:
 * request after request from next, added; *parts the requests,
 * *below where the first started. */
static long long
count_all(struct db_conn *db, const char *filter, int *parts, long long *below)
{
	long long n = 0;
	char query[128];
	snprintf(query, sizeof(query), "%s", filter);
	for (*parts = 1;; ++*parts) {
		cJSON *j = t_web_get(db, "jobs/count", query, 200);
		assert_true(cJSON_IsFalse(item(j, "estimate")));
		n += (long long)num(j, "count");
		if (*parts == 1)
			*below = (long long)num(j, "below");
		const cJSON *next = item(j, "next");
		if (cJSON_IsNull(next)) {
			cJSON_Delete(j);
			return n;
		}
		snprintf(query, sizeof(query), "%s&before=%.0f", filter,
			 next->valuedouble);
		cJSON_Delete(j);
		assert_true(*parts < 1000);
	}
}

/*
 * An exact count that no index serves, on ten million jobs, takes
 * seconds, past the 5 s statement_timeout on a busy database: it is
 * counted in windows of ids, a second of them a request, and the page
 * adds them up; then the action starts where the count did.  The
 * windows made small here (PGJOBD_WEB_COUNT_WINDOW, one a request)
 * take that path on 35,000 jobs.
 */
static void
counted_in_parts(struct db_conn *db, PGconn *c)
{
	int parts;
	long long below;
	setenv("PGJOBD_WEB_COUNT_WINDOW", "4000", 1);
	assert_int_equal(count_all(db, "kind=bulk", &parts, &below), 25000);
	assert_true(parts > 5);
	char *top = t_value(c, "select max(id) + 1 from pgjob.all_jobs");
	assert_int_equal(below, atoll(top));
	free(top);
	/* An index serves the dead jobs: one statement. */
	assert_int_equal(count_all(db, "state=dead", &parts, &below), 7);
	assert_int_equal(parts, 1);
	/* The action on what was counted, in steps from below. */
	assert_int_equal(count_all(db, "kind=bad", &parts, &below), 7);
	assert_true(parts > 5);
	char body[160];
	snprintf(body, sizeof(body),
		 "{\"filter\": {\"kind\": \"bad\"}, \"expect\": 7,"
		 " \"limit\": 5000, \"before\": \"%lld\"}",
		 below);
	cJSON *j = post(db, 1, "jobs/retry", body, 200);
	assert_int_equal((int)num(j, "affected"), 7);
	assert_true(cJSON_IsNull(item(j, "next")));
	cJSON_Delete(j);
	t_assert_value(c, "7",
		       "select count(*) from pgjob.jobs where kind = 'bad'"
		       " and state = 'available'");
	unsetenv("PGJOBD_WEB_COUNT_WINDOW");
}

static void
test_jobs_list(void **state)
{
	char *ci = t_db_migrated("t_web_list");
	PGconn *c = t_connect(ci);
	struct db_conn *db = t_web_db(ci);
	char qs[128];

	/* The oldest job holds the needle; 25,000 done jobs above it, more
	 * than a window; 7 dead jobs of queue q2 among them. */
	long long needle = t_long(
		c, "select pgjob.enqueue('rare', '{\"w\": \"NeedLe\"}')");
	t_exec(c,
	       "insert into pgjob.jobs (kind, state, finished_at)"
	       " select 'bulk', 'done', now() from generate_series(1, 25000)");
	t_exec(c, "insert into pgjob.jobs (kind, queue, state, last_error,"
		  "  finished_at, attempts)"
		  " select 'bad', 'q2', 'dead', 'boom ' || i, now(), 3"
		  " from generate_series(1, 7) i");
	/* A backlog past the counts' cap: 10,001 jobs due in an hour. */
	t_exec(c, "insert into pgjob.jobs (kind, queue, run_at)"
		  " select 'later', 'big', now() + interval '1 hour'"
		  " from generate_series(1, 10001)");
	t_exec(c, "analyze pgjob.jobs");

	cJSON *j = t_web_get(db, "jobs", NULL, 200);
	const cJSON *jobs = item(j, "jobs");
	assert_int_equal(cJSON_GetArraySize(jobs), 50);
	double prev = 1e18;
	const cJSON *it;
	cJSON_ArrayForEach(it, jobs)
	{
		assert_true(num(it, "id") < prev);
		prev = num(it, "id");
	}
	assert_true(num(j, "next") == prev);
	/* The next page starts below it. */
	snprintf(qs, sizeof(qs), "before=%.0f&limit=200", prev);
	cJSON *k = t_web_get(db, "jobs", qs, 200);
	assert_int_equal(cJSON_GetArraySize(item(k, "jobs")), 200);
	assert_true(num(cJSON_GetArrayItem(item(k, "jobs"), 0), "id") < prev);
	cJSON_Delete(k);
	cJSON_Delete(j);

	/* Dead jobs of q2, whole (jobs_dead_idx), errors included. */
	j = t_web_get(db, "jobs", "state=dead&queue=q2", 200);
	assert_int_equal(cJSON_GetArraySize(item(j, "jobs")), 7);
	assert_true(cJSON_IsNull(item(j, "searched_to")));
	assert_true(cJSON_IsNull(item(j, "next")));
	assert_int_equal(strncmp(str(cJSON_GetArrayItem(item(j, "jobs"), 0),
				     "last_error"),
				 "boom ", 5),
			 0);
	cJSON_Delete(j);

	/* The text search (any case) reads windows of ids until it has spent
	 * its budget, then says where it stopped; asked again from there,
	 * it goes on, and reaches the needle.  How many requests that takes
	 * depends on the machine: at most one per window. */
	double before = 0;
	int requests = 0, found = 0;
	/* The windows between the newest id and the needle (Q_WINDOW,
	 * src/web/api_jobs.c: 4,000 ids), with one to spare: a loaded
	 * machine spends a request's budget in one window. */
	long long windows = t_long(c,
				   "select (max(id) - %lld) / 4000 + 2"
				   " from pgjob.all_jobs",
				   needle);
	while (!found) {
		if (before)
			snprintf(qs, sizeof(qs), "q=needle&before=%.0f",
				 before);
		else
			snprintf(qs, sizeof(qs), "q=needle");
		j = t_web_get(db, "jobs", qs, 200);
		requests++;
		found = cJSON_GetArraySize(item(j, "jobs"));
		if (found) {
			assert_int_equal(
				num(cJSON_GetArrayItem(item(j, "jobs"), 0),
				    "id"),
				needle);
			assert_true(cJSON_IsNull(item(j, "searched_to")));
		} else {
			double to = num(j, "searched_to");
			assert_true(to > needle);
			assert_true(!before || to < before);
			before = to;
		}
		assert_true(cJSON_IsNull(item(j, "next")));
		cJSON_Delete(j);
		assert_true(requests <= windows);
	}
	/* In the errors too.  A search of dead jobs reads windows as well
	 * (a term more than the state), as far as its budget goes: on a
	 * loaded machine one window a request, so the page asks again from
	 * where it stopped, as the needle's above (it failed once in a
	 * loaded ctest -j4 with a single request). */
	j = t_web_get(db, "jobs", "q=BOOM%203", 200);
	cJSON_Delete(j);
	windows = t_long(c, "select (max(id) - (select min(id) from pgjob.jobs"
			    " where last_error like 'boom %%')) / 4000 + 2"
			    " from pgjob.all_jobs");
	int matches = 0;
	before = 0;
	for (requests = 0; requests < windows; requests++) {
		if (before)
			snprintf(qs, sizeof(qs),
				 "q=boom 3&state=dead&before=%.0f", before);
		else
			snprintf(qs, sizeof(qs), "q=boom 3&state=dead");
		j = t_web_get(db, "jobs", qs, 200);
		matches += cJSON_GetArraySize(item(j, "jobs"));
		int more = !cJSON_IsNull(item(j, "searched_to"));
		if (more)
			before = num(j, "searched_to");
		cJSON_Delete(j);
		if (!more)
			break;
	}
	assert_int_equal(matches, 1);

	/* The queues: counts stop at 1,000 and say so. */
	j = t_web_get(db, "queues", NULL, 200);
	int seen = 0;
	cJSON_ArrayForEach(it, item(j, "queues"))
	{
		if (strcmp(str(it, "queue"), "big") == 0) {
			seen = 1;
			assert_int_equal(num(it, "scheduled"), 1000);
			assert_int_equal(num(it, "available"), 0);
			const cJSON *al = item(it, "at_least");
			assert_int_equal(cJSON_GetArraySize(al), 1);
			assert_string_equal(
				cJSON_GetArrayItem(al, 0)->valuestring,
				"scheduled");
		} else if (strcmp(str(it, "queue"), "q2") == 0) {
			assert_int_equal(num(it, "dead"), 7);
			assert_int_equal(
				cJSON_GetArraySize(item(it, "at_least")), 0);
		}
	}
	assert_true(seen);
	assert_true(cJSON_IsTrue(item(j, "estimates")));
	cJSON_Delete(j);

	/* Exact counts, for a bulk action's confirmation. */
	j = t_web_get(db, "jobs/count", "kind=bulk", 200);
	assert_int_equal(num(j, "count"), 25000);
	cJSON_Delete(j);
	j = t_web_get(db, "jobs/count", "state=dead&q=boom", 200);
	assert_int_equal(num(j, "count"), 7);
	cJSON_Delete(j);
	counted_in_parts(db, c);

	/* Bad input: a 400 that says which key. */
	j = t_web_get(db, "jobs", "state=bogus", 400);
	assert_non_null(strstr(str(j, "error"), "state"));
	cJSON_Delete(j);
	cJSON_Delete(t_web_get(db, "jobs", "from=yesterday-ish", 400));
	cJSON_Delete(t_web_get(db, "jobs", "limit=0", 400));
	cJSON_Delete(t_web_get(db, "jobs", "limit=201", 400));
	cJSON_Delete(t_web_get(db, "jobs", "before=x", 400));
	cJSON_Delete(t_web_get(db, "jobs/count", "workflow=-3", 400));

	db_close(db);
	PQfinish(c);
	free(ci);
}

/* The actions, with a real pgjobd running the jobs. */
/* The ids of a jobs answer, newest first, as "3,2". */
static void
ids_of(const cJSON *j, char *buf, size_t len)
{
	const cJSON *e;
	size_t n = 0;
	buf[0] = '\0';
	cJSON_ArrayForEach(e, item(j, "jobs"))
	{
		n += (size_t)snprintf(buf + n, len - n, "%s%.0f", n ? "," : "",
				      num(e, "id"));
		assert_true(n < len);
	}
}

/*
 * The filters the list test leaves aside: a created_at range (from, to),
 * a limit key, an ordering key; each alone, together, counted, and acted
 * on by filter.
 */
static void
test_filters(void **state)
{
	char *ci = t_db_migrated("t_web_filters");
	PGconn *c = t_connect(ci);
	struct db_conn *db = t_web_db(ci);
	char ids[64];

	t_exec(c, "insert into pgjob.jobs (id, kind, created_at, limit_key,"
		  "  ordering_key, run_at) overriding system value values"
		  " (1, 'k', '2026-01-01 10:00+00', 'tenant-a', null,"
		  "  now() + interval '1 day'),"
		  " (2, 'k', '2026-01-02 10:00+00', 'tenant-b', 'o-1',"
		  "  now() + interval '1 day'),"
		  " (3, 'k', '2026-01-03 10:00+00', null, 'o-1',"
		  "  now() + interval '1 day'),"
		  " (4, 'k', '2026-01-04 10:00+00', 'tenant-a', null,"
		  "  now() + interval '1 day')");
	static const struct {
		const char *query, *ids;
	} cases[] = {
		{"from=2026-01-02T00:00:00Z&to=2026-01-03T23:00:00Z", "3,2"},
		{"from=2026-01-03T00:00:00Z", "4,3"},
		{"to=2026-01-01T23:00:00Z", "1"},
		{"limit_key=tenant-a", "4,1"},
		{"ordering_key=o-1", "3,2"},
		{"limit_key=tenant-a&from=2026-01-02T00:00:00Z", "4"},
		{"ordering_key=o-1&limit_key=tenant-b", "2"},
		{"limit_key=nobody", ""},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		cJSON *j = t_web_get(db, "jobs", cases[i].query, 200);
		ids_of(j, ids, sizeof(ids));
		if (strcmp(ids, cases[i].ids) != 0)
			fail_msg("jobs?%s: %s, expected %s", cases[i].query,
				 ids, cases[i].ids);
		cJSON_Delete(j);
	}
	cJSON *j = t_web_get(
		db, "jobs/count",
		"from=2026-01-02T00:00:00Z&to=2026-01-03T23:00:00Z", 200);
	assert_int_equal((int)num(j, "count"), 2);
	cJSON_Delete(j);
	/* Acting on a filter's matches: those two, nothing else. */
	j = post(db, 1, "jobs/cancel",
		 "{\"filter\": {\"from\": \"2026-01-02T00:00:00Z\","
		 " \"to\": \"2026-01-03T23:00:00Z\"}, \"expect\": 2}",
		 200);
	assert_int_equal((int)num(j, "affected"), 2);
	cJSON_Delete(j);
	t_assert_value(c, "1 available,2 cancelled,3 cancelled,4 available",
		       "select string_agg(id || ' ' || state, ',' order by id)"
		       " from pgjob.all_jobs");
	db_close(db);
	PQfinish(c);
	free(ci);
}

static void
test_actions(void **state)
{
	char *ci = t_db_migrated("t_web_act");
	PGconn *c = t_connect(ci);
	struct db_conn *db = t_web_db(ci);
	char flag[512], path[64], body[256];

	snprintf(flag, sizeof(flag), "%s/web_api_flag", t_tmpdir());
	unlink(flag);
	pid_t d = t_start("web_act", ci,
			  "workers: 2\npoll_interval: 1s\n"
			  "queues: { default: {}, slow: {} }\n"
			  "schedules:\n"
			  "  tick: { cron: \"0 0 1 1 *\", kind: ok }\n"
			  "handlers:\n"
			  "  ok: { type: exec, command: [\"/bin/true\"] }\n"
			  "  slowok: { type: exec, queue: slow,"
			  " command: [\"/bin/true\"] }\n"
			  "  flaky:\n"
			  "    type: exec\n"
			  "    command: [\"/bin/sh\", \"-c\","
			  " \"test -f %s || { echo boom >&2; exit 3; }\"]\n"
			  "    max_attempts: 2\n"
			  "    backoff: { base: 100ms, max: 100ms }\n",
			  flag);

	/* A job that fails twice and dies: its attempts, with errors. */
	long long id = t_long(c, "select pgjob.enqueue('flaky')");
	t_wait_state(c, id, "dead", 60);
	snprintf(path, sizeof(path), "job/%lld", id);
	cJSON *j = t_web_get(db, path, NULL, 200);
	const cJSON *att = item(j, "attempts");
	assert_int_equal(cJSON_GetArraySize(att), 2);
	const cJSON *a1 = cJSON_GetArrayItem(att, 0);
	assert_string_equal(str(a1, "outcome"), "failed");
	assert_non_null(strstr(str(a1, "error"), "boom"));
	assert_int_equal(num(a1, "status"), 3);
	assert_non_null(strchr(str(a1, "worker"), ':'));
	assert_string_equal(str(cJSON_GetArrayItem(att, 1), "outcome"), "dead");
	cJSON_Delete(j);

	/* A read-only user acts on nothing. */
	snprintf(body, sizeof(body), "{\"ids\": [%lld]}", id);
	j = post(db, 0, "jobs/retry", body, 403);
	cJSON_Delete(j);
	t_assert_job(c, id, "state", "dead");

	/* Retry: now it passes, done at its third attempt, which the job
	 * row describes. */
	t_write_file(flag, "");
	assert_int_equal(affected(post(db, 1, "jobs/retry", body, 200)), 1);
	t_wait_state(c, id, "done", 60);
	j = t_web_get(db, path, NULL, 200);
	att = item(j, "attempts");
	assert_int_equal(cJSON_GetArraySize(att), 3);
	const cJSON *last = cJSON_GetArrayItem(att, 2);
	assert_string_equal(str(last, "outcome"), "done");
	assert_non_null(strchr(str(last, "worker"), ':'));
	assert_true(cJSON_IsString(item(last, "finished_at")));
	cJSON_Delete(j);
	/* A done job retried runs again (as `pgjob retry` does). */
	long long token =
		t_long(c,
		       "select lease_token from pgjob.all_jobs where id = "
		       "%lld",
		       id);
	assert_int_equal(affected(post(db, 1, "jobs/retry", body, 200)), 1);
	t_wait_until(c, 60,
		     "select state = 'done' and lease_token > %lld"
		     " from pgjob.all_jobs where id = %lld",
		     token, id);

	/* A plain job done at its first attempt is kept in pgjob.jobs_done
	 * (sql/upgrade/019_jobs_done.sql): the console shows it, with its
	 * attempt; a retry brings it back to pgjob.jobs and runs it again; a
	 * delete takes it from there. */
	long long plain = t_long(c, "select pgjob.enqueue('ok')");
	t_wait_until(c, 60,
		     "select exists (select 1 from pgjob.jobs_done"
		     " where id = %lld)",
		     plain);
	t_assert_value(c, "0",
		       "select count(*) from pgjob.jobs where id = %lld",
		       plain);
	snprintf(path, sizeof(path), "job/%lld", plain);
	j = t_web_get(db, path, NULL, 200);
	assert_string_equal(str(item(j, "job"), "state"), "done");
	att = item(j, "attempts");
	assert_int_equal(cJSON_GetArraySize(att), 1);
	assert_string_equal(str(cJSON_GetArrayItem(att, 0), "outcome"), "done");
	cJSON_Delete(j);
	j = t_web_get(db, "jobs", "state=done&kind=ok", 200);
	int listed = 0;
	const cJSON *it;
	cJSON_ArrayForEach(it, item(j, "jobs")) listed +=
		(long long)num(it, "id") == plain;
	assert_int_equal(listed, 1);
	cJSON_Delete(j);
	snprintf(body, sizeof(body), "{\"ids\": [%lld]}", plain);
	assert_int_equal(affected(post(db, 1, "jobs/retry", body, 200)), 1);
	t_wait_until(c, 60,
		     "select state = 'done' and lease_token = 2"
		     " from pgjob.all_jobs where id = %lld",
		     plain);
	/* Run again, it ended at its second claim: moved to
	 * pgjob.jobs_done again (since schema version 40). */
	t_assert_value(
		c, "0 1",
		"select (select count(*) from pgjob.jobs where id = %lld)"
		" || ' ' || (select count(*) from pgjob.jobs_done"
		" where id = %lld)",
		plain, plain);
	long long gone = t_long(c, "select pgjob.enqueue('ok')");
	t_wait_until(c, 60,
		     "select exists (select 1 from pgjob.jobs_done"
		     " where id = %lld)",
		     gone);
	snprintf(body, sizeof(body), "{\"ids\": [%lld]}", gone);
	assert_int_equal(affected(post(db, 1, "jobs/delete", body, 200)), 1);
	t_assert_value(c, "0",
		       "select count(*) from pgjob.all_jobs where id = %lld",
		       gone);
	snprintf(body, sizeof(body), "{\"ids\": [%lld]}", id);

	/* A running job is neither cancelled nor deleted from the console
	 * (a row as a worker leaves it, in a queue no worker serves). */
	long long run = t_long(
		c, "insert into pgjob.jobs (kind, queue, state, locked_by,"
		   "  locked_until, lease_token, attempts, attempted_at)"
		   " values ('runner', 'nowhere', 'running', 'h:9',"
		   "  now() + interval '1 hour', 1, 1, now()) returning id");
	snprintf(body, sizeof(body), "{\"ids\": [%lld]}", run);
	assert_int_equal(affected(post(db, 1, "jobs/cancel", body, 200)), 0);
	assert_int_equal(affected(post(db, 1, "jobs/delete", body, 200)), 0);
	assert_int_equal(affected(post(db, 1, "jobs/cancel",
				       "{\"filter\": {\"kind\": \"runner\"}, "
				       "\"expect\": 1}",
				       200)),
			 0);
	t_assert_job(c, run, "state", "running");
	snprintf(path, sizeof(path), "job/%lld", run);
	j = t_web_get(db, path, NULL, 200);
	assert_string_equal(str(item(j, "lease"), "holder"), "h:9");
	assert_int_equal(num(item(j, "lease"), "token"), 1);
	att = item(j, "attempts");
	assert_string_equal(
		str(cJSON_GetArrayItem(att, cJSON_GetArraySize(att) - 1),
		    "outcome"),
		"running");
	cJSON_Delete(j);
	/* Unique keys (sql/upgrade/033_job_actions.sql), in a queue no worker
	 * serves: of the jobs of one request with one key, the one that
	 * holds it now (available after a failure) is retried, or when none
	 * does the newest, and never a second holder (before schema 33 the
	 * newer dead job was picked over the holder, and the request failed
	 * on jobs_unique_key_idx with a 409).  An available job that has not
	 * failed is not retried.  `pgjob retry` follows the same rules. */
	long long k1 = t_long(
		c, "insert into pgjob.jobs (kind, queue, state, attempts,"
		   " last_error, unique_key) values ('keyed', 'nowhere',"
		   " 'available', 2, 'e', 'web-key') returning id");
	long long k2 = t_long(
		c,
		"insert into pgjob.jobs (kind, queue, state, attempts,"
		" last_error, finished_at, unique_key) values ('keyed',"
		" 'nowhere', 'dead', 3, 'e', now(), 'web-key') returning id");
	snprintf(body, sizeof(body), "{\"ids\": [%lld, %lld]}", k1, k2);
	assert_int_equal(affected(post(db, 1, "jobs/retry", body, 200)), 1);
	t_assert_job(c, k1, "state || '|' || attempts", "available|0");
	t_assert_job(c, k2, "state", "dead");
	long long k[2];
	for (int i = 0; i < 2; i++)
		k[i] = t_long(c, "insert into pgjob.jobs (kind, queue, state,"
				 " attempts, finished_at, unique_key) values"
				 " ('keyed', 'nowhere', 'dead', 3, now(),"
				 " 'web-key-2') returning id");
	long long k3 = k[0], k4 = k[1];
	snprintf(body, sizeof(body), "{\"ids\": [%lld, %lld]}", k3, k4);
	assert_int_equal(affected(post(db, 1, "jobs/retry", body, 200)), 1);
	t_assert_job(c, k3, "state", "dead");
	t_assert_job(c, k4, "state", "available");
	long long fresh = t_long(
		c, "insert into pgjob.jobs (kind, queue) values ('keyed',"
		   " 'nowhere') returning id");
	snprintf(body, sizeof(body), "{\"ids\": [%lld]}", fresh);
	assert_int_equal(affected(post(db, 1, "jobs/retry", body, 200)), 0);
	struct t_run r;
	char n[24];
	snprintf(n, sizeof(n), "%lld", k3);
	t_pgjob(&r, ci, "retry", n, NULL);
	assert_int_equal(r.status, 1);
	char *msg = xasprintf("pgjob: job %lld cannot be retried: job %lld "
			      "holds its unique_key \"web-key-2\"\n",
			      k3, k4);
	assert_string_equal(r.err, msg);
	free(msg);
	t_run_free(&r);
	snprintf(n, sizeof(n), "%lld", fresh);
	t_pgjob(&r, ci, "retry", n, NULL);
	assert_int_equal(r.status, 1);
	assert_non_null(strstr(r.err, "has not failed"));
	t_run_free(&r);

	snprintf(path, sizeof(path), "job/%lld", id);
	snprintf(body, sizeof(body), "{\"ids\": [%lld]}", id);

	/* Pause: a job of the paused queue does not start while the
	 * others do, from the queue's first job to its last. */
	cJSON_Delete(post(db, 1, "queues/pause", "{\"queue\": \"slow\"}", 200));
	long long held = t_long(c, "select pgjob.enqueue('slowok', queue => "
				   "'slow')");
	long long other = t_long(c, "select pgjob.enqueue('ok')");
	t_wait_state(c, other, "done", 60);
	t_assert_job(c, held, "state", "available");
	j = t_web_get(db, "queues", NULL, 200);
	int seen = 0;
	const cJSON *q;
	cJSON_ArrayForEach(q, item(j, "queues"))
	{
		if (strcmp(str(q, "queue"), "slow") != 0)
			continue;
		seen = 1;
		assert_true(cJSON_IsTrue(item(q, "paused")));
		assert_int_equal(num(q, "available"), 1);
	}
	assert_true(seen);
	cJSON_Delete(j);
	cJSON_Delete(
		post(db, 1, "queues/resume", "{\"queue\": \"slow\"}", 200));
	t_wait_state(c, held, "done", 60);
	j = post(db, 1, "queues/pause", "{\"queue\": \"no such\"}", 404);
	assert_non_null(strstr(str(j, "error"), "no such"));
	cJSON_Delete(j);

	/* Limits: set, shown, refused when wrong, reset. */
	cJSON_Delete(post(db, 1, "queues/limits",
			  "{\"queue\": \"default\", \"set\": "
			  "{\"global_concurrency\": 3, \"rate\": \"10/s\"}}",
			  200));
	j = t_web_get(db, "queues", NULL, 200);
	cJSON_ArrayForEach(q, item(j, "queues"))
	{
		if (strcmp(str(q, "queue"), "default") == 0) {
			const cJSON *l = item(q, "limits");
			assert_int_equal(num(l, "global_concurrency"), 3);
			assert_int_equal(num(l, "rate"), 10);
			assert_string_equal(str(l, "source"), "sql");
		}
	}
	cJSON_Delete(j);
	j = post(db, 1, "queues/limits",
		 "{\"queue\": \"default\", \"set\": {\"speed\": 3}}", 400);
	assert_non_null(strstr(str(j, "error"), "speed"));
	cJSON_Delete(j);
	cJSON_Delete(post(db, 1, "queues/limits",
			  "{\"queue\": \"default\", \"reset\": true}", 200));
	t_assert_value(c, "config",
		       "select coalesce((select source from pgjob.limits"
		       " where queue = 'default'), 'config')");

	/* Bulk cancel of a filter's matches, then delete them. */
	t_exec(c, "select pgjob.enqueue('later', run_at => now() + "
		  "interval '1 hour') from generate_series(1, 30)");
	j = t_web_get(db, "jobs/count", "kind=later", 200);
	assert_int_equal(num(j, "count"), 30);
	cJSON_Delete(j);
	assert_int_equal(affected(post(db, 1, "jobs/cancel",
				       "{\"filter\": {\"kind\": \"later\"}, "
				       "\"expect\": 30}",
				       200)),
			 30);
	t_assert_value(
		c, "30",
		"select count(*) from pgjob.all_jobs where kind = 'later'"
		" and state = 'cancelled'");
	assert_int_equal(affected(post(db, 1, "jobs/delete",
				       "{\"filter\": {\"kind\": \"later\", "
				       "\"state\": \"cancelled\"}, "
				       "\"expect\": 30}",
				       200)),
			 30);
	t_assert_value(
		c, "0",
		"select count(*) from pgjob.all_jobs where kind = 'later'");
	/* Delete by id: the dead-then-done job, and its attempts. */
	assert_int_equal(affected(post(db, 1, "jobs/delete", body, 200)), 1);
	t_assert_value(c, "0",
		       "select count(*) from pgjob.attempts where job_id = "
		       "%lld",
		       id);
	/* A filter that would act on more than it says: refused. */
	j = post(db, 1, "jobs/delete",
		 "{\"filter\": {\"kinds\": \"x\"}, \"expect\": 1}", 400);
	assert_non_null(strstr(str(j, "error"), "unknown key \"kinds\""));
	cJSON_Delete(j);
	cJSON_Delete(post(db, 1, "jobs/delete",
			  "{\"filter\": {\"workflow\": 5}, \"expect\": 1}",
			  400));
	cJSON_Delete(post(db, 1, "jobs/cancel", "{\"ids\": [1.5]}", 400));
	cJSON_Delete(post(db, 1, "jobs/cancel", "{}", 400));

	/* Schedules: listed with the next tick, disabled, run now. */
	t_wait_until(c, 60, "select count(*) = 1 from pgjob.schedule_list");
	j = t_web_get(db, "schedules", NULL, 200);
	const cJSON *s = cJSON_GetArrayItem(item(j, "schedules"), 0);
	assert_string_equal(str(s, "name"), "tick");
	assert_string_equal(str(s, "cron"), "0 0 1 1 *");
	assert_non_null(strstr(str(s, "next_tick"), "-01-01T00:00:00Z"));
	assert_true(cJSON_IsTrue(item(s, "enabled")));
	cJSON_Delete(j);
	cJSON_Delete(post(db, 1, "schedules/enable",
			  "{\"name\": \"tick\", \"enabled\": false}", 200));
	t_assert_value(c, "f",
		       "select enabled from pgjob.schedules where name = "
		       "'tick'");
	cJSON_Delete(post(db, 1, "schedules/run", "{\"name\": \"tick\"}", 200));
	/* The scheduler runs it once, though disabled. */
	t_wait_until(c, 60,
		     "select count(*) = 1 from pgjob.all_jobs where kind = 'ok'"
		     " and queue = 'default' and id > %lld and state = 'done'",
		     other);
	cJSON_Delete(post(db, 1, "schedules/run", "{\"name\": \"nope\"}", 404));

	/* The overview: the instance, its workers, rates, health. */
	j = t_web_get(db, "overview", NULL, 200);
	const cJSON *inst = item(j, "instances");
	assert_int_equal(cJSON_GetArraySize(inst), 1);
	assert_int_equal(cJSON_GetArraySize(
				 item(cJSON_GetArrayItem(inst, 0), "workers")),
			 2);
	/* Each worker's process handler crashes (test_process's crash loop
	 * has the count and kinds written; none here). */
	const cJSON *w0 = cJSON_GetArrayItem(
		item(cJSON_GetArrayItem(inst, 0), "workers"), 0);
	assert_true(cJSON_IsNumber(item(w0, "process_crashes")));
	assert_true(cJSON_IsNull(item(w0, "crash_loops")));
	assert_int_equal(cJSON_GetArraySize(item(j, "rates")), 60);
	assert_true(cJSON_IsNumber(item(item(j, "health"), "dead_tuples")));
	assert_true(cJSON_IsFalse(item(j, "estimates")));
	cJSON_Delete(j);

	/* Tasks and duties: the scheduler's lease is held. */
	j = t_web_get(db, "tasks", NULL, 200);
	seen = 0;
	cJSON_ArrayForEach(q, item(j, "duties")) seen +=
		strcmp(str(q, "name"), "pgjob:scheduler") == 0;
	assert_int_equal(seen, 1);
	cJSON_Delete(j);

	t_stop_clean(d);
	db_close(db);
	PQfinish(c);
	free(ci);
}

/* Workflows: the list, one workflow's steps and edges. */
static void
test_workflows(void **state)
{
	char *ci = t_db_migrated("t_web_wf");
	PGconn *c = t_connect(ci);
	struct db_conn *db = t_web_db(ci);
	char path[64];

	long long wf =
		t_long(c, "select pgjob.enqueue_workflow('{\"name\": \"w<b>\","
			  " \"steps\": [{\"name\": \"a\", \"kind\": \"k\"},"
			  "  {\"name\": \"b\", \"kind\": \"k\","
			  "   \"after\": [\"a\"]}]}')");
	cJSON *j = t_web_get(db, "workflows", NULL, 200);
	const cJSON *w = cJSON_GetArrayItem(item(j, "workflows"), 0);
	assert_int_equal(num(w, "id"), wf);
	assert_string_equal(str(w, "name"), "w<b>");
	assert_string_equal(str(w, "state"), "running");
	cJSON_Delete(j);
	snprintf(path, sizeof(path), "workflow/%lld", wf);
	j = t_web_get(db, path, NULL, 200);
	assert_int_equal(cJSON_GetArraySize(item(j, "steps")), 2);
	assert_int_equal(cJSON_GetArraySize(item(j, "edges")), 1);
	cJSON_Delete(j);
	cJSON_Delete(t_web_get(db, "workflow/424242", NULL, 404));
	/* Its steps, by the list's filter. */
	snprintf(path, sizeof(path), "workflow=%lld", wf);
	j = t_web_get(db, "jobs", path, 200);
	assert_int_equal(cJSON_GetArraySize(item(j, "jobs")), 2);
	cJSON_Delete(j);

	db_close(db);
	PQfinish(c);
	free(ci);
}

/* 1 when s is valid UTF-8 all through. */
static int
utf8(const char *s)
{
	uint32_t cp;
	while (*s) {
		size_t n = text_char(s, &cp);
		if (!n)
			return 0;
		s += n;
	}
	return 1;
}

/* GET path: the raw body, which must be valid UTF-8 (caller frees). */
static char *
get_raw(struct db_conn *db, const char *path, const char *query)
{
	struct web_response out;
	t_web_call(db, path, query, &out);
	if (out.status != 200)
		fail_msg("GET %s: %d %s", path, out.status, out.body);
	if (!utf8(out.body))
		fail_msg("GET %s: not UTF-8: %s", path, out.body);
	return out.body;
}

/*
 * A database in SQL_ASCII keeps any bytes in text and jsonb: what a
 * client wrote there reaches the browser as valid UTF-8 (a byte that is
 * not becomes U+FFFD), in every page that shows it.
 */
static void
test_not_utf8(void **state)
{
	PGconn *c = t_connect(t_server_conninfo());
	t_exec(c, "drop database if exists t_web_ascii with (force)");
	t_exec(c, "create database t_web_ascii encoding 'SQL_ASCII'"
		  " locale 'C' template template0");
	PQfinish(c);
	char *ci = xasprintf("%s dbname=t_web_ascii", t_server_conninfo());
	t_migrate(ci);
	c = t_connect(ci);
	struct db_conn *db = t_web_db(ci);
	char path[64];

	long long id =
		t_long(c, "insert into pgjob.jobs (kind, queue, payload, state,"
			  "  last_error, finished_at)"
			  " values (E'k\\xff\\x1b[2J', E'q\\xfe',"
			  "  E'{\"a\": \"\\xc2\\x9b2J\\xff\"}', 'dead',"
			  "  E'err\\xfe\\x07', now()) returning id");
	snprintf(path, sizeof(path), "job/%lld", id);
	char *body = get_raw(db, path, NULL);
	cJSON *j = cJSON_Parse(body);
	const cJSON *job = item(j, "job");
	assert_string_equal(str(job, "kind"), "k\xef\xbf\xbd\x1b[2J");
	assert_string_equal(str(job, "last_error"), "err\xef\xbf\xbd\x07");
	assert_string_equal(str(item(job, "payload"), "a"), "\xc2\x9b"
							    "2J\xef\xbf\xbd");
	/* Not pasteable into a terminal as it is. */
	assert_true(cJSON_IsNull(item(j, "enqueue_command")));
	cJSON_Delete(j);
	free(body);
	free(get_raw(db, "jobs", NULL));
	free(get_raw(db, "jobs", "state=dead"));
	free(get_raw(db, "queues", NULL));
	free(get_raw(db, "overview", NULL));
	snprintf(path, sizeof(path), "job/%lld/payload", id);
	free(get_raw(db, path, NULL));

	db_close(db);
	PQfinish(c);
	free(ci);
}

/*
 * Issue 49: "scheduled" and "retrying" as filters (listed, counted, acted
 * on); a time that is not one refused with the field's name; a count that
 * says whether it is exact; an action on a filter in steps (limit, next,
 * before) so that a page can show its progress; a running count never a
 * lower bound ("0+"), and estimated totals past the cap; the list's error
 * is its end (a traceback's last line).
 */
static void
test_issue49(void **state)
{
	char *ci = t_db_migrated("t_web_issue49");
	PGconn *c = t_connect(ci);
	struct db_conn *db = t_web_db(ci);
	char ids[64];

	t_exec(c, "insert into pgjob.jobs (id, kind, run_at, attempts)"
		  " overriding system value values"
		  " (1, 'k', now() + interval '1 day', 0),"
		  " (2, 'k', now() + interval '1 day', 1),"
		  " (3, 'k', now() + interval '1 day', 0),"
		  " (4, 'k', now() - interval '1 day', 1),"
		  " (5, 'k', now() - interval '1 day', 0)");
	cJSON *j = t_web_get(db, "jobs", "state=scheduled", 200);
	ids_of(j, ids, sizeof(ids));
	assert_string_equal(ids, "3,2,1");
	cJSON_Delete(j);
	j = t_web_get(db, "jobs", "state=retrying", 200);
	ids_of(j, ids, sizeof(ids));
	assert_string_equal(ids, "4,2");
	cJSON_Delete(j);
	j = t_web_get(db, "jobs/count", "state=scheduled&estimate=1", 200);
	assert_int_equal((int)num(j, "count"), 3);
	assert_true(cJSON_IsFalse(item(j, "estimate")));
	cJSON_Delete(j);
	j = t_web_get(db, "jobs", "state=bogus", 400);
	assert_non_null(strstr(str(j, "error"), "scheduled, retrying"));
	cJSON_Delete(j);
	/* Not PostgreSQL's "invalid input syntax for type timestamp". */
	j = t_web_get(db, "jobs", "from=garbage", 400);
	assert_int_equal(strncmp(str(j, "error"), "from, to: ", 10), 0);
	cJSON_Delete(j);
	j = t_web_get(db, "jobs/count", "to=garbage", 400);
	cJSON_Delete(j);
	j = post(db, 1, "jobs/cancel",
		 "{\"filter\": {\"from\": \"x\"}, \"expect\": 1}", 400);
	cJSON_Delete(j);

	/* Cancel the scheduled ones two at a time: the first step says
	 * where to go on, the second ends. */
	j = post(db, 1, "jobs/cancel",
		 "{\"filter\": {\"state\": \"scheduled\"}, \"expect\": 3,"
		 " \"limit\": 2}",
		 200);
	assert_int_equal((int)num(j, "affected"), 2);
	assert_int_equal((int)num(j, "next"), 2);
	cJSON_Delete(j);
	j = post(db, 1, "jobs/cancel",
		 "{\"filter\": {\"state\": \"scheduled\"}, \"expect\": 1,"
		 " \"limit\": 2, \"before\": \"2\"}",
		 200);
	assert_int_equal((int)num(j, "affected"), 1);
	assert_true(cJSON_IsNull(item(j, "next")));
	cJSON_Delete(j);
	t_assert_value(c,
		       "1 cancelled,2 cancelled,3 cancelled,4 available,"
		       "5 available",
		       "select string_agg(id || ' ' || state, ',' order by id)"
		       " from pgjob.all_jobs");

	/* The list's error: its end. */
	t_exec(c, "update pgjob.jobs set last_error = repeat(e'frame\\n', 200)"
		  " || 'ValueError: the end' where id = 5");
	j = t_web_get(db, "jobs", "state=available", 200);
	const char *e =
		str(cJSON_GetArrayItem(item(j, "jobs"), 0), "last_error");
	assert_non_null(strstr(e, "ValueError: the end"));
	cJSON_Delete(j);

	/* Past the cap: running is near, never "at least"; the totals come
	 * with the planner's estimates. */
	t_exec(c, "insert into pgjob.jobs (id, kind, queue)"
		  " overriding system value"
		  " select i, 'k', 'cap' from generate_series(11, 10011) i");
	t_exec(c, "analyze pgjob.jobs");
	j = t_web_get(db, "overview", NULL, 200);
	const cJSON *it;
	int seen = 0;
	cJSON_ArrayForEach(it, item(j, "queues"))
	{
		if (strcmp(str(it, "queue"), "cap") != 0)
			continue;
		seen = 1;
		char *al = cJSON_PrintUnformatted(item(it, "at_least"));
		char *es = cJSON_PrintUnformatted(item(it, "estimated"));
		assert_non_null(strstr(al, "available"));
		assert_null(strstr(al, "running"));
		assert_string_equal(es, "[\"running\"]");
		free(al);
		free(es);
	}
	assert_true(seen);
	assert_true(num(item(j, "estimated_totals"), "available") > 5000);
	cJSON_Delete(j);

	/* Tables past 300,000 rows (as their statistics say: set here, a
	 * superuser's shortcut to ten million jobs): a page's count is the
	 * planner's estimate, said so; a confirmation's still exact. */
	t_exec(c, "update pg_class set reltuples = 10000000"
		  " where oid = 'pgjob.jobs'::regclass");
	j = t_web_get(db, "jobs/count", "queue=cap&estimate=1", 200);
	assert_true(cJSON_IsTrue(item(j, "estimate")));
	assert_true(num(j, "count") > 0);
	cJSON_Delete(j);
	j = t_web_get(db, "jobs/count", "queue=cap", 200);
	assert_true(cJSON_IsFalse(item(j, "estimate")));
	assert_int_equal((int)num(j, "count"), 10001);
	cJSON_Delete(j);

	db_close(db);
	PQfinish(c);
	free(ci);
}

/* A step of 1,000 dead jobs retried by filter; whether the server paused
 * between its statements for the database's other work. */
static bool
retry_step(struct db_conn *db, long long *left, long long *next)
{
	char body[160], before[40] = "";
	if (*next)
		snprintf(before, sizeof(before), ", \"before\": \"%lld\"",
			 *next);
	snprintf(body, sizeof(body),
		 "{\"filter\": {\"queue\": \"bulk\"}, \"expect\": %lld,"
		 " \"limit\": 1000%s}",
		 *left, before);
	cJSON *j = post(db, 1, "jobs/retry", body, 200);
	*left -= (long long)num(j, "affected");
	const cJSON *n = item(j, "next");
	*next = cJSON_IsNumber(n) ? (long long)n->valuedouble : 0;
	bool y = cJSON_IsTrue(item(j, "yielded"));
	assert_true(cJSON_IsBool(item(j, "yielded")));
	cJSON_Delete(j);
	return y;
}

/* Another session's work: commits in a loop until killed. */
static pid_t
busy_session(const char *ci)
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* Gone with the test, whatever ends it, and after a minute at
		 * most: a failed assertion does not reach t_stop(). */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		PGconn *b = PQconnectdb(ci);
		time_t end = time(NULL) + 60;
		while (time(NULL) < end)
			PQclear(PQexec(b, "select 1"));
		_exit(0);
	}
	return pid;
}

/*
 * A bulk action gives way to the database's other work (src/web/
 * bulk_yield.c): alone, its steps say "yielded": false; while another
 * session commits thousands of times a second, a step soon says true (the
 * rate is read over windows of a second); the jobs are all retried either
 * way.  How long the pauses are is the benchmark's (tests/bench/
 * web_bulk.sh), not asserted here.
 */
static void
test_bulk_yields(void **state)
{
	char *ci = t_db_migrated("t_web_yield");
	PGconn *c = t_connect(ci);
	struct db_conn *db = t_web_db(ci);
	long long left = 60000, next = 0;

	t_exec(c, "insert into pgjob.jobs (queue, kind, state, attempts,"
		  "  finished_at)"
		  " select 'bulk', 'k', 'dead', 1, now()"
		  " from generate_series(1, 60000)");
	t_exec(c, "analyze pgjob.jobs");
	/* Alone: two steps a window apart, neither pauses. */
	assert_false(retry_step(db, &left, &next));
	t_sleep_ms(1200);
	assert_false(retry_step(db, &left, &next));
	t_sleep_ms(1200);
	assert_false(retry_step(db, &left, &next));

	pid_t busy = busy_session(ci);
	int yielded = 0;
	for (int i = 0; i < 200 && left > 0 && !yielded; i++) {
		yielded = retry_step(db, &left, &next);
		if (!yielded)
			t_sleep_ms(200);
	}
	t_stop(busy, SIGKILL, 10);
	assert_true(yielded);
	/* The rest, alone again: the pauses stop once a window without
	 * the other session's commits has been read. */
	int alone = 0;
	while (left > 0 && !alone) {
		alone = !retry_step(db, &left, &next);
		if (!alone)
			t_sleep_ms(200);
	}
	assert_true(alone);
	while (left > 0)
		retry_step(db, &left, &next);
	t_assert_value(c, "60000",
		       "select count(*) from pgjob.jobs where queue = 'bulk'"
		       " and state = 'available'");

	db_close(db);
	PQfinish(c);
	free(ci);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_job_page),
		cmocka_unit_test(test_jobs_list),
		cmocka_unit_test(test_filters),
		cmocka_unit_test(test_actions),
		cmocka_unit_test(test_workflows),
		cmocka_unit_test(test_not_utf8),
		cmocka_unit_test(test_issue49),
		cmocka_unit_test(test_bulk_yields),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
