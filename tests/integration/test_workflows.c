/*
 * Integration: jobs that wait for other jobs, and workflows
 * (docs/workflows.md).  Real daemons run the steps; a trigger of the
 * test's own logs every release of a waiting job, so that "released
 * exactly once" is counted, not assumed.
 */
#include "testlib.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Logs each job that leaves 'waiting' (t_released) and each start. */
static void
log_releases(PGconn *c)
{
	t_exec(c, "create table t_released (id bigint, state text,"
		  " at timestamptz default clock_timestamp())");
	t_exec(c, "create table t_starts (id bigint,"
		  " at timestamptz default clock_timestamp())");
	t_exec(c, "create function t_log() returns trigger language plpgsql"
		  " as $$ begin"
		  "  if old.state = 'waiting' and new.state <> 'waiting' then"
		  "   insert into public.t_released (id, state)"
		  "    values (new.id, new.state);"
		  "  end if;"
		  "  if new.state = 'running' then"
		  "   insert into public.t_starts (id) values (new.id);"
		  "  end if;"
		  "  return null; end $$");
	t_exec(c, "create trigger t_log after update of state on pgjob.jobs"
		  " for each row execute function t_log()");
}

/* --- results flow downstream, exec and sql -------------------------------
 */

static void
test_chain_and_results(void **state)
{
	(void)state;
	char *ci = t_db_migrated("t_wf_chain");
	PGconn *c = t_connect(ci);
	log_releases(c);
	t_exec(c, "create table t_seen (id bigint, payload jsonb)");
	int port = t_free_port();
	pid_t p =
		t_start("chain", ci,
			"workers: 2\npoll_interval: 30s\n"
			"metrics: { listen: \"127.0.0.1:%d\" }\n"
			"handlers:\n"
			/* cat: the result is the payload it was given. */
			"  echo: { type: exec, command: [/bin/cat] }\n"
			"  keep: { type: sql, statement: \"insert into public."
			"t_seen values ($2, $1)\" }\n",
			port);
	t_wait_workers(c, 2, 30);
	/* A diamond: a, then b and c, then d; and e (sql) after d. */
	long long wf = t_long(
		c, "select pgjob.enqueue_workflow('{\"name\": \"diamond\","
		   " \"steps\": ["
		   "{\"name\": \"d\", \"kind\": \"echo\", \"after\": [\"b\", "
		   "\"c\"],"
		   " \"payload\": {\"step\": \"d\"}},"
		   "{\"name\": \"e\", \"kind\": \"keep\", \"after\": [\"d\"]},"
		   "{\"name\": \"a\", \"kind\": \"echo\", \"payload\": {\"n\": "
		   "1}},"
		   "{\"name\": \"b\", \"kind\": \"echo\", \"after\": [\"a\"]},"
		   "{\"name\": \"c\", \"kind\": \"echo\", \"after\": [\"a\"]}"
		   "]}')");
	t_wait_until(c, 30,
		     "select state = 'done' from pgjob.workflow_state"
		     " where id = %lld",
		     wf);
	/* d saw b's and c's results, each of which saw a's. */
	t_assert_value(
		c, "{\"n\": 1}",
		"select result -> 'pgjob' -> 'parents' -> 'b' -> 'pgjob'"
		" -> 'parents' -> 'a' from pgjob.all_jobs where step = 'd'");
	t_assert_value(c, "t",
		       "select result -> 'pgjob' -> 'parents' ? 'c'"
		       " and result ->> 'step' = 'd'"
		       " from pgjob.all_jobs where step = 'd'");
	/* The sql step got d's result in its payload ($1). */
	t_assert_value(
		c, "d",
		"select payload -> 'pgjob' -> 'parents' -> 'd' ->> 'step'"
		" from t_seen");
	/* Each child released once, after each of its parents ended. */
	t_assert_value(c, "4", "select count(*) from t_released");
	t_assert_value(c, "4", "select count(distinct id) from t_released");
	t_assert_value(c, "0",
		       "select count(*) from t_released r"
		       " join pgjob.job_deps d on d.child = r.id"
		       " join pgjob.all_jobs p on p.id = d.parent"
		       " where p.finished_at > r.at");
	/* The metrics count it (read every few seconds). */
	char *m = NULL;
	for (int i = 0; i < 150; i++) {
		free(m);
		m = t_http_get(port, "/metrics");
		if (m && strstr(m, "\npgjobd_workflows_done_total 1\n"))
			break;
		t_sleep_ms(100);
	}
	assert_non_null(strstr(m, "\npgjobd_workflows_done_total 1\n"));
	assert_non_null(strstr(m, "\npgjobd_workflows_started_total 1\n"));
	assert_non_null(strstr(m, "\npgjobd_workflows_failed_total 0\n"));
	assert_non_null(strstr(m, "\npgjobd_workflows_running 0\n"));
	free(m);
	/* A plain depends_on (ids; parents named by id) and the CLI's
	 * --after. */
	long long a = t_long(c, "select pgjob.enqueue('echo', '{\"x\": 7}')");
	char after[32];
	snprintf(after, sizeof(after), "%lld", a);
	struct t_run r;
	t_pgjob(&r, ci, "enqueue", "echo", "--after", after, NULL);
	assert_int_equal(r.status, 0);
	long long b = atoll(r.out);
	t_run_free(&r);
	t_wait_state(c, b, "done", 30);
	t_assert_value(c, "7",
		       "select result -> 'pgjob' -> 'parents' -> '%lld' ->> 'x'"
		       " from pgjob.all_jobs where id = %lld",
		       a, b);
	t_stop_clean(p);
	PQfinish(c);
	free(ci);
}

/* --- a parent that fails: cancel, run, wait ----------------------------- */

static void
test_parent_failure_policies(void **state)
{
	(void)state;
	char *ci = t_db_migrated("t_wf_policy");
	PGconn *c = t_connect(ci);
	log_releases(c);
	char flag[512];
	snprintf(flag, sizeof(flag), "%s/flag", t_tmpdir());
	unlink(flag);
	pid_t p = t_start("policy", ci,
			  "workers: 1\npoll_interval: 200ms\n"
			  "handlers:\n"
			  "  echo: { type: exec, command: [/bin/cat] }\n"
			  /* Fails until the flag file exists. */
			  "  flaky: { type: exec, max_attempts: 1,"
			  " command: [/usr/bin/test, -e, \"%s\"] }\n",
			  flag);
	t_wait_workers(c, 1, 30);
	long long parent = t_long(c, "select pgjob.enqueue('flaky')");
	long long k_cancel = t_long(
		c, "select pgjob.enqueue('echo', depends_on => array[%lld])",
		parent);
	long long k_run = t_long(c,
				 "select pgjob.enqueue('echo', depends_on =>"
				 " array[%lld], on_parent_failure => 'run')",
				 parent);
	long long k_wait = t_long(c,
				  "select pgjob.enqueue('echo', depends_on =>"
				  " array[%lld], on_parent_failure => 'wait')",
				  parent);
	/* A grandchild of the cancelled one is cancelled too. */
	long long grand = t_long(
		c, "select pgjob.enqueue('echo', depends_on => array[%lld])",
		k_cancel);
	t_wait_state(c, parent, "dead", 30);
	t_wait_state(c, k_cancel, "cancelled", 10);
	t_wait_state(c, grand, "cancelled", 10);
	t_wait_state(c, k_run, "done", 30);
	t_assert_job_has(c, k_cancel, "last_error", "ended dead", NULL);
	char name[32];
	snprintf(name, sizeof(name), "%lld", parent);
	t_assert_value(
		c, "dead",
		"select result -> 'pgjob' -> 'failed' -> '%s' ->> 'state'"
		" from pgjob.all_jobs where id = %lld",
		name, k_run);
	t_assert_job(c, k_wait, "state", "waiting");
	/* A retry of the parent revives the chain. */
	t_write_file(flag, "");
	struct t_run r;
	t_pgjob(&r, ci, "retry", name, NULL);
	assert_int_equal(r.status, 0);
	t_run_free(&r);
	t_wait_state(c, parent, "done", 30);
	t_wait_state(c, k_wait, "done", 30);
	t_assert_job(c, k_cancel, "state", "cancelled");
	/* A parent that ended already: the child starts from where it
	 * stands (done: released at once; dead: cancelled at once). */
	long long late = t_long(
		c, "select pgjob.enqueue('echo', depends_on => array[%lld])",
		parent);
	t_wait_state(c, late, "done", 30);
	/* Nothing released twice. */
	t_assert_value(c, "0",
		       "select count(*) from (select id from t_released"
		       " group by id having count(*) > 1) x");
	t_stop_clean(p);
	PQfinish(c);
	free(ci);
}

/* --- a child cancelled while it waited, then retried --------------------
 */

/* Runs `pgjob retry ID --json`; returns the state it reports. */
static char *
retry_json(const char *ci, long long id)
{
	char n[24];
	snprintf(n, sizeof(n), "%lld", id);
	struct t_run r;
	t_pgjob(&r, ci, "retry", n, "--json", NULL);
	if (r.status != 0)
		fail_msg("retry %s: exit %d: %s", n, r.status, r.err);
	const char *s = strstr(r.out, "\"state\":\"");
	assert_non_null(s);
	s += 9;
	char *state = strndup(s, strcspn(s, "\""));
	assert_non_null(state);
	t_run_free(&r);
	return state;
}

static void
test_cancel_retry_waiting(void **state)
{
	(void)state;
	char *ci = t_db_migrated("t_wf_rewait");
	PGconn *c = t_connect(ci);
	log_releases(c);
	/* Parents held back by run_at until the test lets them run. */
	long long a = t_long(c, "select pgjob.enqueue('echo', '{\"n\": 1}',"
				" run_at => now() + interval '1 hour')");
	long long b = t_long(c, "select pgjob.enqueue('echo', '{\"n\": 2}',"
				" run_at => now() + interval '1 hour')");
	long long kid = t_long(c,
			       "select pgjob.enqueue('echo', '{\"k\": 1}',"
			       " depends_on => array[%lld, %lld])",
			       a, b);
	long long solo = t_long(
		c, "select pgjob.enqueue('echo', depends_on => array[%lld])",
		a);
	struct t_run r;
	char n[24];
	for (int i = 0; i < 2; i++) {
		snprintf(n, sizeof(n), "%lld", i ? solo : kid);
		t_pgjob(&r, ci, "cancel", n, NULL);
		assert_int_equal(r.status, 0);
		t_run_free(&r);
	}
	pid_t p = t_start("rewait", ci,
			  "workers: 2\npoll_interval: 200ms\n"
			  "handlers:\n"
			  "  echo: { type: exec, command: [/bin/cat] }\n");
	t_wait_workers(c, 2, 30);
	t_exec(c, "update pgjob.jobs set run_at = now() where id = %lld", b);
	t_wait_state(c, b, "done", 30);
	/* Retried while a still waits: kid waits again, for a only. */
	char *st = retry_json(ci, kid);
	assert_string_equal(st, "waiting");
	free(st);
	t_assert_job(c, kid, "state", "waiting");
	t_assert_job(c, kid, "parents_left", "1");
	/* a ends: kid is released once, after it, with both results.  That
	 * it did not start meanwhile is what the database recorded (its
	 * starts before a's end, below), not a look after a fixed sleep. */
	t_exec(c, "update pgjob.jobs set run_at = now() where id = %lld", a);
	t_wait_state(c, kid, "done", 30);
	char name[24];
	snprintf(name, sizeof(name), "%lld", a);
	t_assert_value(c, "1",
		       "select payload -> 'pgjob' -> 'parents' -> '%s' ->> 'n'"
		       " from pgjob.all_jobs where id = %lld",
		       name, kid);
	snprintf(name, sizeof(name), "%lld", b);
	t_assert_value(c, "2",
		       "select payload -> 'pgjob' -> 'parents' -> '%s' ->> 'n'"
		       " from pgjob.all_jobs where id = %lld",
		       name, kid);
	t_assert_value(c, "0",
		       "select count(*) from t_starts s, pgjob.all_jobs p"
		       " where s.id = %lld and p.id = %lld"
		       "  and s.at < p.finished_at",
		       kid, a);
	t_assert_value(c, "1",
		       "select count(*) from t_released where id = %lld"
		       " and state = 'available'",
		       kid);
	/* Retried when its one parent has ended: released at once, with
	 * that parent's result. */
	t_assert_job(c, solo, "state", "cancelled");
	st = retry_json(ci, solo);
	assert_string_equal(st, "available");
	free(st);
	t_wait_state(c, solo, "done", 30);
	snprintf(name, sizeof(name), "%lld", a);
	t_assert_value(c, "1",
		       "select result -> 'pgjob' -> 'parents' -> '%s' ->> 'n'"
		       " from pgjob.all_jobs where id = %lld",
		       name, solo);
	t_assert_job(c, solo, "parents_left", "0");
	t_stop_clean(p);
	PQfinish(c);
	free(ci);
}

/* --- kill -9: a fan-in released exactly once ----------------------------- */

static void
test_fan_in_kill9(void **state)
{
	(void)state;
	char *ci = t_db_migrated("t_wf_kill");
	PGconn *c = t_connect(ci);
	log_releases(c);
	const char *cfg =
		t_config("kill", ci,
			 "workers: 2\npoll_interval: 200ms\n"
			 "lease: 3s\nshutdown_timeout: 1s\n"
			 "queues: { default: { concurrency: 5 } }\n"
			 "handlers:\n"
			 "  work: { type: exec,"
			 " command: [/bin/sleep, \"1\"] }\n"
			 "  sink: { type: exec, command: [/bin/cat] }\n");
	pid_t pids[2];
	t_daemons(cfg, 2, "kill", pids);
	t_wait_workers(c, 4, 30);
	/* 40 parents, one child after all of them; and 40 chains of two. */
	t_exec(c, "create table t_parents as select pgjob.enqueue('work')"
		  " as id from generate_series(1, 40)");
	long long sink = t_long(c, "select pgjob.enqueue('sink', depends_on =>"
				   " (select array_agg(id) from t_parents))");
	t_exec(c, "select pgjob.enqueue('sink', depends_on => array[id])"
		  " from t_parents");
	/* Kill one worker while it runs parents. */
	t_wait_until(c, 30,
		     "select count(*) >= 4 from pgjob.all_jobs where state = "
		     "'running'");
	long long running = t_long(c, "select min(id) from pgjob.all_jobs"
				      " where state = 'running'");
	pid_t victim = t_holder_pid(c, running);
	kill(victim, SIGKILL);
	t_wait_state(c, sink, "done", 60);
	t_wait_until(c, 60,
		     "select count(*) = 81 from pgjob.all_jobs where state = "
		     "'done'");
	/* Released exactly once each: the sink and the 40 children. */
	t_assert_value(c, "41", "select count(*) from t_released");
	t_assert_value(c, "41", "select count(distinct id) from t_released");
	/* The sink saw all 40 parents, and started after the last ended. */
	t_assert_value(c, "40",
		       "select count(*) from jsonb_object_keys((select"
		       " result -> 'pgjob' -> 'parents' from pgjob.all_jobs"
		       " where id = %lld))",
		       sink);
	t_assert_value(c, "t",
		       "select min(s.at) >= (select max(finished_at) from"
		       " pgjob.all_jobs where id in (select id from t_parents))"
		       " from t_starts s where s.id = %lld",
		       sink);
	for (int i = 0; i < 2; i++)
		t_stop(pids[i], SIGTERM, 30);
	PQfinish(c);
	free(ci);
}

/* --- bad workflows: clear errors, nothing inserted ----------------------- */

static void
test_bad_workflows(void **state)
{
	(void)state;
	char *ci = t_db_migrated("t_wf_bad");
	PGconn *c = t_connect(ci);
	static const struct {
		const char *spec, *state, *says;
	} bad[] = {
		{"{\"steps\": [{\"name\": \"a\", \"kind\": \"k\", \"after\":"
		 " [\"c\"]}, {\"name\": \"b\", \"kind\": \"k\", \"after\":"
		 " [\"a\"]}, {\"name\": \"c\", \"kind\": \"k\", \"after\":"
		 " [\"b\"]}, {\"name\": \"d\", \"kind\": \"k\"}]}",
		 "22023", "a cycle: steps \"a\", \"b\", \"c\""},
		{"{\"steps\": [{\"name\": \"a\", \"kind\": \"k\", \"after\":"
		 " [\"a\"]}]}",
		 "22023", "a cycle"},
		{"{\"steps\": [{\"name\": \"a\", \"kind\": \"k\", \"after\":"
		 " [\"zz\"]}]}",
		 "23503", "step \"a\" is after \"zz\", which is not a step"},
		{"{\"steps\": [{\"name\": \"a\", \"kind\": \"k\"},"
		 " {\"name\": \"a\", \"kind\": \"k\"}]}",
		 "22023", "two steps are named \"a\""},
		{"{\"steps\": [{\"name\": \"a\", \"kind\": \"\"}]}", "22023",
		 "step \"a\": kind must not be empty"},
		{"{\"steps\": [{\"name\": \"a\", \"kind\": \"k\", \"colour\":"
		 " 1}]}",
		 "22023", "unknown key \"colour\""},
		{"{\"steps\": []}", "22023", "steps must be a non-empty array"},
		{"{\"steps\": [{\"name\": \"a\", \"kind\": \"k\", \"payload\":"
		 " {\"pgjob\": 1}, \"after\": [\"b\"]}, {\"name\": \"b\","
		 " \"kind\": \"k\"}]}",
		 "22023", "cannot have a \"pgjob\" key"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *e = t_expect_sqlstate(
			c, bad[i].state,
			"select pgjob.enqueue_workflow($$%s$$)", bad[i].spec);
		if (!strstr(e, bad[i].says))
			fail_msg("%s: %s", bad[i].spec, e);
		free(e);
	}
	/* Over the size limit, said with the limit. */
	char *e = t_expect_sqlstate(
		c, "54000",
		"select pgjob.enqueue_workflow(jsonb_build_object('steps',"
		" (select jsonb_agg(jsonb_build_object('name', 's' || i,"
		" 'kind', 'k')) from generate_series(1, 10001) i)))");
	assert_non_null(strstr(e, "over the limit of 10000"));
	free(e);
	e = t_expect_sqlstate(c, "23503",
			      "select pgjob.enqueue('k', depends_on =>"
			      " array[424242])");
	assert_non_null(strstr(e, "no job 424242"));
	free(e);
	t_assert_value(c, "0", "select count(*) from pgjob.all_jobs");
	t_assert_value(c, "0", "select count(*) from pgjob.workflows");
	t_assert_value(c, "0", "select count(*) from pgjob.job_deps");
	/* The CLI reads the same JSON and says the same. */
	char path[512];
	snprintf(path, sizeof(path), "%s/cycle.json", t_tmpdir());
	t_write_file(path, bad[0].spec);
	struct t_run r;
	t_pgjob(&r, ci, "workflow", "submit", path, NULL);
	assert_int_equal(r.status, 1);
	assert_non_null(strstr(r.err, "a cycle"));
	t_run_free(&r);
	t_write_file(path, "[1, 2]");
	t_pgjob(&r, ci, "workflow", "submit", path, NULL);
	assert_int_equal(r.status, 2);
	t_run_free(&r);
	PQfinish(c);
	free(ci);
}

/* --- show, cancel, the views --------------------------------------------- */

static void
test_show_and_cancel(void **state)
{
	(void)state;
	char *ci = t_db_migrated("t_wf_show");
	PGconn *c = t_connect(ci);
	char path[512];
	snprintf(path, sizeof(path), "%s/wf.json", t_tmpdir());
	t_write_file(path,
		     "{\"name\": \"publish \\u001b[31mpost\", \"steps\": ["
		     "{\"name\": \"resize\", \"kind\": \"img\"},"
		     "{\"name\": \"thumb\", \"kind\": \"img\"},"
		     "{\"name\": \"publish\", \"kind\": \"pub\","
		     " \"after\": [\"resize\", \"thumb\"],"
		     " \"on_parent_failure\": \"run\"},"
		     "{\"name\": \"notify\", \"kind\": \"mail\","
		     " \"after\": [\"publish\"]}]}");
	struct t_run r;
	t_pgjob(&r, ci, "workflow", "submit", path, NULL);
	assert_int_equal(r.status, 0);
	char id[32];
	snprintf(id, sizeof(id), "%lld", atoll(r.out));
	t_run_free(&r);
	t_pgjob(&r, ci, "workflow", "show", id, NULL);
	assert_int_equal(r.status, 0);
	/* Depth by indentation; parents named; hostile text escaped. */
	assert_non_null(strstr(r.out, "\n  resize "));
	assert_non_null(strstr(r.out, "\n    publish "));
	assert_non_null(strstr(r.out, "\n      notify "));
	assert_non_null(strstr(r.out, "resize, thumb (on failure: run)"));
	assert_non_null(strstr(r.out, "\\x1b[31mpost"));
	assert_null(strchr(r.out, '\033'));
	assert_non_null(strstr(r.out, "running, 4 steps"));
	t_run_free(&r);
	/* pgjob status counts them per queue, in a column of their own. */
	t_pgjob(&r, ci, "status", NULL);
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, "WAITING"));
	t_run_free(&r);
	t_pgjob(&r, ci, "status", "--json", NULL);
	assert_non_null(strstr(r.out, "\"waiting\":2"));
	t_run_free(&r);
	/* The waiting steps, by state. */
	t_pgjob(&r, ci, "jobs", "--state", "waiting", NULL);
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, "pub"));
	assert_non_null(strstr(r.out, "mail"));
	assert_null(strstr(r.out, "img"));
	t_run_free(&r);
	t_pgjob(&r, ci, "workflow", "show", id, "--json", NULL);
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, "\"after\":[\"resize\",\"thumb\"]"));
	t_run_free(&r);
	/* A waiting step cancelled by itself: its child follows its policy
	 * (cancel). */
	char notify_id[32];
	char *v = t_value(
		c, "select id from pgjob.all_jobs where step = 'notify'");
	snprintf(notify_id, sizeof(notify_id), "%s", v);
	free(v);
	t_pgjob(&r, ci, "cancel", notify_id, NULL);
	assert_int_equal(r.status, 0);
	t_run_free(&r);
	t_assert_value(
		c, "cancelled",
		"select state from pgjob.all_jobs where step = 'notify'");
	/* resize is running (a worker of nobody's: the test claims it). */
	t_exec(c,
	       "update pgjob.jobs set state = 'running', locked_by = 'x',"
	       " locked_until = now() + interval '1 h' where step = 'resize'");
	t_pgjob(&r, ci, "workflow", "cancel", id, NULL);
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, "cancelled 2 step(s)"));
	t_run_free(&r);
	t_assert_value(c, "running|1|3",
		       "select state || '|' || running || '|' || cancelled"
		       " from pgjob.workflow_state where id = %s",
		       id);
	t_exec(c, "update pgjob.jobs set state = 'done', finished_at = now()"
		  " where step = 'resize'");
	t_assert_value(c, "failed",
		       "select state from pgjob.workflow_state where id = %s",
		       id);
	t_pgjob(&r, ci, "workflow", "show", "999", NULL);
	assert_int_equal(r.status, 1);
	assert_non_null(strstr(r.err, "no workflow 999"));
	t_run_free(&r);
	PQfinish(c);
	free(ci);
}

/* --- retention: delete mode keeps parents; a workflow goes whole ---------- */

static void
test_retention(void **state)
{
	(void)state;
	char *ci = t_db_migrated("t_wf_prune");
	PGconn *c = t_connect(ci);
	pid_t p = t_start("prune", ci,
			  "workers: 1\npoll_interval: 200ms\nretention: 0\n"
			  "handlers:\n"
			  "  echo: { type: exec, command: [/bin/cat] }\n");
	t_wait_workers(c, 1, 30);
	/* A parent whose child waits for a far run_at: written done, not
	 * deleted, under retention 0; its result reached the child. */
	/* In one transaction: under retention 0 a parent that ended is
	 * gone, and a child enqueued after that finds no parent. */
	t_exec(c, "begin");
	long long a = t_long(c, "select pgjob.enqueue('echo', '{\"v\": 3}')");
	long long b =
		t_long(c,
		       "select pgjob.enqueue('echo', run_at =>"
		       " now() + interval '1 h', depends_on => array[%lld])",
		       a);
	t_exec(c, "commit");
	long long solo = t_long(c, "select pgjob.enqueue('echo')");
	t_wait_state(c, a, "done", 30);
	t_wait_until(c, 30,
		     "select count(*) = 0 from pgjob.all_jobs where id = %lld",
		     solo);
	t_assert_value(
		c, "3",
		"select payload -> 'pgjob' -> 'parents' -> '%lld' ->> 'v'"
		" from pgjob.all_jobs where id = %lld",
		a, b);
	t_stop_clean(p);
	/* Never a parent whose child has not ended, even past the
	 * cutoff. */
	struct t_run r;
	t_pgjob(&r, ci, "prune", "--older-than", "0s", NULL);
	assert_int_equal(r.status, 0);
	t_run_free(&r);
	t_assert_value(c, "1",
		       "select count(*) from pgjob.all_jobs where id = %lld",
		       a);
	t_exec(c,
	       "update pgjob.jobs set state = 'done', finished_at = now()"
	       " where id = %lld",
	       b);
	t_pgjob(&r, ci, "prune", "--older-than", "0s", NULL);
	t_run_free(&r);
	t_assert_value(c, "0", "select count(*) from pgjob.all_jobs");
	t_assert_value(c, "0", "select count(*) from pgjob.job_deps");
	/* A workflow: nothing of it goes while one step is left, and
	 * then all of it, with its row. */
	long long wf = t_long(c, "select pgjob.enqueue_workflow('{\"steps\": ["
				 "{\"name\": \"x\", \"kind\": \"echo\"},"
				 "{\"name\": \"y\", \"kind\": \"echo\"}]}')");
	t_exec(c, "update pgjob.jobs set state = 'done', finished_at = now()"
		  " - interval '1 day' where step = 'x'");
	t_pgjob(&r, ci, "prune", "--older-than", "1h", NULL);
	t_run_free(&r);
	t_assert_value(c, "2",
		       "select count(*) from pgjob.all_jobs where workflow_id ="
		       " %lld",
		       wf);
	t_exec(c, "update pgjob.jobs set state = 'done', finished_at = now()"
		  " - interval '2 hours' where step = 'y'");
	t_pgjob(&r, ci, "prune", "--older-than", "1h", NULL);
	t_run_free(&r);
	t_assert_value(c, "0", "select count(*) from pgjob.all_jobs");
	t_assert_value(c, "0", "select count(*) from pgjob.workflows");
	PQfinish(c);
	free(ci);
}

/* --- batches: one callback, whatever ends last, wherever ----------------- */

static void
test_batches(void **state)
{
	(void)state;
	char *ci = t_db_migrated("t_wf_batch");
	PGconn *c = t_connect(ci);
	const char *cfg =
		t_config("batch", ci,
			 "workers: 2\npoll_interval: 200ms\n"
			 "lease: 3s\nshutdown_timeout: 1s\n"
			 "queues: { default: { concurrency: 5 } }\n"
			 "handlers:\n"
			 "  work: { type: exec,"
			 " command: [/bin/sleep, \"0.5\"] }\n"
			 "  bad: { type: exec, max_attempts: 1,"
			 " command: [/bin/false] }\n"
			 "  report: { type: exec, command: [/bin/cat] }\n");
	pid_t pids[2];
	t_daemons(cfg, 2, "batch", pids);
	t_wait_workers(c, 4, 30);
	long long b = t_long(c, "select pgjob.batch_open('report',"
				" '{\"to\": \"ops\"}', name => 'import')");
	long long ok = t_long(c, "select pgjob.batch_open('report',"
				 " callback_on => 'success')");
	t_exec(c,
	       "select pgjob.enqueue('work', batch_id => %lld)"
	       " from generate_series(1, 30)",
	       b);
	t_exec(c,
	       "select pgjob.enqueue('bad', batch_id => %lld)"
	       " from generate_series(1, 3)",
	       b);
	t_exec(c,
	       "select pgjob.enqueue('work', batch_id => %lld),"
	       " pgjob.enqueue('bad', batch_id => %lld)",
	       ok, ok);
	t_exec(c, "select pgjob.batch_seal(%lld)", ok);
	/* More join while it runs; a worker is killed; then the seal. */
	t_wait_until(c, 30,
		     "select count(*) >= 2 from pgjob.all_jobs where state = "
		     "'running'");
	long long running = t_long(c, "select min(id) from pgjob.all_jobs"
				      " where state = 'running'");
	kill(t_holder_pid(c, running), SIGKILL);
	t_exec(c,
	       "select pgjob.enqueue('work', batch_id => %lld)"
	       " from generate_series(1, 10)",
	       b);
	t_exec(c, "select pgjob.batch_seal(%lld)", b);
	free(t_expect_sqlstate(c, "55000",
			       "select pgjob.enqueue('work', batch_id =>"
			       " %lld)",
			       b));
	t_wait_until(c, 60,
		     "select finished_at is not null from pgjob.batches"
		     " where id = %lld",
		     b);
	long long cb = t_long(c,
			      "select callback_job from pgjob.batches"
			      " where id = %lld",
			      b);
	t_wait_state(c, cb, "done", 30);
	/* One callback, told the counts. */
	t_assert_value(
		c, "1",
		"select count(*) from pgjob.all_jobs where kind = 'report'");
	t_assert_value(c, "ops|import|43|40|3|0",
		       "select concat_ws('|', result ->> 'to', r ->> 'name',"
		       " r ->> 'total', r ->> 'done', r ->> 'dead',"
		       " r ->> 'cancelled') from pgjob.all_jobs,"
		       " lateral (select result -> 'pgjob' -> 'batch' as r) x"
		       " where id = %lld",
		       cb);
	/* callback_on success: a job died, so none. */
	t_assert_value(c, "true|",
		       "select (finished_at is not null)::text || '|' ||"
		       " coalesce(callback_job::text, '') from pgjob.batches"
		       " where id = %lld",
		       ok);
	for (int i = 0; i < 2; i++)
		t_stop(pids[i], SIGTERM, 30);

	/* The last two jobs end at the same moment, in two transactions:
	 * the second waits for the first's lock on the batch's row, then
	 * sees its count.  One callback. */
	long long b2 = t_long(c, "select pgjob.batch_open('report')");
	long long j1 =
		t_long(c, "select pgjob.enqueue('x', batch_id => %lld)", b2);
	long long j2 =
		t_long(c, "select pgjob.enqueue('x', batch_id => %lld)", b2);
	t_exec(c, "select pgjob.batch_seal(%lld)", b2);
	PGconn *c2 = t_connect(ci);
	t_exec(c, "begin");
	t_exec(c,
	       "update pgjob.jobs set state = 'done', finished_at = now()"
	       " where id = %lld",
	       j1);
	char q[256];
	snprintf(q, sizeof(q),
		 "update pgjob.jobs set state = 'done', finished_at = now()"
		 " where id = %lld",
		 j2);
	assert_int_equal(PQsendQuery(c2, q), 1);
	/* Seen from a third session: c's transaction would read one
	 * snapshot of pg_stat_activity. */
	PGconn *watch = t_connect(ci);
	t_wait_lock_wait(watch, PQbackendPID(c2), 20);
	PQfinish(watch);
	t_exec(c, "commit");
	PGresult *res;
	while ((res = PQgetResult(c2)))
		PQclear(res);
	t_assert_value(
		c, "1",
		"select count(*) from pgjob.all_jobs where kind = 'report'"
		" and payload -> 'pgjob' -> 'batch' ->> 'id' = '%lld'",
		b2);
	PQfinish(c2);
	PQfinish(c);
	free(ci);
}

/* --- every handler type reads its parents' results ------------------------ */

static void
test_every_handler_type(void **state)
{
	(void)state;
	char *ci = t_db_migrated("t_wf_handlers");
	PGconn *c = t_connect(ci);
	int in_fd;
	pid_t httpd;
	int port = t_httpd_start(&in_fd, &httpd);
	pid_t p = t_start("handlers", ci,
			  "workers: 1\npoll_interval: 200ms\n"
			  "handlers:\n"
			  "  echo: { type: exec, command: [/bin/cat] }\n"
			  "  hook: { type: http,"
			  " url: \"http://127.0.0.1:%d/ok\" }\n"
			  "  plug: { type: plugin, max_attempts: 1,"
			  " library: \"%s\", symbol: pgjobd_example }\n",
			  port, t_bin("pgjobd_example.so"));
	t_wait_workers(c, 1, 30);
	long long wf = t_long(
		c, "select pgjob.enqueue_workflow('{\"steps\": ["
		   "{\"name\": \"a\", \"kind\": \"echo\","
		   " \"payload\": {\"fail\": \"dead\"}},"
		   "{\"name\": \"h\", \"kind\": \"hook\", \"after\": [\"a\"]},"
		   "{\"name\": \"p\", \"kind\": \"plug\", \"after\": [\"a\"]}"
		   "]}')");
	t_wait_until(c, 30,
		     "select state <> 'running' from pgjob.workflow_state"
		     " where id = %lld",
		     wf);
	/* http: the body it posted (echoed back by /ok) held a's result. */
	t_assert_value(c, "dead",
		       "select ((result ->> 'body')::jsonb) -> 'pgjob' ->"
		       " 'parents' -> 'a' ->> 'fail' from pgjob.all_jobs"
		       " where step = 'h'");
	/* plugin: the example plugin fails a job whose payload says
	 * "fail": "dead", which only a's result, under pgjob.parents,
	 * does. */
	t_assert_value(c, "dead|example: asked to fail",
		       "select state || '|' || last_error from pgjob.all_jobs"
		       " where step = 'p'");
	t_assert_value(c, "failed",
		       "select state from pgjob.workflow_state where id = %lld",
		       wf);
	t_stop_clean(p);
	t_httpd_stop(in_fd, httpd);
	PQfinish(c);
	free(ci);
}

/* --- a chain's next step is claimed right behind its parent's end ---------
 *
 * The worker that ends a job with children sends a claim in the round trip
 * of that end, right behind it (src/worker/worker.c, send_turn()), and its
 * siblings leave the end's NOTIFY to it: each step of a chain is claimed by
 * the worker that ended its parent, one commit after the end, where it was
 * claimed by whichever of the four took the NOTIFY first.  A sibling's claim
 * can still come between an end's commit and the claim behind it (its poll, or
 * a NOTIFY it read late), so nine in ten, not all.  (A job that got its
 * children after it was claimed is not known to have any, and its end is
 * claimed after as before; here the chain is enqueued in one transaction.)
 */
static void
test_chain_claims_behind_ends(void **state)
{
	(void)state;
	char *ci = t_db_migrated("t_wf_behind");
	PGconn *c = t_connect(ci);
	pid_t p = t_start("behind", ci,
			  "workers: 4\npoll_interval: 30s\n"
			  "handlers:\n"
			  "  step: { type: exec, command: [/bin/true] }\n");
	t_wait_workers(c, 4, 30);
	t_exec(c, "do $$ declare p bigint; begin"
		  " p := pgjob.enqueue('step');"
		  " for i in 2 .. 41 loop p := pgjob.enqueue('step',"
		  " depends_on => array[p]); end loop; end $$");
	t_wait_until(c, 60,
		     "select count(*) = 41 from pgjob.all_jobs"
		     " where kind = 'step' and state = 'done'");
	/* 40 steps after a parent, each by its parent's worker. */
	long long same = t_long(c, "select count(*) from pgjob.job_deps d"
				   " join pgjob.all_jobs a on a.id = d.parent"
				   " join pgjob.all_jobs b on b.id = d.child"
				   " where a.locked_by = b.locked_by");
	if (same < 36)
		fail_msg("%lld of 40 steps were claimed by the worker that"
			 " ended their parent",
			 same);
	t_stop_clean(p);
	PQfinish(c);
	free(ci);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_chain_and_results),
		cmocka_unit_test(test_parent_failure_policies),
		cmocka_unit_test(test_cancel_retry_waiting),
		cmocka_unit_test(test_fan_in_kill9),
		cmocka_unit_test(test_bad_workflows),
		cmocka_unit_test(test_show_and_cancel),
		cmocka_unit_test(test_retention),
		cmocka_unit_test(test_batches),
		cmocka_unit_test(test_every_handler_type),
		cmocka_unit_test(test_chain_claims_behind_ends),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
