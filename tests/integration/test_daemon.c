/*
 * Integration: the daemon runs jobs.  Real pgjobd processes against the
 * test server: many jobs over two instances, slots, retries and backoff,
 * exit codes, timeouts, and broken input that must not hang or lose work.
 */
#include "testlib.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void
test_two_instances_ledger(void **state)
{
	char *ci = t_db_migrated("t_daemon_ledger");
	PGconn *c = t_connect(ci);
	char body[2048];
	snprintf(body, sizeof(body),
		 "workers: 3\n"
		 "queues: { default: { concurrency: 4 } }\n"
		 "handlers:\n"
		 "  ledger:\n"
		 "    type: exec\n"
		 "    command: [\"/usr/bin/psql\", \"%s\", \"-qAtX\", \"-v\","
		 " \"ON_ERROR_STOP=1\", \"-f\", \"%s\"]\n"
		 "  noop:\n"
		 "    type: plugin\n"
		 "    library: \"%s\"\n"
		 "    symbol: pgjobd_example\n",
		 ci, t_src("tests/fixtures/daemon/ledger.sql"),
		 t_bin("pgjobd_example.so"));
	const char *cfg = t_config("ledger", ci, body);
	t_exec(c, "create table ledger (job_id bigint primary key)");
	/* Each ledger job starts a psql, 50-70 ms of a busy 2-core machine
	 * apiece: 300 of them keep both instances busy for seconds (their
	 * three workers of four each), where 2,000 took 2 minutes of the
	 * test command for no further proof. */
	t_exec(c, "insert into pgjob.jobs (kind) select 'ledger' from "
		  "generate_series(1, 300)");
	t_exec(c, "insert into pgjob.jobs (kind) select 'noop' from "
		  "generate_series(1, 2000)");
	pid_t p[2];
	t_daemons(cfg, 2, "ledger", p);
	t_wait_done(c, 2300, 240);
	assert_int_equal(t_long(c, "select count(*) from ledger"), 300);
	assert_int_equal(t_long(c, "select count(*) from pgjob.all_jobs j join "
				   "ledger l on l.job_id = j.id"),
			 300);
	/* Both instances took part, and no attempt was repeated. */
	assert_true(t_log_count("ledger0", "kind=ledger") > 0);
	assert_true(t_log_count("ledger1", "kind=ledger") > 0);
	assert_int_equal(t_long(c, "select max(attempts) from pgjob.all_jobs"),
			 1);
	assert_int_equal(t_long(c, "select count(*) from pgjob.all_jobs where "
				   "result->>'ok' = 'true'"),
			 2000);
	t_stop_clean(p[0]);
	t_stop_clean(p[1]);
	assert_int_equal(t_long(c, "select count(*) from pgjob.workers"), 0);
	PQfinish(c);
	free(ci);
}

/* The slots held by the workers of a supervisor pid, as "1,2,3". */
static const char slots_of[] =
	"select string_agg(slot::text, ',' order by slot) from pgjob.workers "
	"where supervisor_pid = %d";

static void
test_slots_lowest_first(void **state)
{
	char *ci = t_db_migrated("t_daemon_slots");
	PGconn *c = t_connect(ci);
	const char *cfg =
		t_config("slots", ci,
			 "workers: 2\n"
			 "handlers:\n"
			 "  x: { type: exec, command: [\"/bin/true\"] }\n");
	pid_t p[3];
	for (int i = 0; i < 3; i++) {
		char name[16];
		snprintf(name, sizeof(name), "slots%d", i);
		p[i] = t_daemon(cfg, 0, name);
		/* One instance at a time, so slots follow start order. */
		t_wait_workers(c, 2 * (i + 1), 30);
	}
	t_assert_value(c, "1,2", slots_of, (int)p[0]);
	t_assert_value(c, "3,4", slots_of, (int)p[1]);
	t_assert_value(c, "5,6", slots_of, (int)p[2]);
	/* Stop the middle one: its slots 3 and 4 are the lowest free. */
	t_stop_clean(p[1]);
	t_wait_workers(c, 4, 30);
	pid_t q = t_daemon(cfg, 3, "slots3");
	t_wait_workers(c, 7, 30);
	t_assert_value(c, "3,4,7", slots_of, (int)q);
	/* Every line a worker logs names its slot (the line can come a
	 * moment after the worker's row: a busy machine once checked
	 * between the two). */
	t_wait_log("slots3", "slot=7 ", 1, 30);
	t_stop_clean(q);
	t_stop_clean(p[0]);
	t_stop_clean(p[2]);
	PQfinish(c);
	free(ci);
}

static void
test_retries_and_exit_codes(void **state)
{
	char *ci = t_db_migrated("t_daemon_retry");
	PGconn *c = t_connect(ci);
	long long f = t_long(c, "select pgjob.enqueue('fail3')");
	long long d = t_long(c, "select pgjob.enqueue('dead65')");
	long long r = t_long(c, "select pgjob.enqueue('again75')");
	pid_t p = t_start(
		"retry", ci,
		"workers: 1\n"
		"defaults: { backoff: { base: 2s, max: 1m } }\n"
		"handlers:\n"
		"  fail3: { type: exec, command: [\"/bin/sh\", \"-c\", "
		"\"echo boom >&2; exit 3\"], max_attempts: 3 }\n"
		"  dead65: { type: exec, command: [\"/bin/sh\", \"-c\", "
		"\"echo bad data >&2; exit 65\"] }\n"
		"  again75: { type: exec, command: [\"/bin/sh\", \"-c\", "
		"\"echo '{\\\"retry_in\\\": 600}'; exit 75\"] }\n");

	/* exit 65: dead at the first attempt, with the error kept. */
	t_wait_state(c, d, "dead", 30);
	t_assert_job_has(c, d, "attempts || '|' || last_error",
			 "1|exit status 65", "bad data");
	/* exit 75 with retry_in: a snooze, back to available, due in 10
	 * minutes, the attempt given back and no error written. */
	t_wait_until(c, 30,
		     "select attempts = 0 and snoozes = 1 and state = "
		     "'available' and last_error is null and run_at > now() + "
		     "interval '9 minutes' from pgjob.jobs where id = %lld",
		     r);
	/* exit 3: retried after 2s, then 4s (less up to 25 % jitter: the
	 * waits left, read a little later, are at most that and not much
	 * less), then dead after max_attempts 3. */
	t_wait_until(c, 30,
		     "select attempts = 1 and state = 'available' from "
		     "pgjob.all_jobs where id = %lld",
		     f);
	t_assert_job(c, f,
		     "extract(epoch from run_at - now()) between 0.5 and 2.0",
		     "t");
	t_wait_until(c, 30,
		     "select attempts = 2 and state = 'available' from "
		     "pgjob.all_jobs where id = %lld",
		     f);
	t_assert_job(c, f,
		     "extract(epoch from run_at - now()) between 2.0 and 4.0",
		     "t");
	t_wait_state(c, f, "dead", 30);
	t_assert_job_has(c, f, "attempts || '|' || last_error",
			 "3|exit status 3", "boom");
	t_stop_clean(p);
	PQfinish(c);
	free(ci);
}

static void
test_timeout_kills_process_group(void **state)
{
	char *ci = t_db_migrated("t_daemon_timeout");
	PGconn *c = t_connect(ci);
	char pidfile[4200];
	snprintf(pidfile, sizeof(pidfile), "%s/grandchild.pid", t_tmpdir());
	unlink(pidfile);
	long long id = t_long(c, "select pgjob.enqueue('hang')");
	pid_t p =
		t_start("timeout", ci,
			"workers: 1\n"
			"handlers:\n"
			"  hang: { type: exec, timeout: 1s, max_attempts: 1,"
			" command: [\"%s\", \"%s\"] }\n",
			t_src("tests/fixtures/daemon/grandchild.sh"), pidfile);
	t_wait_state(c, id, "dead", 30);
	t_assert_job_has(c, id, "last_error", "timed out after 1s");
	/* The handler's own child went with it. */
	t_wait_gone(t_pid_in_file(pidfile, 5), 2);
	t_stop_clean(p);
	PQfinish(c);
	free(ci);
}

static void
test_bad_input(void **state)
{
	char *ci = t_db_migrated("t_daemon_bad");
	PGconn *c = t_connect(ci);
	long long m = t_long(c, "select pgjob.enqueue('missing')");
	long long l = t_long(c, "select pgjob.enqueue('loud')");
	long long b = t_long(c, "select pgjob.enqueue('badplugin')");
	long long u = t_long(c, "select pgjob.enqueue('nobody_handles_this')");
	/* A payload that is not an object, written behind enqueue's back. */
	long long n = t_long(c, "insert into pgjob.jobs (kind, payload) "
				"values ('noop', '[1,2]') returning id");
	long long big = t_long(c, "insert into pgjob.jobs (kind, payload) "
				  "values ('noop', jsonb_build_object('x', "
				  "repeat('y', 5000))) returning id");
	long long ok = t_long(c, "select pgjob.enqueue('noop')");
	pid_t p =
		t_start("bad", ci,
			"workers: 1\nmax_payload_bytes: 4096\n"
			"handlers:\n"
			"  missing: { type: exec, max_attempts: 1,"
			" command: [\"/nonexistent/handler\"] }\n"
			"  loud: { type: exec, command: [\"/bin/sh\", \"-c\", "
			"\"head -c 20000000 /dev/zero; head -c 3000000 "
			"/dev/zero >&2\"] }\n"
			"  badplugin: { type: plugin, max_attempts: 1,"
			" library: \"/nonexistent/plugin.so\", symbol: nope }\n"
			"  noop: { type: plugin, library: \"%s\","
			" symbol: pgjobd_example }\n",
			t_bin("pgjobd_example.so"));
	t_wait_ended(c, 6, 60);
	t_assert_job_has(c, m, "state || '|' || last_error", "dead|",
			 "/nonexistent/handler");
	t_assert_job(c, l, "state || '|' || (result is null)", "done|true");
	t_assert_job_has(c, b, "state || '|' || last_error", "dead|",
			 "/nonexistent/plugin.so");
	t_assert_job(c, n, "state || '|' || last_error",
		     "dead|payload is not a JSON object");
	t_assert_job_has(c, big, "state || '|' || last_error",
			 "dead|payload of 50", "over max_payload_bytes (4096)");
	t_assert_job(c, ok, "state", "done");
	/* Nobody handles it: it waits, untouched. */
	t_assert_job(c, u, "state || '|' || attempts", "available|0");
	t_stop_clean(p);
	PQfinish(c);
	free(ci);
}

/*
 * A result that PostgreSQL refuses never undoes a successful run: the job
 * ends done without it, and last_error says why.  The refusal is made
 * here by a trigger (a data exception, as jsonb raises for what it will
 * not store); such an end used to fail three times, be given up, and run
 * again and again.
 */
static void
test_refused_result_keeps_success(void **state)
{
	char *ci = t_db_migrated("t_daemon_refused");
	PGconn *c = t_connect(ci);
	t_exec(c, "create function public.refuse() returns trigger"
		  " language plpgsql as $$ begin"
		  " if new.result ? 'refuse' then raise exception"
		  "  'invalid input syntax for type json' using"
		  "  errcode = '22P02'; end if; return new; end $$");
	t_exec(c, "create trigger refuse before update on pgjob.jobs"
		  " for each row execute function public.refuse()");
	/* A plain job's success is a copy into pgjob.jobs_done
	 * (sql/upgrade/019_jobs_done.sql): refused there too. */
	t_exec(c, "create trigger refuse before insert on pgjob.jobs_done"
		  " for each row execute function public.refuse()");
	long long a = t_long(c, "select pgjob.enqueue('k')");
	long long b = t_long(c, "select pgjob.enqueue('ok')");
	pid_t p = t_start("refused", ci,
			  "workers: 1\nlease: 3s\nhandlers:\n"
			  "  k: { type: exec, command: [\"/bin/echo\","
			  " \"{\\\"refuse\\\": 1}\"] }\n"
			  "  ok: { type: exec, command: [\"/bin/echo\","
			  " \"{\\\"fine\\\": 1}\"] }\n");
	t_wait_until(
		c, 30,
		"select count(*) = 2 from pgjob.all_jobs where state = 'done' "
		"and id in (%lld, %lld)",
		a, b);
	t_assert_job_has(c, a,
			 "attempts || '|' || (result is null) || '|' || "
			 "last_error",
			 "1|true|result not stored: PostgreSQL refused it "
			 "(22P02");
	t_assert_job(c, b, "result::text", "{\"fine\": 1}");
	t_stop_clean(p);
	PQfinish(c);
	free(ci);
}

/*
 * An sql handler's statement holds the worker's only connection, so at
 * most one is on it at a time: renewals of the worker's other jobs wait
 * behind one statement (at most half a lease), not behind every statement
 * it holds.  Here four statements of 1.5 s each would keep a renewal
 * waiting 6 s, past the 4 s lease of the exec job beside them.
 */
static void
test_sql_statements_one_at_a_time(void **state)
{
	char *ci = t_db_migrated("t_daemon_sqlqueue");
	PGconn *c = t_connect(ci);
	long long l = t_long(c, "select pgjob.enqueue('long')");
	t_exec(c, "select pgjob.enqueue('slow_sql') from "
		  "generate_series(1, 4)");
	pid_t p = t_start(
		"sqlqueue", ci,
		"workers: 1\nlease: 4s\n"
		"queues: { default: { concurrency: 8 } }\n"
		"handlers:\n"
		"  slow_sql: { type: sql, statement: \"select pg_sleep(1.5),"
		" $1::jsonb, $2::bigint\" }\n"
		"  long: { type: exec, command: [\"/bin/sleep\", \"5\"] }\n");
	t_wait_done(c, 5, 60);
	/* The exec job kept its one lease throughout. */
	t_assert_job(c, l, "attempts || '|' || lease_token", "1|1");
	assert_int_equal(t_log_count("sqlqueue", "by its deadline"), 0);
	assert_int_equal(t_log_count("sqlqueue", "lease lost"), 0);
	t_stop_clean(p);
	PQfinish(c);
	free(ci);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_two_instances_ledger),
		cmocka_unit_test(test_slots_lowest_first),
		cmocka_unit_test(test_retries_and_exit_codes),
		cmocka_unit_test(test_timeout_kills_process_group),
		cmocka_unit_test(test_bad_input),
		cmocka_unit_test(test_refused_result_keeps_success),
		cmocka_unit_test(test_sql_statements_one_at_a_time),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
