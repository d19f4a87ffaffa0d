/*
 * Integration: the attempt history (sql/upgrade/013_attempts.sql).  Real pgjobd
 * processes run exec, http and sql handlers that fail, a worker is killed
 * mid-job, an operator cancels a running job; pgjob.attempts must hold one
 * row per attempt that did not end done, with its worker, outcome, status
 * and error, `pgjob show` must print the whole history (the last attempt
 * from the job row) with hostile text escaped, and the rows must go with
 * their job: pruned, or deleted at its end with retention 0.
 */
#include "testlib.h"

#include <cjson/cJSON.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"

/* "attempt|outcome|status|error" of job id's attempt rows, oldest first,
 * one per line. */
#define HISTORY_SQL                                                            \
	"select string_agg(attempt || '|' || outcome || '|' ||"                \
	"  coalesce(status::text, '-') || '|' || coalesce(error, '-'),"        \
	"  E'\\n' order by token) from pgjob.attempts where job_id = %lld"

/*
 * A shell script in the test's folder that fails (exit 3, "boom N" on
 * stderr) until it has run fails times, then prints {}; it counts its runs
 * in NAME.count.  Returns its path (a new string).
 */
static char *
flaky_script(const char *name, int fails, const char *first_run)
{
	char *path = xasprintf("%s/%s.sh", t_tmpdir(), name);
	char *text = xasprintf(
		"n=$(cat %s/%s.count 2>/dev/null || echo 0)\n"
		"n=$((n + 1))\n"
		"echo $n > %s/%s.count\n"
		"if [ $n -eq 1 ]; then %s; fi\n"
		"if [ $n -le %d ]; then echo \"boom $n\" >&2; exit 3; fi\n"
		"echo '{}'\n",
		t_tmpdir(), name, t_tmpdir(), name, first_run, fails);
	t_write_file(path, text);
	free(text);
	return path;
}

/* The line of out that contains needle, or NULL (a new string). */
static char *
line_with(const char *out, const char *needle)
{
	const char *p = strstr(out, needle);
	if (!p)
		return NULL;
	const char *b = p, *e = strchr(p, '\n');
	while (b > out && b[-1] != '\n')
		b--;
	return xstrndup(b, e ? (size_t)(e - b) : strlen(b));
}

/* Asserts that out has a line holding every one of the strings given. */
static void
assert_row(const char *out, const char *first, ...)
{
	char *l = line_with(out, first);
	if (!l)
		fail_msg("no line with \"%s\" in:\n%s", first, out);
	va_list ap;
	va_start(ap, first);
	for (const char *s; (s = va_arg(ap, const char *)) != NULL;)
		if (!strstr(l, s))
			fail_msg("\"%s\" not in the line \"%s\" of:\n%s", s, l,
				 out);
	va_end(ap);
	free(l);
}

/* A job that fails twice, then succeeds: two rows failed with exit status
 * 3 and their errors, and `pgjob show` prints three attempts, the third
 * from the job row with its worker; the job is moved to pgjob.jobs_done,
 * and its rows go when its ring is pruned. */
static void
test_fail_twice(void **state)
{
	char *ci = t_db_migrated("t_attempts_fail");
	PGconn *c = t_connect(ci);
	char *script = flaky_script("fail", 2, ":");
	pid_t p = t_start("fail", ci,
			  "workers: 1\n"
			  "defaults: { backoff: { base: 100ms, max: 100ms } }\n"
			  "handlers:\n"
			  "  flaky: { type: exec, command: [\"/bin/sh\","
			  " \"%s\"], max_attempts: 5 }\n",
			  script);
	long long id = t_long(c, "select pgjob.enqueue('flaky')");
	t_wait_state(c, id, "done", 60);
	t_assert_job(c, id, "attempts", "3");
	t_assert_value(c,
		       "1|failed|3|exit status 3: boom 1\n"
		       "2|failed|3|exit status 3: boom 2",
		       HISTORY_SQL, id);
	/* Each row has its worker, times and figures; the job row keeps the
	 * worker of its last attempt. */
	t_assert_value(c, "t",
		       "select bool_and(a.worker = j.locked_by"
		       "  and a.started_at <= a.finished_at"
		       "  and a.finished_at <= j.attempted_at"
		       "  and a.wall_ms >= 0 and a.cpu_ms >= 0"
		       "  and a.max_rss_kb > 0) and count(*) = 2"
		       " from pgjob.attempts a join pgjob.all_jobs j on j.id = "
		       "a.job_id where j.id = %lld",
		       id);
	t_assert_value(c, "t",
		       "select locked_by ~ ':1$' and last_status is null"
		       " from pgjob.all_jobs where id = %lld",
		       id);
	char *worker = t_job(c, id, "locked_by");

	struct t_run r;
	char sid[24];
	snprintf(sid, sizeof(sid), "%lld", id);
	t_pgjob(&r, ci, "show", sid, NULL);
	assert_int_equal(r.status, 0);
	const char *hist = strstr(r.out, "\nattempts\n");
	assert_non_null(hist);
	assert_row(hist, "ATTEMPT", "STARTED", "ENDED", "WORKER", "OUTCOME",
		   "STATUS", "DURATION", "ERROR", NULL);
	assert_row(hist, "boom 1", worker, " failed ", " 3 ", NULL);
	assert_row(hist, "boom 2", worker, " failed ", " 3 ", NULL);
	assert_row(hist, " done ", worker, NULL);
	t_run_free(&r);

	t_pgjob(&r, ci, "show", sid, "--json", NULL);
	assert_int_equal(r.status, 0);
	cJSON *o = cJSON_Parse(r.out);
	assert_non_null(o);
	cJSON *a = cJSON_GetObjectItem(o, "attempt_history");
	assert_int_equal(cJSON_GetArraySize(a), 3);
	const char *outcomes[] = {"failed", "failed", "done"};
	for (int i = 0; i < 3; i++) {
		cJSON *e = cJSON_GetArrayItem(a, i);
		assert_int_equal(cJSON_GetObjectItem(e, "attempt")->valuedouble,
				 i + 1);
		assert_string_equal(
			cJSON_GetObjectItem(e, "outcome")->valuestring,
			outcomes[i]);
		assert_string_equal(
			cJSON_GetObjectItem(e, "worker")->valuestring, worker);
		assert_true(
			cJSON_IsString(cJSON_GetObjectItem(e, "started_at")));
	}
	assert_int_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(a, 0), "status")
				 ->valuedouble,
			 3);
	assert_true(cJSON_IsNull(
		cJSON_GetObjectItem(cJSON_GetArrayItem(a, 2), "status")));
	cJSON_Delete(o);
	t_run_free(&r);

	t_stop_clean(p);

	/* Done at its third attempt, a plain job moved to pgjob.jobs_done
	 * (schema version 40; written in place before), its rows kept:
	 * pgjob.forget_attempts() leaves a job that is there, and the ring's
	 * pruning takes them with it. */
	t_assert_value(c, "1 2",
		       "select (select count(*) from pgjob.jobs_done"
		       "  where id = %lld) || ' ' || pgjob.forget_attempts("
		       "  array[%lld]::bigint[]) + (select count(*)"
		       "  from pgjob.attempts where job_id = %lld)",
		       id, id, id);
	t_exec(c, "select pgjob.prune_done(now() + interval '1 day')");
	t_assert_value(c, "0 0",
		       "select (select count(*) from pgjob.all_jobs) || ' ' ||"
		       " (select count(*) from pgjob.attempts)");
	free(worker);
	free(script);
	PQfinish(c);
	free(ci);
}

/*
 * The worker's ends that leave a job available or dead write their attempt
 * rows in the statement that ends them (src/db/finish.c), not through the
 * row trigger: with the trigger disabled, a failure and a dead end still
 * have their rows, whole.  (Before schema version 40 the trigger wrote them,
 * and this test found none.)
 */
static void
test_finish_writes_rows(void **state)
{
	char *ci = t_db_migrated("t_attempts_finish");
	PGconn *c = t_connect(ci);
	t_exec(c, "alter table pgjob.jobs disable trigger jobs_attempt_ended");
	char *once = flaky_script("once", 1, ":");
	char *dead = flaky_script("dead", 1, ":");
	pid_t p = t_start("finish", ci,
			  "workers: 1\n"
			  "defaults: { backoff: { base: 100ms, max: 100ms } }\n"
			  "handlers:\n"
			  "  once: { type: exec, command: [\"/bin/sh\","
			  " \"%s\"], max_attempts: 5 }\n"
			  "  dead: { type: exec, command: [\"/bin/sh\","
			  " \"%s\"], max_attempts: 1 }\n",
			  once, dead);
	long long a = t_long(c, "select pgjob.enqueue('once')");
	long long d = t_long(c, "select pgjob.enqueue('dead')");
	t_wait_state(c, a, "done", 60);
	t_wait_state(c, d, "dead", 60);
	t_assert_value(c, "1|failed|3|exit status 3: boom 1", HISTORY_SQL, a);
	t_assert_value(c, "1|dead|3|exit status 3: boom 1", HISTORY_SQL, d);
	t_assert_value(c, "t",
		       "select bool_and(a.worker = j.locked_by"
		       "  and a.token = 1 and a.started_at <= a.finished_at"
		       "  and a.wall_ms >= 0 and a.cpu_ms >= 0"
		       "  and a.max_rss_kb > 0) and count(*) = 2"
		       " from pgjob.attempts a join pgjob.all_jobs j"
		       " on j.id = a.job_id");
	t_stop_clean(p);
	free(once);
	free(dead);
	PQfinish(c);
	free(ci);
}

/* An sql handler's failure, and an exec handler's hostile stderr: ESC,
 * a line break and a byte that is not UTF-8, shown escaped on one line. */
static void
test_sql_and_hostile(void **state)
{
	char *ci = t_db_migrated("t_attempts_hostile");
	PGconn *c = t_connect(ci);
	char *script = xasprintf("%s/hostile.sh", t_tmpdir());
	t_write_file(script, "printf 'bad \\033[31mred\\nline two \\377 end' "
			     ">&2\nexit 1\n");
	pid_t p = t_start("hostile", ci,
			  "workers: 1\n"
			  "handlers:\n"
			  "  evil: { type: exec, command: [\"/bin/sh\","
			  " \"%s\"], max_attempts: 1 }\n"
			  "  div: { type: sql, statement: \"select 1 / 0\","
			  " max_attempts: 1 }\n",
			  script);
	long long evil = t_long(c, "select pgjob.enqueue('evil')");
	long long div = t_long(c, "select pgjob.enqueue('div')");
	t_wait_state(c, evil, "dead", 60);
	t_wait_state(c, div, "dead", 60);
	t_assert_value(c, "1|dead|-|22012: division by zero", HISTORY_SQL, div);
	t_assert_value(c, "t",
		       "select outcome = 'dead' and status = 1"
		       "  and error like 'exit status 1: bad %%'"
		       "  and position(E'\\x1b' in error) > 0"
		       " from pgjob.attempts where job_id = %lld",
		       evil);

	struct t_run r;
	char sid[24];
	snprintf(sid, sizeof(sid), "%lld", evil);
	t_pgjob(&r, ci, "show", sid, NULL);
	assert_int_equal(r.status, 0);
	/* Nothing reaches the terminal raw. */
	assert_null(strchr(r.out, '\x1b'));
	assert_null(strchr(r.out, '\xff'));
	/* The attempt's error on its row of the table, escaped, one line
	 * and cut. */
	const char *hist = strstr(r.out, "\nattempts\n");
	assert_non_null(hist);
	assert_row(hist, " dead ", "bad \\x1b[31mred line two", NULL);
	t_run_free(&r);

	t_stop_clean(p);
	free(script);
	PQfinish(c);
	free(ci);
}

/* kill -9 of the worker mid-job, short lease: the claim that takes over
 * the expired lease writes the attempt 'lost', with the vanished worker. */
static void
test_lost(void **state)
{
	char *ci = t_db_migrated("t_attempts_lost");
	PGconn *c = t_connect(ci);
	char *script = flaky_script("lost", 0, "sleep 60");
	pid_t p = t_start("lost", ci,
			  "workers: 1\nlease: 3s\nhandlers:\n"
			  "  slow: { type: exec, command: [\"/bin/sh\","
			  " \"%s\"] }\n",
			  script);
	long long id = t_long(c, "select pgjob.enqueue('slow')");
	t_wait_state(c, id, "running", 30);
	/* Running is written at the claim, before the handler starts: kill
	 * the worker only once the script has counted its first run, or
	 * the next attempt would be the first run (and sleep 60 s). */
	char *count = xasprintf("%s/lost.count", t_tmpdir());
	t_wait_file(count, 30);
	free(count);
	char *worker = t_job(c, id, "locked_by");
	char *until = t_job(c, id, "locked_until");
	kill(t_holder_pid(c, id), SIGKILL);
	t_wait_state(c, id, "done", 60);
	t_assert_job(c, id, "attempts || '/' || lost_attempts", "2/1");
	t_assert_value(c, "1|lost|-|-", HISTORY_SQL, id);
	char *sql = xasprintf("select worker = '%s' and finished_at >= '%s'"
			      " and wall_ms is null from pgjob.attempts"
			      " where job_id = %lld",
			      worker, until, id);
	t_assert_value(c, "t", "%s", sql);
	free(sql);

	struct t_run r;
	char sid[24];
	snprintf(sid, sizeof(sid), "%lld", id);
	t_pgjob(&r, ci, "show", sid, NULL);
	assert_int_equal(r.status, 0);
	const char *hist = strstr(r.out, "\nattempts\n");
	assert_non_null(hist);
	assert_row(hist, " lost ", worker, NULL);
	assert_row(hist, " done ", NULL);
	t_run_free(&r);

	t_stop_clean(p);
	free(until);
	free(worker);
	free(script);
	PQfinish(c);
	free(ci);
}

/* SIGTERM past shutdown_timeout: the attempt is handed back, and kept as
 * 'interrupted' with its worker; the next instance runs it again, as
 * attempt 1 again. */
static void
test_interrupted(void **state)
{
	char *ci = t_db_migrated("t_attempts_stop");
	PGconn *c = t_connect(ci);
	char *script = flaky_script("stop", 0, "sleep 60");
	char body[1024];
	snprintf(body, sizeof(body),
		 "workers: 1\nshutdown_timeout: 1s\nhandlers:\n"
		 "  slow: { type: exec, command: [\"/bin/sh\", \"%s\"] }\n",
		 script);
	const char *cfg = t_config("stop", ci, body);
	long long id = t_long(c, "select pgjob.enqueue('slow')");
	pid_t p = t_daemon(cfg, 0, "stop");
	t_wait_state(c, id, "running", 30);
	char *worker = t_job(c, id, "locked_by");
	t_stop_clean(p);
	t_assert_value(c, "1|interrupted|-|interrupted: the worker shut down",
		       HISTORY_SQL, id);
	char *sql = xasprintf("select worker = '%s' and wall_ms >= 0"
			      " from pgjob.attempts where job_id = %lld",
			      worker, id);
	t_assert_value(c, "t", "%s", sql);
	free(sql);
	p = t_daemon(cfg, 0, "stop2");
	t_wait_state(c, id, "done", 60);
	t_assert_job(c, id, "attempts || '/' || lease_token", "1/2");
	struct t_run r;
	char sid[24];
	snprintf(sid, sizeof(sid), "%lld", id);
	t_pgjob(&r, ci, "show", sid, NULL);
	assert_int_equal(r.status, 0);
	const char *hist = strstr(r.out, "\nattempts\n");
	assert_non_null(hist);
	assert_row(hist, " interrupted ", worker, NULL);
	assert_row(hist, " done ", NULL);
	t_run_free(&r);
	t_stop_clean(p);
	free(worker);
	free(script);
	PQfinish(c);
	free(ci);
}

/* An http handler answered 500 twice: failed, then dead, status 500. */
static void
test_http_status(void **state)
{
	int in_fd;
	pid_t srv;
	int port = t_httpd_start(&in_fd, &srv);
	char *ci = t_db_migrated("t_attempts_http");
	PGconn *c = t_connect(ci);
	pid_t p = t_start("http", ci,
			  "workers: 1\n"
			  "defaults: { backoff: { base: 100ms, max: 100ms } }\n"
			  "handlers:\n"
			  "  hook: { type: http,"
			  " url: \"http://127.0.0.1:%d/status/500\","
			  " max_attempts: 2 }\n",
			  port);
	long long id = t_long(c, "select pgjob.enqueue('hook')");
	t_wait_state(c, id, "dead", 60);
	t_assert_value(c,
		       "1|failed|500|HTTP 500: status 500\n"
		       "2|dead|500|HTTP 500: status 500",
		       HISTORY_SQL, id);
	t_assert_job(c, id, "last_status", "500");
	t_stop_clean(p);
	t_httpd_stop(in_fd, srv);
	PQfinish(c);
	free(ci);
}

/*
 * The other ends, built in exact states through the real trigger: pgjob
 * cancel of a running job, an attempt given back at a shutdown, a renewal
 * (no row); and the rows pruned with their jobs by pgjob prune, while a
 * job that is still waiting keeps its history, and deleted with a job
 * deleted by hand.
 */
static void
test_cancel_and_prune(void **state)
{
	char *ci = t_db_migrated("t_attempts_prune");
	PGconn *c = t_connect(ci);
	/* Three jobs running their first attempt on worker h:1. */
	t_exec(c, "insert into pgjob.jobs (id, kind, state, attempts,"
		  " lease_token, locked_by, locked_until, attempted_at)"
		  " overriding system value select g, 'k', 'running', 1, 1,"
		  " 'h:1', now() + interval '1 min', now() - interval '2s'"
		  " from generate_series(1, 3) g");
	/* While it runs, the history has its attempt, without the figures
	 * of an earlier one that the row still holds. */
	t_exec(c, "update pgjob.jobs set last_wall_ms = 99 where id = 3");
	t_assert_value(c, "1 running h:1 - t",
		       "select concat_ws(' ', attempt, outcome, worker,"
		       "  coalesce(wall_ms::text, '-'), started_at is not null)"
		       " from pgjob.job_attempts(3)");
	/* A renewal writes no row. */
	t_exec(c, "update pgjob.jobs set locked_until = locked_until"
		  " + interval '1s'");
	t_assert_value(c, "0", "select count(*) from pgjob.attempts");

	struct t_run r;
	t_pgjob(&r, ci, "cancel", "1", NULL);
	assert_int_equal(r.status, 0);
	t_run_free(&r);
	t_assert_value(c, "t",
		       "select outcome = 'cancelled' and worker = 'h:1'"
		       "  and wall_ms >= 2000 and error is null"
		       " from pgjob.attempts where job_id = 1");
	/* Ends written by hand the way a worker's look, but for
	 * locked_until, which the worker's end clears and writes its rows
	 * itself (test_finish_writes_rows): the trigger writes these.  An
	 * attempt given back at a shutdown: */
	t_exec(c, "update pgjob.jobs set state = 'available', attempts = 0,"
		  " last_error = 'interrupted: the worker shut down',"
		  " last_wall_ms = 5 where id = 2");
	t_assert_value(c, "1|interrupted|-|interrupted: the worker shut down",
		       HISTORY_SQL, 2LL);
	/* Job 3 fails and waits for its retry. */
	t_exec(c, "update pgjob.jobs set state = 'available', last_error ="
		  " 'no', last_status = 7 where id = 3");
	t_assert_value(c, "1|failed|7|no", HISTORY_SQL, 3LL);

	/* Job 1 ended a day ago; 2 and 3 still wait. */
	t_exec(c, "update pgjob.jobs set finished_at = now() - interval "
		  "'1 day' where id = 1");
	t_pgjob(&r, ci, "prune", "--older-than", "1h", NULL);
	assert_int_equal(r.status, 0);
	t_run_free(&r);
	t_assert_value(c, "2,3",
		       "select string_agg(job_id::text, ',' order by job_id)"
		       " from pgjob.attempts");
	t_assert_value(c, "2,3",
		       "select string_agg(id::text, ',' order by id)"
		       " from pgjob.all_jobs");
	/* A delete by hand, with pgjob.forget_attempts() in the same
	 * statement, by a role that has no right on pgjob.attempts (the
	 * function runs with its owner's); and the function leaves the rows of
	 * a job that still exists. */
	t_exec(c, "drop role if exists t_attempts_deleter");
	t_exec(c, "create role t_attempts_deleter");
	t_exec(c, "grant usage on schema pgjob to t_attempts_deleter");
	t_exec(c, "grant select, delete on pgjob.jobs to t_attempts_deleter");
	/* Not PUBLIC's since schema version 30 (docs/operations.md). */
	t_exec(c, "grant execute on function pgjob.forget_attempts"
		  " to t_attempts_deleter");
	t_exec(c, "set role t_attempts_deleter");
	t_assert_value(c, "0", "select pgjob.forget_attempts('{2,3}')");
	t_assert_value(c, "1",
		       "with d as (delete from pgjob.jobs"
		       "  where id = 3 returning id)"
		       " select pgjob.forget_attempts("
		       "  array(select id from d))");
	t_exec(c, "reset role");
	t_assert_value(c, "2",
		       "select string_agg(job_id::text, ',')"
		       " from pgjob.attempts");
	t_exec(c, "revoke all on pgjob.jobs from t_attempts_deleter");
	t_exec(c, "revoke all on function pgjob.forget_attempts"
		  " from t_attempts_deleter");
	t_exec(c, "revoke all on schema pgjob from t_attempts_deleter");
	t_exec(c, "drop role t_attempts_deleter");
	PQfinish(c);
	free(ci);
}

/* retention 0: a job done after a failure is deleted at its end, and its
 * attempt rows with it. */
static void
test_retention_zero(void **state)
{
	char *ci = t_db_migrated("t_attempts_ret0");
	PGconn *c = t_connect(ci);
	char *script = flaky_script("ret0", 1, ":");
	pid_t p = t_start("ret0", ci,
			  "workers: 1\nretention: 0\n"
			  "defaults: { backoff: { base: 100ms, max: 100ms } }\n"
			  "handlers:\n"
			  "  flaky: { type: exec, command: [\"/bin/sh\","
			  " \"%s\"] }\n"
			  "  fine: { type: exec, command: [\"/bin/echo\","
			  " \"{}\"] }\n",
			  script);
	long long id = t_long(c, "select pgjob.enqueue('flaky')");
	/* The failure's row is there while the job waits for its retry. */
	t_wait_until(c, 60,
		     "select count(*) = 1 from pgjob.attempts"
		     " where job_id = %lld",
		     id);
	t_wait_until(c, 60, "select not exists (select 1 from pgjob.all_jobs)");
	t_assert_value(c, "0", "select count(*) from pgjob.attempts");
	/* A job done at its first claim had none to delete. */
	long long fine = t_long(c, "select pgjob.enqueue('fine')");
	t_wait_until(c, 60,
		     "select not exists (select 1 from pgjob.all_jobs"
		     " where id = %lld)",
		     fine);
	t_assert_value(c, "0", "select count(*) from pgjob.attempts");
	t_stop_clean(p);
	free(script);
	PQfinish(c);
	free(ci);
}

/*
 * A failure due again at once (a backoff of 0) runs again in the worker
 * that held it, in place (docs/daemon.md, "Retries"): the finish writes
 * the job running again under a new lease token, with its failed
 * attempt's row, and nothing else writes one (the row trigger leaves that
 * end alone since schema version 43: a row of its own would say 'lost').
 * run_at stays where it was: the job never went back to its queue.  A
 * job failing every time ends dead at max_attempts; an sql handler's
 * retry waits for its turn on the connection as its first attempt did; a
 * process handler (the Python client) is sent the same job again, as its
 * next attempt; a kill -9 of the worker during an attempt started in place
 * loses it to the next claim as any attempt ('lost', then done); and a limited
 * queue's retry goes back to its queue, for the claim to allow (its
 * rate counts every attempt).
 */
static void
test_retry_in_place(void **state)
{
	char *ci = t_db_migrated("t_attempts_again");
	PGconn *c = t_connect(ci);
	char *twice = flaky_script("twice", 2, ":");
	char *always = flaky_script("always", 100, ":");
	char *killed = xasprintf("%s/killed.sh", t_tmpdir());
	char *text =
		xasprintf("n=$(cat %s/killed.count 2>/dev/null || echo 0)\n"
			  "n=$((n + 1))\n"
			  "echo $n > %s/killed.count\n"
			  "if [ $n -eq 1 ]; then echo once >&2; exit 3; fi\n"
			  "if [ $n -eq 2 ]; then sleep 60; fi\n"
			  "echo '{}'\n",
			  t_tmpdir(), t_tmpdir());
	t_write_file(killed, text);
	free(text);
	/* A process handler (the Python client), which gets the same job
	 * id again for each attempt in place. */
	char *py = xasprintf("%s/again.py", t_tmpdir());
	t_write_file(py, "from pgjobd_handler import Handler\n"
			 "handler = Handler()\n"
			 "@handler.kind('pyflaky')\n"
			 "async def pyflaky(job):\n"
			 "    if job.attempt < 3:\n"
			 "        raise RuntimeError('boom %d' % job.attempt)\n"
			 "    return {'ok': job.attempt}\n"
			 "handler.run()\n");
	t_exec(c, "create sequence public.t_again");
	t_exec(c, "grant usage on sequence public.t_again to public");
	pid_t p = t_start(
		"again", ci,
		"workers: 1\nlease: 3s\n"
		"defaults: { backoff: { base: 0s, max: 0s } }\n"
		"queues:\n"
		"  default: { concurrency: 10 }\n"
		"  lim: { concurrency: 10, rate: 1000/s }\n"
		"handlers:\n"
		"  twice: { type: exec, command: [\"/bin/sh\", \"%s\"],"
		" max_attempts: 5 }\n"
		"  always: { type: exec, command: [\"/bin/sh\", \"%s\"],"
		" max_attempts: 3 }\n"
		"  killed: { type: exec, command: [\"/bin/sh\", \"%s\"],"
		" max_attempts: 5 }\n"
		"  limited: { type: exec, command: [\"/bin/sh\", \"%s\"],"
		" queue: lim, max_attempts: 5 }\n"
		/* 1 / 0 at its first run only (a constant 1 / 0 would
		 * fail when planned). */
		"  sqlonce: { type: sql, statement: \"select 1 /"
		" (nextval('public.t_again') - 1)\","
		" max_attempts: 5 }\n"
		"  pyflaky: { type: process, command: [python3, \"%s\"],"
		" env: [\"PYTHONPATH=%s\"], concurrency: 4, max_attempts: 5 "
		"}\n",
		twice, always, killed, twice, py, t_src("clients/python"));
	long long id = t_long(c, "select pgjob.enqueue('twice')");
	long long dead = t_long(c, "select pgjob.enqueue('always')");
	long long sq = t_long(c, "select pgjob.enqueue('sqlonce')");
	t_wait_state(c, id, "done", 60);
	t_wait_state(c, dead, "dead", 60);
	t_wait_state(c, sq, "done", 60);
	t_assert_value(c,
		       "1|failed|3|exit status 3: boom 1\n"
		       "2|failed|3|exit status 3: boom 2",
		       HISTORY_SQL, id);
	/* Three attempts under three tokens, none lost, run_at never moved;
	 * each row's times in order, the last attempt after them. */
	t_assert_job(c, id,
		     "attempts || '/' || lease_token || '/' || lost_attempts"
		     " || '/' || (run_at = created_at)",
		     "3/3/0/true");
	/* The failures' errors went to their attempt rows; the job's row
	 * got the last one at its end, done (the worker carries it), or
	 * its own, dead. */
	t_assert_job(c, id, "last_error", "exit status 3: boom 2");
	t_assert_job(c, dead, "last_error", "exit status 3: boom 3");
	t_assert_value(c, "t",
		       "select bool_and(a.worker = j.locked_by"
		       "  and a.token = a.attempt"
		       "  and a.started_at <= a.finished_at"
		       "  and a.finished_at <= j.attempted_at"
		       "  and a.wall_ms >= 0 and a.cpu_ms >= 0)"
		       " and count(*) = 2 and max(a.started_at) >="
		       " min(a.finished_at)"
		       " from pgjob.attempts a join pgjob.all_jobs j on j.id = "
		       "a.job_id where j.id = %lld",
		       id);
	t_assert_value(c,
		       "1|failed|3|exit status 3: boom 1\n"
		       "2|failed|3|exit status 3: boom 2\n"
		       "3|dead|3|exit status 3: boom 3",
		       HISTORY_SQL, dead);
	t_assert_value(c, "1|failed|-|22012: division by zero", HISTORY_SQL,
		       sq);
	t_assert_job(c, sq, "attempts || '/' || lease_token", "2/2");
	t_exec(c, "select pgjob.enqueue('pyflaky') from generate_series(1, 8)");
	t_wait_until(c, 60,
		     "select count(*) = 8 from pgjob.all_jobs"
		     " where kind = 'pyflaky' and state = 'done'");
	t_assert_value(
		c, "8 3/3/{\"ok\": 3}",
		"select count(*) || ' ' || min(attempts || '/' ||"
		" lease_token || '/' || result::text) from pgjob.all_jobs"
		" where kind = 'pyflaky' and attempts = 3"
		" and lease_token = 3 and run_at = created_at");
	t_assert_value(
		c, "16",
		"select count(*) from pgjob.attempts a join pgjob.all_jobs"
		" j on j.id = a.job_id where j.kind = 'pyflaky'"
		" and a.outcome = 'failed' and a.token = a.attempt"
		" and a.error like 'RuntimeError: boom %%'");
	t_assert_value(
		c, "8",
		"select count(*) from pgjob.all_jobs where kind ="
		" 'pyflaky' and last_error like 'RuntimeError: boom 2%%'");
	assert_true(t_log_count("again", "attempt failed, retry at once") >= 5);

	/* Killed during the attempt it started in place: that attempt is
	 * lost (the claim that takes over the expired lease writes it),
	 * and the next one ends the job. */
	long long k = t_long(c, "select pgjob.enqueue('killed')");
	t_wait_until(c, 60,
		     "select attempts = 2 from pgjob.jobs where id = %lld", k);
	char *count = xasprintf("%s/killed.count", t_tmpdir());
	for (int i = 0; i < 300; i++) {
		char *n = t_read_file(count);
		int two = n && atoi(n) == 2;
		free(n);
		if (two)
			break;
		usleep(100 * 1000);
	}
	free(count);
	/* Its second attempt runs: the failure is in the history, not yet
	 * in the job's row. */
	t_assert_value(c, "1|failed|3|exit status 3: once", HISTORY_SQL, k);
	t_assert_job(c, k, "coalesce(last_error, '-') || '/' || state",
		     "-/running");
	kill(t_holder_pid(c, k), SIGKILL);
	t_wait_state(c, k, "done", 60);
	t_assert_value(c, "1|failed|3|exit status 3: once\n2|lost|-|-",
		       HISTORY_SQL, k);
	t_assert_job(c, k,
		     "attempts || '/' || lease_token || '/' || lost_attempts",
		     "3/3/1");
	/* The failure's error is in the history only: the worker that
	 * carried it to the job's next end died (docs/daemon.md, "A retry at
	 * once runs in place"). */
	t_assert_job(c, k, "coalesce(last_error, '-')", "-");

	/* A limited queue's retry went back to it: run_at moved. */
	char *twice_count = xasprintf("%s/twice.count", t_tmpdir());
	unlink(twice_count);
	free(twice_count);
	long long l =
		t_long(c, "select pgjob.enqueue('limited', queue => 'lim')");
	t_wait_state(c, l, "done", 60);
	t_assert_job(c, l, "attempts || '/' || (run_at > created_at)",
		     "3/true");
	t_stop_clean(p);
	free(twice);
	free(always);
	free(killed);
	free(py);
	PQfinish(c);
	free(ci);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fail_twice),
		cmocka_unit_test(test_finish_writes_rows),
		cmocka_unit_test(test_sql_and_hostile),
		cmocka_unit_test(test_lost),
		cmocka_unit_test(test_interrupted),
		cmocka_unit_test(test_http_status),
		cmocka_unit_test(test_cancel_and_prune),
		cmocka_unit_test(test_retention_zero),
		cmocka_unit_test(test_retry_in_place),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
