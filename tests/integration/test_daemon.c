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
	t_exec(c, "insert into pgjob.jobs (kind) select 'ledger' from "
		  "generate_series(1, 2000)");
	t_exec(c, "insert into pgjob.jobs (kind) select 'noop' from "
		  "generate_series(1, 2000)");
	pid_t a = t_daemon(cfg, 0, "ledger_a");
	pid_t b = t_daemon(cfg, 0, "ledger_b");
	assert_int_equal(t_poll(c, 240,
				"select count(*) = 4000 from "
				"pgjob.jobs where state = 'done'"),
			 0);
	assert_int_equal(t_long(c, "select count(*) from ledger"), 2000);
	assert_int_equal(t_long(c, "select count(*) from pgjob.jobs j join "
				   "ledger l on l.job_id = j.id"),
			 2000);
	/* Both instances took part, and no attempt was repeated. */
	assert_true(t_count_in_file(t_log("ledger_a"), "kind=ledger") > 0);
	assert_true(t_count_in_file(t_log("ledger_b"), "kind=ledger") > 0);
	assert_int_equal(t_long(c, "select max(attempts) from pgjob.jobs"), 1);
	assert_int_equal(t_long(c, "select count(*) from pgjob.jobs where "
				   "result->>'ok' = 'true'"),
			 2000);
	assert_int_equal(t_stop(a, SIGTERM, 30), 0);
	assert_int_equal(t_stop(b, SIGTERM, 30), 0);
	assert_int_equal(t_long(c, "select count(*) from pgjob.workers"), 0);
	PQfinish(c);
	free(ci);
}

/* The slots held by the workers of supervisor pid, as "1,2,3". */
static char *
slots_of(PGconn *c, pid_t pid)
{
	return t_value(c,
		       "select string_agg(slot::text, ',' order by slot) "
		       "from pgjob.workers where supervisor_pid = %d",
		       (int)pid);
}

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
		assert_int_equal(t_poll(c, 30,
					"select count(*) = %d from "
					"pgjob.workers",
					2 * (i + 1)),
				 0);
	}
	char *s;
	assert_string_equal((s = slots_of(c, p[0])), "1,2");
	free(s);
	assert_string_equal((s = slots_of(c, p[1])), "3,4");
	free(s);
	assert_string_equal((s = slots_of(c, p[2])), "5,6");
	free(s);
	/* Stop the middle one: its slots 3 and 4 are the lowest free. */
	assert_int_equal(t_stop(p[1], SIGTERM, 30), 0);
	assert_int_equal(t_poll(c, 30,
				"select count(*) = 4 from "
				"pgjob.workers"),
			 0);
	pid_t q = t_daemon(cfg, 3, "slots3");
	assert_int_equal(t_poll(c, 30,
				"select count(*) = 7 from "
				"pgjob.workers"),
			 0);
	assert_string_equal((s = slots_of(c, q)), "3,4,7");
	free(s);
	/* Every line a worker logs names its slot. */
	assert_true(t_count_in_file(t_log("slots3"), "slot=7 ") > 0);
	assert_int_equal(t_stop(q, SIGTERM, 30), 0);
	assert_int_equal(t_stop(p[0], SIGTERM, 30), 0);
	assert_int_equal(t_stop(p[2], SIGTERM, 30), 0);
	PQfinish(c);
	free(ci);
}

static void
test_retries_and_exit_codes(void **state)
{
	char *ci = t_db_migrated("t_daemon_retry");
	PGconn *c = t_connect(ci);
	const char *cfg = t_config(
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
	long long f = t_long(c, "select pgjob.enqueue('fail3')");
	long long d = t_long(c, "select pgjob.enqueue('dead65')");
	long long r = t_long(c, "select pgjob.enqueue('again75')");
	pid_t p = t_daemon(cfg, 0, "retry");

	/* exit 65: dead at the first attempt, with the error kept. */
	assert_int_equal(t_poll(c, 30,
				"select state = 'dead' from pgjob.jobs "
				"where id = %lld",
				d),
			 0);
	char *e = t_value(c,
			  "select attempts || '|' || last_error from "
			  "pgjob.jobs where id = %lld",
			  d);
	assert_non_null(strstr(e, "1|exit status 65"));
	assert_non_null(strstr(e, "bad data"));
	free(e);
	/* exit 75 with retry_in: back to available, due in 10 minutes. */
	assert_int_equal(t_poll(c, 30,
				"select attempts = 1 and state = "
				"'available' and run_at > now() + "
				"interval '9 minutes' from pgjob.jobs "
				"where id = %lld",
				r),
			 0);
	/* exit 3: retried after 2s (+ up to 25 % jitter), then 4s, then
	 * dead after max_attempts 3. */
	assert_int_equal(t_poll(c, 30,
				"select attempts = 1 and state = "
				"'available' from pgjob.jobs where "
				"id = %lld",
				f),
			 0);
	char *ok = t_value(c,
			   "select extract(epoch from run_at - now()) "
			   "between 1.0 and 2.5 from pgjob.jobs where "
			   "id = %lld",
			   f);
	assert_string_equal(ok, "t");
	free(ok);
	assert_int_equal(t_poll(c, 30,
				"select attempts = 2 and state = "
				"'available' from pgjob.jobs where "
				"id = %lld",
				f),
			 0);
	ok = t_value(c,
		     "select extract(epoch from run_at - now()) between "
		     "3.0 and 5.0 from pgjob.jobs where id = %lld",
		     f);
	assert_string_equal(ok, "t");
	free(ok);
	assert_int_equal(t_poll(c, 30,
				"select state = 'dead' from pgjob.jobs "
				"where id = %lld",
				f),
			 0);
	e = t_value(c,
		    "select attempts || '|' || last_error from pgjob.jobs "
		    "where id = %lld",
		    f);
	assert_non_null(strstr(e, "3|exit status 3"));
	assert_non_null(strstr(e, "boom"));
	free(e);
	assert_int_equal(t_stop(p, SIGTERM, 30), 0);
	PQfinish(c);
	free(ci);
}

static void
test_timeout_kills_process_group(void **state)
{
	char *ci = t_db_migrated("t_daemon_timeout");
	PGconn *c = t_connect(ci);
	char pidfile[4200], body[8192];
	snprintf(pidfile, sizeof(pidfile), "%s/grandchild.pid", t_tmpdir());
	unlink(pidfile);
	snprintf(body, sizeof(body),
		 "workers: 1\n"
		 "handlers:\n"
		 "  hang: { type: exec, timeout: 1s, max_attempts: 1,"
		 " command: [\"%s\", \"%s\"] }\n",
		 t_src("tests/fixtures/daemon/grandchild.sh"), pidfile);
	const char *cfg = t_config("timeout", ci, body);
	long long id = t_long(c, "select pgjob.enqueue('hang')");
	pid_t p = t_daemon(cfg, 0, "timeout");
	assert_int_equal(t_poll(c, 30,
				"select state = 'dead' from pgjob.jobs "
				"where id = %lld",
				id),
			 0);
	char *e = t_value(c,
			  "select last_error from pgjob.jobs where "
			  "id = %lld",
			  id);
	assert_non_null(strstr(e, "timed out after 1s"));
	free(e);
	char *gc = t_read_file(pidfile);
	assert_non_null(gc);
	pid_t g = atoi(gc);
	free(gc);
	for (int i = 0; i < 40 && t_alive(g); i++)
		t_sleep_ms(50);
	assert_false(t_alive(g));
	assert_int_equal(t_stop(p, SIGTERM, 30), 0);
	PQfinish(c);
	free(ci);
}

static void
test_bad_input(void **state)
{
	char *ci = t_db_migrated("t_daemon_bad");
	PGconn *c = t_connect(ci);
	char body[4096];
	snprintf(body, sizeof(body),
		 "workers: 1\nmax_payload_bytes: 4096\n"
		 "handlers:\n"
		 "  missing: { type: exec, max_attempts: 1,"
		 " command: [\"/nonexistent/handler\"] }\n"
		 "  loud: { type: exec, command: [\"/bin/sh\", \"-c\", "
		 "\"head -c 20000000 /dev/zero; head -c 3000000 /dev/zero "
		 ">&2\"] }\n"
		 "  badplugin: { type: plugin, max_attempts: 1,"
		 " library: \"/nonexistent/plugin.so\", symbol: nope }\n"
		 "  noop: { type: plugin, library: \"%s\","
		 " symbol: pgjobd_example }\n",
		 t_bin("pgjobd_example.so"));
	const char *cfg = t_config("bad", ci, body);
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
	pid_t p = t_daemon(cfg, 0, "bad");
	assert_int_equal(t_poll(c, 60,
				"select count(*) = 6 from pgjob.jobs "
				"where state in ('done', 'dead')"),
			 0);
	char *e;
	e = t_value(c,
		    "select state || '|' || last_error from pgjob.jobs "
		    "where id = %lld",
		    m);
	assert_non_null(strstr(e, "dead|"));
	assert_non_null(strstr(e, "/nonexistent/handler"));
	free(e);
	e = t_value(c,
		    "select state || '|' || (result is null) from "
		    "pgjob.jobs where id = %lld",
		    l);
	assert_string_equal(e, "done|true");
	free(e);
	e = t_value(c,
		    "select state || '|' || last_error from pgjob.jobs "
		    "where id = %lld",
		    b);
	assert_non_null(strstr(e, "dead|"));
	assert_non_null(strstr(e, "/nonexistent/plugin.so"));
	free(e);
	e = t_value(c,
		    "select state || '|' || last_error from pgjob.jobs "
		    "where id = %lld",
		    n);
	assert_string_equal(e, "dead|payload is not a JSON object");
	free(e);
	e = t_value(c,
		    "select state || '|' || last_error from pgjob.jobs "
		    "where id = %lld",
		    big);
	assert_non_null(strstr(e, "dead|payload of 50"));
	assert_non_null(strstr(e, "over max_payload_bytes (4096)"));
	free(e);
	e = t_value(c, "select state from pgjob.jobs where id = %lld", ok);
	assert_string_equal(e, "done");
	free(e);
	/* Nobody handles it: it waits, untouched. */
	e = t_value(c,
		    "select state || '|' || attempts from pgjob.jobs "
		    "where id = %lld",
		    u);
	assert_string_equal(e, "available|0");
	free(e);
	assert_int_equal(t_stop(p, SIGTERM, 30), 0);
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
	const char *cfg =
		t_config("refused", ci,
			 "workers: 1\nlease: 3s\nhandlers:\n"
			 "  k: { type: exec, command: [\"/bin/echo\","
			 " \"{\\\"refuse\\\": 1}\"] }\n"
			 "  ok: { type: exec, command: [\"/bin/echo\","
			 " \"{\\\"fine\\\": 1}\"] }\n");
	long long a = t_long(c, "select pgjob.enqueue('k')");
	long long b = t_long(c, "select pgjob.enqueue('ok')");
	pid_t p = t_daemon(cfg, 0, "refused");
	assert_int_equal(t_poll(c, 30,
				"select count(*) = 2 from pgjob.jobs where "
				"state = 'done' and id in (%lld, %lld)",
				a, b),
			 0);
	char *s = t_value(c,
			  "select attempts || '|' || (result is null) || '|'"
			  " || last_error from pgjob.jobs where id = %lld",
			  a);
	assert_non_null(strstr(s, "1|true|result not stored: PostgreSQL "
				  "refused it (22P02"));
	free(s);
	s = t_value(c, "select result::text from pgjob.jobs where id = %lld",
		    b);
	assert_string_equal(s, "{\"fine\": 1}");
	free(s);
	assert_int_equal(t_stop(p, SIGTERM, 30), 0);
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
	const char *cfg = t_config(
		"sqlqueue", ci,
		"workers: 1\nlease: 4s\n"
		"queues: { default: { concurrency: 8 } }\n"
		"handlers:\n"
		"  slow_sql: { type: sql, statement: \"select pg_sleep(1.5),"
		" $1::jsonb, $2::bigint\" }\n"
		"  long: { type: exec, command: [\"/bin/sleep\", \"5\"] }\n");
	long long l = t_long(c, "select pgjob.enqueue('long')");
	t_exec(c, "select pgjob.enqueue('slow_sql') from "
		  "generate_series(1, 4)");
	pid_t p = t_daemon(cfg, 0, "sqlqueue");
	assert_int_equal(t_poll(c, 60,
				"select count(*) = 5 from pgjob.jobs where "
				"state = 'done'"),
			 0);
	char *s = t_value(c,
			  "select attempts || '|' || lease_token from "
			  "pgjob.jobs where id = %lld",
			  l);
	assert_string_equal(s, "1|1");
	free(s);
	assert_int_equal(t_count_in_file(t_log("sqlqueue"), "by its deadline"),
			 0);
	assert_int_equal(t_count_in_file(t_log("sqlqueue"), "lease lost"), 0);
	assert_int_equal(t_stop(p, SIGTERM, 30), 0);
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
