/*
 * Integration: jobs that no live worker serves.  A worker claims the kinds
 * it has handlers for from the queues of those handlers, so a job whose
 * queue has a typo (pgjob enqueue rec '{}' --queue defualt), or whose kind
 * is handled only in another queue, waits forever.  With real pgjobd
 * processes on the test server: pgjob enqueue warns of a queue no live
 * worker serves (and not while no worker is live at all), and pgjob
 * status, pgjob doctor, the console's overview and /metrics report the
 * jobs by kind and queue until a worker that serves them comes.
 */
#include "testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/util.h"
#include "db/db.h"
#include "web/api.h"

/* Whether a line of out, with its runs of spaces made one, holds want. */
static int
has_text(const char *out, const char *want)
{
	char *copy = xstrdup(out);
	int found = 0;
	for (char *save = NULL, *l = strtok_r(copy, "\n", &save); l && !found;
	     l = strtok_r(NULL, "\n", &save)) {
		char norm[1024];
		size_t n = 0;
		int space = 1;
		for (const char *p = l; *p && n < sizeof(norm) - 1; p++) {
			if (*p == ' ') {
				if (!space)
					norm[n++] = ' ';
				space = 1;
			} else {
				norm[n++] = *p;
				space = 0;
			}
		}
		norm[n] = '\0';
		found = strstr(norm, want) != NULL;
	}
	free(copy);
	return found;
}

/* The value of the line of /metrics that is exactly "series value", or
 * -1 when there is none. */
static double
metric(int port, const char *series)
{
	char *r = t_http_get(port, "/metrics");
	double v = -1;
	if (!r)
		return v;
	size_t n = strlen(series);
	for (const char *p = r; (p = strstr(p, series)) != NULL; p += n)
		if ((p == r || p[-1] == '\n') && p[n] == ' ') {
			v = strtod(p + n + 1, NULL);
			break;
		}
	free(r);
	return v;
}

/* Waits until /metrics says series is want (counted once a minute); want
 * 0 is also met by no series at all. */
static void
wait_metric(int port, const char *series, double want)
{
	for (int i = 0; i < 1800; i++) {
		double v = metric(port, series);
		if (v == want || (want == 0 && v < 0))
			return;
		t_sleep_ms(100);
	}
	fail_msg("%s never became %g", series, want);
}

/* The overview of the console, as web.c asks for it. */
static cJSON *
overview(const char *ci)
{
	char *err = NULL;
	struct db_conn *db = db_connect(ci, "pgjob web", &err);
	if (!db)
		fail_msg("db_connect: %s", err);
	struct web_response out = {0};
	assert_int_equal(web_api_get(db, "overview", NULL, &out), 0);
	assert_int_equal(out.status, 200);
	cJSON *j = cJSON_Parse(out.body);
	assert_non_null(j);
	free(out.body);
	db_close(db);
	return j;
}

/* The unserved pair (kind, queue) of the overview, or NULL. */
static const cJSON *
pair(const cJSON *o, const char *kind, const char *queue)
{
	const cJSON *u;
	cJSON_ArrayForEach(u, cJSON_GetObjectItem(o, "unserved"))
	{
		if (strcmp(cJSON_GetObjectItem(u, "kind")->valuestring, kind) ==
			    0 &&
		    strcmp(cJSON_GetObjectItem(u, "queue")->valuestring,
			   queue) == 0)
			return u;
	}
	return NULL;
}

static void
test_unserved(void **state)
{
	char *ci = t_db_migrated("t_unserved");
	PGconn *c = t_connect(ci);
	struct t_run r;

	/* No worker is live: no warning (every queue would be unknown). */
	t_pgjob(&r, ci, "enqueue", "rec", "{}", "--queue", "defualt", NULL);
	assert_int_equal(r.status, 0);
	assert_null(strstr(r.err, "warning"));
	t_run_free(&r);

	int port = t_free_port();
	pid_t d = t_start("served", ci,
			  "workers: 1\n"
			  "metrics: { listen: \"127.0.0.1:%d\" }\n"
			  "queues:\n  reports: {}\n"
			  "handlers:\n"
			  "  rec: { type: exec, command: [\"/bin/true\"] }\n"
			  "  report: { type: exec, command: [\"/bin/true\"],"
			  " queue: reports }\n",
			  port);
	t_wait_until(c, 60,
		     "select exists (select 1 from pgjob.workers"
		     " where kinds @> '{rec,report}')");

	/* The typo: enqueued all the same, exit 0, and a warning. */
	t_pgjob(&r, ci, "enqueue", "rec", "{}", "--queue", "defualt", NULL);
	assert_int_equal(r.status, 0);
	long long typo = atoll(r.out);
	assert_true(typo > 0);
	assert_non_null(strstr(r.err, "pgjob: warning: no live worker serves "
				      "queue \"defualt\""));
	t_run_free(&r);
	t_assert_job(c, typo, "state", "available");
	/* A queue a worker serves: no warning; the job runs. */
	t_pgjob(&r, ci, "enqueue", "rec", "{}", NULL);
	assert_int_equal(r.status, 0);
	assert_string_equal(r.err, "");
	long long ok = atoll(r.out);
	t_run_free(&r);
	t_wait_state(c, ok, "done", 60);
	/* A kind whose handler is in another queue: still served, since a
	 * worker claims each of its kinds from each of its queues. */
	t_pgjob(&r, ci, "enqueue", "report", "{}", NULL);
	assert_int_equal(r.status, 0);
	t_wait_state(c, atoll(r.out), "done", 60);
	t_run_free(&r);
	/* And one with no handler anywhere. */
	t_pgjob(&r, ci, "enqueue", "mail", "{}", "--queue", "reports", NULL);
	assert_int_equal(r.status, 0);
	assert_string_equal(r.err, "");
	t_run_free(&r);

	t_pgjob(&r, ci, "status", NULL);
	assert_int_equal(r.status, 0);
	assert_true(has_text(r.out, "waiting, no live worker serves them"));
	assert_true(has_text(r.out, "KIND QUEUE JOBS DUE OLDEST DUE WHY"));
	assert_true(has_text(r.out, "rec defualt 2 2 "));
	assert_true(has_text(r.out, "mail reports 1 1 "));
	assert_true(has_text(r.out, " queue not served"));
	assert_true(has_text(r.out, " no handler"));
	t_run_free(&r);
	t_pgjob(&r, ci, "status", "--json", NULL);
	assert_int_equal(r.status, 0);
	cJSON *j = cJSON_Parse(r.out);
	assert_non_null(j);
	const cJSON *u = cJSON_GetObjectItem(j, "unserved");
	assert_int_equal(cJSON_GetArraySize(u), 2);
	t_run_free(&r);
	cJSON_Delete(j);

	t_pgjob(&r, ci, "doctor", NULL);
	assert_int_equal(r.status, 1);
	assert_non_null(strstr(r.out, "WARN  jobs no worker serves: kind "
				      "\"rec\" in queue \"defualt\": 2 jobs "
				      "wait, and no live worker takes that "
				      "kind from that queue"));
	assert_non_null(strstr(r.out, "kind \"mail\" in queue \"reports\": 1 "
				      "jobs wait, and no live worker handles "
				      "that kind"));
	t_run_free(&r);

	j = overview(ci);
	assert_non_null(pair(j, "rec", "defualt"));
	assert_int_equal(cJSON_GetObjectItem(pair(j, "rec", "defualt"), "jobs")
				 ->valueint,
			 2);
	assert_true(cJSON_IsTrue(cJSON_GetObjectItem(pair(j, "rec", "defualt"),
						     "kind_handled")));
	assert_true(cJSON_IsFalse(cJSON_GetObjectItem(
		pair(j, "mail", "reports"), "kind_handled")));
	assert_null(pair(j, "rec", "default"));
	assert_null(pair(j, "report", "default"));
	cJSON_Delete(j);

	/* The configured queue by name; the typo, a name a client wrote,
	 * in the sum of the others (so no client's names can hide it). */
	wait_metric(port, "pgjobd_queue_unserved{queue=\"(other)\"}", 2);
	wait_metric(port, "pgjobd_queue_unserved{queue=\"reports\"}", 1);

	/* A worker whose config has the queue comes: the jobs run, and
	 * nothing is reported any more. */
	pid_t e = t_start("typo", ci,
			  "workers: 1\n"
			  "queues:\n  defualt: {}\n  reports: {}\n"
			  "handlers:\n"
			  "  rec: { type: exec, command: [\"/bin/true\"],"
			  " queue: defualt }\n"
			  "  mail: { type: exec, command: [\"/bin/true\"],"
			  " queue: reports }\n");
	t_wait_done(c, 5, 60);
	t_pgjob(&r, ci, "status", NULL);
	assert_true(has_text(r.out, "none: a live worker serves the kind and "
				    "queue of every waiting job"));
	t_run_free(&r);
	t_pgjob(&r, ci, "doctor", NULL);
	assert_non_null(strstr(r.out, "OK    jobs no worker serves: a live "
				      "worker serves the kind and queue of "
				      "every waiting job"));
	t_run_free(&r);
	j = overview(ci);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "unserved")),
			 0);
	cJSON_Delete(j);
	wait_metric(port, "pgjobd_queue_unserved{queue=\"(other)\"}", 0);

	t_stop_clean(e);
	t_stop_clean(d);
	PQfinish(c);
	free(ci);
}

/*
 * A worker of an older pgjobd does not say which queues it serves (its
 * row's queues are null): it counts as serving every queue, so that a
 * rolling upgrade reports nothing that is not so.
 */
static void
test_older_worker(void **state)
{
	char *ci = t_db_migrated("t_unserved_older");
	PGconn *c = t_connect(ci);
	t_exec(c, "insert into pgjob.workers (slot, host, pid, supervisor_pid,"
		  " version, kinds) values (1, 'old', 1, 1, '0.0.9', '{rec}')");
	t_exec(c, "select pgjob.enqueue('rec', queue => 'anything')");
	t_assert_value(c, "0", "select count(*) from pgjob.unserved()");
	t_assert_value(c, "t", "select pgjob.queue_served('anything')");
	t_exec(c, "update pgjob.workers set queues = '{default}'");
	t_assert_value(c, "anything", "select queue from pgjob.unserved()");
	t_assert_value(c, "f", "select pgjob.queue_served('anything')");
	/* No live worker at all: null, and enqueue says nothing. */
	t_exec(c, "update pgjob.workers set heartbeat_at = now() - "
		  "interval '1 hour'");
	t_assert_value(c, "",
		       "select coalesce(pgjob.queue_served('x')::text, "
		       "'')");
	PQfinish(c);
	free(ci);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unserved),
		cmocka_unit_test(test_older_worker),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
