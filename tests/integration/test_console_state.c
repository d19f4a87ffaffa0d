/*
 * Integration: what the web console reads and steers in the database
 * (sql/upgrade/014_console_state.sql).  Workers' totals reach pgjob.workers and
 * pgjob.worker_minutes at their heartbeats, and pgjob.throughput() gives
 * the right counts across a worker killed and restarted, and after a
 * missing grant is given (the heartbeat going on meanwhile); the function
 * on rows built in exact states (several workers, a restart, the window's
 * edges).  Schedules: a disabled one enqueues nothing
 * and, enabled again, resumes without a burst; a run asked for by hand is
 * enqueued exactly once with two instances scheduling; the controls work
 * on a schedule that has not ticked yet, and refuse an unknown one.
 */
#include "testlib.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

/* Everything in pgjob.worker_minutes: "done/failed/retried". */
static const char minutes_sql[] =
	"select concat_ws('/', sum(done), sum(failed), sum(retried))"
	" from pgjob.worker_minutes";

/* pgjob.throughput() over the last hour, summed: "done/failed/retried". */
static const char throughput_sql[] =
	"select concat_ws('/', sum(done), sum(failed), sum(retried))"
	" from pgjob.throughput(interval '1 hour')";

static const char *
throughput_config(const char *ci)
{
	return t_config(
		"tp", ci,
		"workers: 1\nlease: 3s\n"
		"handlers:\n"
		"  ok: { type: exec, command: [\"/bin/true\"] }\n"
		"  bad: { type: exec, command: [\"/bin/false\"],"
		" max_attempts: 2, backoff: { base: 100ms, max: 100ms } }\n");
}

static void
enqueue(PGconn *c, const char *kind, int n)
{
	t_exec(c, "select pgjob.enqueue('%s') from generate_series(1, %d)",
	       kind, n);
}

static void
test_throughput_across_restart(void **state)
{
	char *ci = t_db_migrated("t_console_tp");
	PGconn *c = t_connect(ci);
	pid_t d = t_daemon(throughput_config(ci), 0, "tp");
	t_wait_workers(c, 1, 20);
	/* 20 done; 3 that fail twice: 6 failed attempts, 3 of them
	 * retried, 3 dead. */
	enqueue(c, "ok", 20);
	enqueue(c, "bad", 3);
	t_wait_ended(c, 23, 60);
	/* The heartbeats (a second apart here) write the totals. */
	t_wait_until(c, 30,
		     "select concat_ws('/', sum(done_total),"
		     " sum(failed_total), sum(retried_total)) = '20/6/3'"
		     " from pgjob.workers");
	t_assert_value(c, "20/6/3", minutes_sql);
	t_assert_value(c, "20/6/3", throughput_sql);
	/* One row per minute of the hour, oldest first, ending now. */
	t_assert_value(c, "t",
		       "select count(*) = 60 and count(distinct at) = 60"
		       " and min(at) = date_trunc('minute', now())"
		       "  - interval '59 minutes'"
		       " and max(at) = date_trunc('minute', now())"
		       " and bool_and(done >= 0 and failed >= retried)"
		       " from pgjob.throughput(interval '1 hour')");
	t_assert_value(c, "t",
		       "select array_agg(at) = array_agg(at order by at)"
		       " from pgjob.throughput(interval '1 hour')");

	/* Kill the worker: its supervisor starts another, a new series from
	 * 0; what the killed one wrote stays counted, once. */
	pid_t victim = (pid_t)t_long(c, "select pid from pgjob.workers");
	kill(victim, SIGKILL);
	t_wait_until(c, 30,
		     "select count(*) = 1 and bool_and(pid <> %d)"
		     " from pgjob.workers where heartbeat_at > now()"
		     " - interval '5 seconds'",
		     (int)victim);
	enqueue(c, "ok", 10);
	t_wait_ended(c, 33, 60);
	t_wait_until(c, 30, "select (%s) = '30/6/3'", throughput_sql);
	t_assert_value(c, "2",
		       "select count(distinct (slot, worker_started_at))"
		       " from pgjob.worker_minutes");
	t_assert_value(c, "30/6/3", minutes_sql);
	/* The minute's row and the workers row are written by two
	 * statements of one heartbeat, the minute's first: wait for the
	 * second too. */
	t_wait_until(c, 30,
		     "select concat_ws('/', done_total, failed_total,"
		     " retried_total) = '10/0/0' from pgjob.workers"
		     " where pid <> %d",
		     (int)victim);
	t_stop_clean(d);
	t_assert_value(c, "30/6/3", throughput_sql);

	char *m = t_expect_sqlstate(
		c, "22023",
		"select * from pgjob.throughput(interval '3 hours')");
	assert_non_null(strstr(m, "at most 2 hours"));
	free(m);
	PQfinish(c);
	free(ci);
}

/*
 * A workers' role without the grant on pgjob.worker_minutes (an upgrade
 * whose grants were not run again): the heartbeat goes on, the failure is
 * logged once, and once granted, the next write adds everything the worker
 * ended meanwhile.
 */
static void
test_throughput_without_grant(void **state)
{
	char *ci = t_db_migrated("t_console_grant");
	PGconn *c = t_connect(ci);
	t_exec(c, "do $$ begin create role t_console_worker login;"
		  " exception when duplicate_object then null; end $$");
	t_exec(c, "grant usage on schema pgjob to t_console_worker;"
		  "grant select, insert, update, delete on all tables in"
		  " schema pgjob to t_console_worker;"
		  /* PUBLIC's no more since schema version 30. */
		  "grant execute on all functions in schema pgjob to"
		  " t_console_worker;"
		  "revoke all on pgjob.worker_minutes from t_console_worker");
	char role_ci[1200];
	snprintf(role_ci, sizeof(role_ci), "%s user=t_console_worker", ci);
	pid_t d = t_start("grant", role_ci,
			  "workers: 1\nlease: 3s\n"
			  "handlers:\n"
			  "  ok: { type: exec, command: [\"/bin/true\"] }\n");
	t_wait_workers(c, 1, 20);
	enqueue(c, "ok", 5);
	t_wait_ended(c, 5, 60);
	t_wait_until(c, 30,
		     "select done_total = 5 and heartbeat_at > now()"
		     " - interval '5 seconds' from pgjob.workers");
	t_wait_log("grant", "writing the throughput minutes failed", 1, 30);
	t_assert_value(c, "0", "select count(*) from pgjob.worker_minutes");
	enqueue(c, "ok", 2);
	t_wait_ended(c, 7, 60);
	t_exec(c, "grant select, insert, update, delete on"
		  " pgjob.worker_minutes to t_console_worker");
	t_wait_until(c, 30, "select (%s) = '7/0/0'", throughput_sql);
	t_wait_log("grant", "writing the throughput minutes works again", 1,
		   30);
	assert_int_equal(
		t_log_count("grant", "writing the throughput minutes failed"),
		1);
	t_stop_clean(d);
	PQfinish(c);
	free(ci);
}

/*
 * pgjob.throughput() on rows built by hand: per minute, the sum over the
 * workers and their registrations; minutes outside the window left out;
 * every minute of the window there, zeros included.
 */
static void
test_throughput_rows(void **state)
{
	char *ci = t_db_migrated("t_console_rows");
	PGconn *c = t_connect(ci);
	/* One transaction: one now(), whatever minute it is. */
	t_exec(c, "begin");
	t_exec(c,
	       "create temp table m (s int, started int, ago int,"
	       " done int, failed int, retried int);"
	       "insert into m values"
	       /* slot 1, then slot 1 again after a restart, then slot 2 */
	       " (1, 10, 9, 5, 1, 0), (1, 10, 8, 2, 0, 1), (1, 10, 5, 5, 2, 1),"
	       " (1, 3, 2, 4, 0, 0), (1, 3, 0, 2, 2, 1),"
	       " (2, 90, 70, 100, 50, 40), (2, 90, 29, 3, 1, 0),"
	       " (2, 90, 2, 1, 0, 0);"
	       "insert into pgjob.worker_minutes"
	       " select s, date_trunc('minute', now())"
	       "  - started * interval '1 minute',"
	       "  date_trunc('minute', now()) - ago * interval '1 minute',"
	       "  done, failed, retried from m");
	/* Minutes ago -> "done/failed/retried", every minute with work. */
	t_assert_value(
		c, "29:3/1/0 9:5/1/0 8:2/0/1 5:5/2/1 2:5/0/0 0:2/2/1",
		"select string_agg(extract(epoch from"
		" date_trunc('minute', now()) - at)::int / 60 || ':' ||"
		" concat_ws('/', done, failed, retried), ' ' order by at)"
		" from pgjob.throughput(interval '1 hour')"
		" where done + failed + retried > 0");
	t_assert_value(c, "22/6/3", throughput_sql);
	t_assert_value(c, "t",
		       "select count(*) = 60 and min(at) = date_trunc('minute',"
		       " now()) - interval '59 minutes' and max(at) ="
		       " date_trunc('minute', now())"
		       " from pgjob.throughput(interval '1 hour')");
	/* A shorter window: only its minutes; a longer one, the 70th. */
	t_assert_value(c, "3",
		       "select count(*) from pgjob.throughput("
		       "interval '3 minutes')");
	t_assert_value(c, "7/2/1",
		       "select concat_ws('/', sum(done), sum(failed),"
		       " sum(retried)) from pgjob.throughput("
		       "interval '3 minutes')");
	t_assert_value(c, "122/56/43",
		       "select concat_ws('/', sum(done), sum(failed),"
		       " sum(retried)) from pgjob.throughput("
		       "interval '2 hours')");
	t_exec(c, "commit");
	PQfinish(c);
	free(ci);
}

/* A schedule every minute, catching up every missed tick. */
/*
 * Waits until the scheduler has had two rounds that began after whatever
 * the caller committed before: a round's statements are all answered
 * before the next round reads the schedules (src/worker/scheduler.c), so
 * of two runs of schedule name asked for by hand one after the other, the
 * second is enqueued by a round that began once the first's had ended,
 * which itself began after the call.  What those rounds wrote (a tick
 * enqueued twice, a request run again) is then in the database.
 */
static void
two_rounds_after(PGconn *c, const char *ci, const char *name)
{
	for (int i = 0; i < 2; i++) {
		struct t_run r;
		t_pgjob(&r, ci, "schedule", "run", name, NULL);
		assert_int_equal(r.status, 0);
		t_run_free(&r);
		/* Cleared in the statement that enqueues the run. */
		t_wait_until(c, 30,
			     "select run_requested_at is null from"
			     " pgjob.schedules where name = '%s'",
			     name);
	}
}

static const char sched_body[] =
	"workers: 2\nlease: 3s\n"
	"handlers:\n"
	"  tick: { type: exec, command: [\"/bin/true\"] }\n"
	"schedules:\n"
	"  minutely: { cron: \"* * * * *\", kind: tick, catch_up: all,"
	" payload: { from: minutely } }\n";

/*
 * Disabled: the five ticks missed and every tick while it stays so are
 * skipped (last_tick moves on, nothing is enqueued).  Enabled again: the
 * next tick is enqueued, and none of the skipped ones.
 */
static void
test_schedule_disable_enable(void **state)
{
	char *ci = t_db_migrated("t_console_sched");
	PGconn *c = t_connect(ci);
	/* As if no instance had run for five minutes, and it was
	 * disabled. */
	t_exec(c, "insert into pgjob.schedules (name, last_tick, enabled)"
		  " values ('minutely', date_trunc('minute', now())"
		  " - interval '5 minutes', false)");
	pid_t d = t_start("sched", ci, "%s", sched_body);
	t_wait_log("sched", "schedule minutely: disabled, skipping ", 1, 30);
	/* Its last tick moved on past them (once the skip commits). */
	t_wait_until(c, 10,
		     "select last_tick >= date_trunc('minute', now())"
		     " - interval '1 minute' from pgjob.schedules"
		     " where name = 'minutely'");
	t_assert_value(c, "0", "select count(*) from pgjob.all_jobs");

	struct t_run r;
	t_pgjob(&r, ci, "schedules", "--json", NULL);
	assert_int_equal(r.status, 0);
	cJSON *j = cJSON_Parse(r.out);
	assert_non_null(j);
	cJSON *s = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "schedules"), 0);
	assert_string_equal(cJSON_GetObjectItem(s, "name")->valuestring,
			    "minutely");
	assert_true(cJSON_IsFalse(cJSON_GetObjectItem(s, "enabled")));
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(s, "next_tick")));
	assert_string_equal(cJSON_GetObjectItem(s, "kind")->valuestring,
			    "tick");
	cJSON_Delete(j);
	t_run_free(&r);

	/* The last tick skipped: nothing at or before it may run. */
	char *skipped = t_value(c, "select last_tick from pgjob.schedules"
				   " where name = 'minutely'");
	t_pgjob(&r, ci, "schedule", "enable", "minutely", NULL);
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, "schedule minutely enabled"));
	t_run_free(&r);
	/* The next tick comes within a minute, and is enqueued; the skipped
	 * ones are not. */
	t_wait_until(c, 90,
		     "select count(*) >= 1 from pgjob.all_jobs"
		     " where payload->>'from' = 'minutely'");
	/* The rounds after it (two runs by hand, after the tick) added no
	 * skipped tick, and no tick twice. */
	two_rounds_after(c, ci, "minutely");
	t_assert_value(
		c, "0",
		"select count(*) from pgjob.all_jobs where run_at <= '%s'",
		skipped);
	t_assert_value(c, "0",
		       "select count(*) - count(distinct unique_key)"
		       " from pgjob.all_jobs");
	free(skipped);

	t_pgjob(&r, ci, "schedules", NULL);
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, "NEXT TICK"));
	assert_non_null(strstr(r.out, "minutely"));
	t_run_free(&r);
	t_stop_clean(d);
	PQfinish(c);
	free(ci);
}

/* Payload and key of the runs by hand of yearly, in id order. */
static const char runs_sql[] =
	"select string_agg(concat_ws(' ', state, payload->>'from',"
	" payload->'pgjob'->>'schedule',"
	" unique_key = 'schedule:yearly:run:' ||"
	"  (payload->'pgjob'->>'run_requested_at')), ', ' order by id)"
	" from pgjob.all_jobs where payload->'pgjob'->>'schedule' = 'yearly'";

/*
 * Run now, with two instances (four workers) that may each hold the
 * scheduler lease: one job per request, also when the schedule is
 * disabled, and the request cleared.
 */
static void
test_schedule_run_once(void **state)
{
	char *ci = t_db_migrated("t_console_run");
	PGconn *c = t_connect(ci);
	pid_t p[2];
	t_daemons(t_config("run", ci,
			   "workers: 2\nlease: 3s\n"
			   "handlers:\n"
			   "  tick: { type: exec, command: [\"/bin/true\"] }\n"
			   "schedules:\n"
			   "  yearly: { cron: \"0 0 1 1 *\", kind: tick,"
			   " payload: { from: yearly } }\n"
			   /* Run by hand to see rounds go by. */
			   "  marker: { cron: \"0 0 1 1 *\", kind: tick,"
			   " payload: { from: marker } }\n"),
		  2, "run", p);
	t_wait_workers(c, 4, 20);
	t_wait_until(c, 20, "select count(*) = 2 from pgjob.schedules");

	struct t_run r;
	t_pgjob(&r, ci, "schedule", "run", "yearly", "--json", NULL);
	assert_int_equal(r.status, 0);
	cJSON *j = cJSON_Parse(r.out);
	assert_non_null(j);
	assert_string_equal(cJSON_GetObjectItem(j, "schedule")->valuestring,
			    "yearly");
	assert_true(cJSON_IsString(cJSON_GetObjectItem(j, "run_requested_at")));
	cJSON_Delete(j);
	t_run_free(&r);
	t_wait_until(c, 30,
		     "select count(*) = 1 from pgjob.all_jobs where state = "
		     "'done'");
	t_wait_until(c, 10,
		     "select run_requested_at is null from pgjob.schedules"
		     " where name = 'yearly'");
	/* The rounds after it ran it no more: still one job. */
	two_rounds_after(c, ci, "marker");
	t_assert_value(c, "done yearly yearly t", runs_sql);

	/* A disabled schedule runs when asked to. */
	t_pgjob(&r, ci, "schedule", "disable", "yearly", NULL);
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, "schedule yearly disabled"));
	t_run_free(&r);
	t_pgjob(&r, ci, "schedule", "run", "yearly", NULL);
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, "schedule yearly: run asked for at"));
	t_run_free(&r);
	t_wait_until(c, 30,
		     "select count(*) = 2 from pgjob.all_jobs where state = "
		     "'done' and payload->>'from' = 'yearly'");
	two_rounds_after(c, ci, "marker");
	t_assert_value(c, "done yearly yearly t, done yearly yearly t",
		       runs_sql);
	assert_int_equal(t_long(c, "select count(distinct unique_key)"
				   " from pgjob.all_jobs"
				   " where payload->>'from' = 'yearly'"),
			 2);
	t_stop_clean(p[0]);
	t_stop_clean(p[1]);
	PQfinish(c);
	free(ci);
}

/*
 * The controls on a schedule that a worker defines but that has not
 * ticked yet make its row (ticks from now on); an unknown name is refused
 * with the known ones as a hint.  No daemon: the worker's row is built.
 */
static void
test_schedule_controls_before_first_tick(void **state)
{
	char *ci = t_db_migrated("t_console_ctl");
	PGconn *c = t_connect(ci);
	t_exec(c,
	       "insert into pgjob.workers (slot, host, pid,"
	       " supervisor_pid, version, schedules, defined_at) values"
	       " (1, 'h', 1, 1, 'x', '{\"nightly\": {\"cron\": \"0 3 * * *\","
	       " \"kind\": \"k\", \"queue\": \"default\", \"payload\": {},"
	       " \"catch_up\": \"latest\"}}', now())");
	struct t_run r;
	t_pgjob(&r, ci, "schedule", "disable", "nightly", "--json", NULL);
	assert_int_equal(r.status, 0);
	assert_string_equal(r.out, "{\"schedule\":\"nightly\",\"enabled\":"
				   "false,\"was_enabled\":true}\n");
	t_run_free(&r);
	t_assert_value(c, "false true",
		       "select enabled || ' ' || (last_tick <= now())"
		       " from pgjob.schedules where name = 'nightly'");
	t_pgjob(&r, ci, "schedule", "run", "nightly", NULL);
	assert_int_equal(r.status, 0);
	t_run_free(&r);
	t_assert_value(c, "t",
		       "select run_requested_at is not null"
		       " from pgjob.schedules where name = 'nightly'");

	t_pgjob(&r, ci, "schedule", "enable", "nope", NULL);
	assert_int_equal(r.status, 1);
	assert_non_null(strstr(r.err, "unknown schedule 'nope'"));
	assert_non_null(strstr(r.err, "hint: Known schedules: 'nightly'"));
	t_run_free(&r);
	t_pgjob(&r, ci, "schedule", "pause", "nightly", NULL);
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "unknown subcommand \"pause\""));
	t_run_free(&r);
	t_pgjob(&r, ci, "schedule", "run", NULL);
	assert_int_equal(r.status, 2);
	t_run_free(&r);

	/* The list: the definition with its state, the next tick by its
	 * cron (03:00 UTC). */
	t_pgjob(&r, ci, "schedules", "--json", NULL);
	assert_int_equal(r.status, 0);
	cJSON *j = cJSON_Parse(r.out);
	cJSON *s = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "schedules"), 0);
	assert_string_equal(cJSON_GetObjectItem(s, "cron")->valuestring,
			    "0 3 * * *");
	assert_true(cJSON_IsFalse(cJSON_GetObjectItem(s, "enabled")));
	assert_true(cJSON_IsString(cJSON_GetObjectItem(s, "run_requested_at")));
	assert_string_equal(cJSON_GetObjectItem(s, "definer")->valuestring,
			    "h/1");
	cJSON_Delete(j);
	t_run_free(&r);
	t_exec(c, "select pgjob.schedule_enable('nightly')");
	t_pgjob(&r, ci, "schedules", "--json", NULL);
	j = cJSON_Parse(r.out);
	s = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "schedules"), 0);
	const char *next = cJSON_GetObjectItem(s, "next_tick")->valuestring;
	assert_non_null(next);
	assert_non_null(strstr(next, "T03:00:00Z"));
	cJSON_Delete(j);
	t_run_free(&r);
	PQfinish(c);
	free(ci);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_throughput_rows),
		cmocka_unit_test(test_schedule_controls_before_first_tick),
		cmocka_unit_test(test_throughput_across_restart),
		cmocka_unit_test(test_throughput_without_grant),
		cmocka_unit_test(test_schedule_run_once),
		cmocka_unit_test(test_schedule_disable_enable),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
