/*
 * The failpoint sweep: every outside call fails once, in turn.
 *
 * A reference workload (exec, sql, plugin and http jobs, a retry, a dead
 * job, a workflow, a batch, a schedule tick, a leased task) runs once
 * with no failpoint and records how every job ends.  Then, for each
 * failpoint that `pgjobd --list-failpoints` prints, the same workload runs
 * on a fresh database with that failpoint armed for its first hit, and
 * must end the same way, with only the differences the failure explains:
 * an extra attempt, a re-run of an at-least-once handler.  Never a lost
 * job, never a second effect of an sql handler, never a missed or doubled
 * tick, never a child released or a batch's callback enqueued twice.  A
 * failpoint that the workload never reaches fails the sweep, so a new call
 * site cannot hide from it.  It prints one row per failpoint.
 */
#include "testlib.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"

static int http_in = -1, http_port;
static pid_t http_pid;

static int
start_httpd(void **state)
{
	http_port = t_httpd_start(&http_in, &http_pid);
	return 0;
}

static int
stop_httpd(void **state)
{
	t_httpd_stop(http_in, http_pid);
	return 0;
}

/* How one run ended. */
struct outcome {
	char states[2048];  /* "label=state" for every job, in label order */
	long long attempts; /* all attempts of all jobs */
	long long sql_rows, sql_jobs;
	long long exec_runs, exec_jobs;
	/* Jobs of the schedule, and distinct ticks among them: a run that
	 * crosses a minute gets the next minute's tick too, so the sweep
	 * compares doubled ticks, not counts. */
	long long ticks, tick_times;
	int task_held;
	int hit; /* the armed failpoint was reached */
	double seconds;
};

static const char *
workload_config(const char *name, const char *ci, const char *dir)
{
	char body[8192];
	snprintf(
		body, sizeof(body),
		"workers: 2\nlease: 2s\n"
		"defaults: { backoff: { base: 200ms, max: 200ms } }\n"
		"queues: { default: { concurrency: 4 } }\n"
		"handlers:\n"
		"  rec: { type: exec, command: [\"%s\", \"%s/exec.runs\","
		" \"0.05\"] }\n"
		"  slow: { type: exec, command: [\"%s\", \"%s/exec.runs\","
		" \"1.5\"] }\n"
		"  flaky: { type: exec, command: [\"%s\", \"%s/exec.runs\"] }\n"
		"  ledger: { type: sql, statement: \"insert into ledger"
		" values ($2)\" }\n"
		"  noop: { type: plugin, library: \"%s\","
		" symbol: pgjobd_example }\n"
		"  hook: { type: http, url: \"http://127.0.0.1:%d/ok\" }\n"
		"  tick: { type: exec, command: [\"/bin/true\"] }\n"
		"schedules:\n"
		"  minutely: { cron: \"* * * * *\", kind: tick }\n"
		"tasks:\n"
		"  feed: { command: [\"%s\", \"%s/task.starts\"] }\n",
		t_src("tests/fixtures/daemon/record.sh"), dir,
		t_src("tests/fixtures/daemon/record.sh"), dir,
		t_src("tests/fixtures/daemon/flaky.sh"), dir,
		t_bin("pgjobd_example.so"), http_port,
		t_src("tests/fixtures/daemon/task.sh"), dir);
	return t_config(name, ci, body);
}

static void
enqueue_workload(PGconn *c)
{
	t_exec(c, "create table ledger (job_id bigint primary key)");
	/* Labels keep runs comparable whatever the ids. */
	t_exec(c,
	       "insert into pgjob.jobs (kind, payload) select k, "
	       "jsonb_build_object('label', k || i) from (values ('rec'), "
	       "('ledger'), ('noop'), ('hook')) v(k), generate_series(1, 4) i");
	t_exec(c,
	       "insert into pgjob.jobs (kind, payload, max_attempts) values "
	       "('slow', '{\"label\": \"slow\"}', null), "
	       "('flaky', '{\"label\": \"flaky\"}', 3), "
	       "('noop', '{\"label\": \"dead\", \"fail\": \"dead\"}', null)");
	/* A workflow (an sql step after an exec step) and a batch whose
	 * callback comes once both of its jobs have ended: a release or a
	 * callback lost or doubled under a failure shows in the states. */
	t_exec(c, "select pgjob.enqueue_workflow('{\"steps\": ["
		  "{\"name\": \"w1\", \"kind\": \"rec\","
		  " \"payload\": {\"label\": \"wf1\"}},"
		  "{\"name\": \"w2\", \"kind\": \"ledger\","
		  " \"payload\": {\"label\": \"wf2\"}, \"after\": [\"w1\"]}"
		  "]}')");
	t_exec(c, "do $$ declare b bigint; begin"
		  " b := pgjob.batch_open('rec', '{\"label\": \"batchcb\"}');"
		  " perform pgjob.enqueue('noop', '{\"label\": \"batch1\"}',"
		  "  batch_id => b);"
		  " perform pgjob.enqueue('rec', '{\"label\": \"batch2\"}',"
		  "  batch_id => b);"
		  " perform pgjob.batch_seal(b); end $$");
	/* As if the last tick enqueued had been two minutes ago. */
	t_exec(c, "insert into pgjob.schedules values ('minutely', "
		  "date_trunc('minute', now()) - interval '2 minutes')");
}

static long long
count_lines(const char *path)
{
	char *t = t_read_file(path);
	long long n = 0;
	for (char *p = t; p && *p; p++)
		n += *p == '\n';
	free(t);
	return n;
}

static void
run_workload(const char *fp, struct outcome *o)
{
	char name[64], dir[4200];
	snprintf(name, sizeof(name), "fp_%s", fp ? fp : "reference");
	char *ci = strdup(t_db_create(name));
	int migrate_hit = 0;
	if (fp && strcmp(fp, "migrate") == 0) {
		/* The CLI's own failpoint: the first run fails and leaves
		 * nothing behind; running it again applies everything. */
		struct t_run r;
		const char *mig[] = {t_bin("pgjob"), "--database", ci,
				     "migrate", NULL};
		const char *menv[] = {"PGJOBD_FAILPOINTS=migrate:1", NULL};
		t_run(&r, 60, menv, mig);
		migrate_hit = r.status == 1 &&
			      strstr(r.err, "failpoint migrate:") != NULL;
		t_run_free(&r);
	}
	t_migrate(ci);
	snprintf(dir, sizeof(dir), "%s/%s", t_tmpdir(), name);
	char cmd[4300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' && mkdir -p '%s'", dir, dir);
	assert_int_equal(system(cmd), 0);
	PGconn *c = t_connect(ci);
	enqueue_workload(c);
	const char *cfg = workload_config(name, ci, dir);

	char env[128];
	snprintf(env, sizeof(env), "PGJOBD_FAILPOINTS=%s:1", fp ? fp : "");
	const char *envs[] = {env, NULL};
	const char *argv[] = {t_bin("pgjobd"), "-c", cfg, NULL};
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pid_t p = t_spawn(t_log(name), envs, argv);
	int settled =
		t_poll(c, 90,
		       "select count(*) = 0 from pgjob.all_jobs where state "
		       "not in ('done', 'dead') and kind <> 'tick' or "
		       "(select count(*) from pgjob.all_jobs where kind = "
		       "'tick' and state = 'done') = 0 or (select "
		       "count(*) from pgjob.leases where name = "
		       "'task:feed:0' and expires_at > now()) = 0");
	clock_gettime(CLOCK_MONOTONIC, &t1);
	o->seconds = (double)(t1.tv_sec - t0.tv_sec) +
		     (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	assert_int_equal(t_stop(p, SIGTERM, 60), 0);
	if (settled != 0)
		print_message("%s: did not settle; see %s\n", name,
			      t_log(name));
	assert_int_equal(settled, 0);

	char *s = t_value(c, "select string_agg(payload->>'label' || '=' || "
			     "state, ' ' order by payload->>'label') from "
			     "pgjob.all_jobs where kind <> 'tick'");
	snprintf(o->states, sizeof(o->states), "%s", s);
	free(s);
	o->attempts = t_long(c, "select sum(attempts) from pgjob.all_jobs");
	o->sql_rows = t_long(c, "select count(*) from ledger");
	o->sql_jobs =
		t_long(c, "select count(*) from pgjob.all_jobs where kind "
			  "= 'ledger'");
	char path[4300];
	snprintf(path, sizeof(path), "%s/exec.runs", dir);
	o->exec_runs = count_lines(path);
	o->exec_jobs =
		t_long(c, "select count(*) from pgjob.all_jobs where kind "
			  "in ('rec', 'slow', 'flaky')");
	o->ticks = t_long(c, "select count(*) from pgjob.all_jobs where kind = "
			     "'tick'");
	o->tick_times = t_long(c, "select count(distinct run_at) from "
				  "pgjob.all_jobs where kind = 'tick'");
	o->task_held = 1;
	if (fp) {
		char needle[96];
		snprintf(needle, sizeof(needle), "failpoint %s:", fp);
		o->hit =
			migrate_hit || t_count_in_file(t_log(name), needle) > 0;
	}
	PQfinish(c);
	free(ci);
}

static void
test_sweep(void **state)
{
	struct outcome ref = {0};
	run_workload(NULL, &ref);
	/* The reference itself is what the workload promises. */
	assert_int_equal(ref.sql_rows, ref.sql_jobs);
	assert_non_null(strstr(ref.states, "dead=dead"));
	assert_non_null(strstr(ref.states, "flaky=done"));
	assert_true(ref.ticks >= 1);
	assert_int_equal(ref.ticks, ref.tick_times);
	print_message("%-20s %-9s %-44s %s\n", "failpoint", "outcome",
		      "explained differences", "settled in (what failed)");
	print_message("%-20s %-9s %-44s %.1fs\n", "(none)", "reference", "",
		      ref.seconds);

	struct t_run r;
	const char *argv[] = {t_bin("pgjobd"), "--list-failpoints", NULL};
	t_run(&r, 10, NULL, argv);
	assert_int_equal(r.status, 0);
	int failures = 0, n = 0;
	for (char *line = strtok(r.out, "\n"); line;
	     line = strtok(NULL, "\n")) {
		char fp[64];
		if (sscanf(line, "%63[^\t]", fp) != 1)
			continue;
		const char *effect = strchr(line, '\t');
		struct outcome o = {0};
		run_workload(fp, &o);
		n++;
		char diff[128] = "";
		int ok = o.hit && strcmp(o.states, ref.states) == 0 &&
			 o.sql_rows == o.sql_jobs && o.ticks >= 1 &&
			 o.ticks == o.tick_times &&
			 o.exec_runs >= ref.exec_runs;
		if (o.attempts > ref.attempts)
			snprintf(diff, sizeof(diff), "+%lld attempts",
				 o.attempts - ref.attempts);
		if (o.exec_runs > ref.exec_runs)
			snprintf(diff + strlen(diff),
				 sizeof(diff) - strlen(diff),
				 "%s+%lld exec re-runs", *diff ? ", " : "",
				 o.exec_runs - ref.exec_runs);
		print_message("%-20s %-9s %-44s %.1fs (%s)\n", fp,
			      !o.hit ? "NOT HIT"
			      : ok   ? (*diff ? "explained" : "equal")
				     : "DIFFERENT",
			      diff, o.seconds, effect ? effect + 1 : "");
		if (!ok) {
			print_message(
				"  states %s\n  reference %s\n  sql %lld/%lld "
				"exec runs %lld ticks %lld (%lld times)\n",
				o.states, ref.states, o.sql_rows, o.sql_jobs,
				o.exec_runs, o.ticks, o.tick_times);
			failures++;
		}
	}
	t_run_free(&r);
	assert_true(n > 0);
	assert_int_equal(failures, 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sweep),
	};
	return cmocka_run_group_tests(tests, start_httpd, stop_httpd);
}
