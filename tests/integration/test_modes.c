/*
 * Integration: the sql handler's exactly-once under faults, and the queue
 * modes (serial, per_key) across several instances.
 */
#include "testlib.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

static void
test_sql_exactly_once_under_faults(void **state)
{
	char *ci = t_db_migrated("t_sql_once");
	PGconn *c = t_connect(ci);
	t_exec(c, "create table ledger (job_id bigint primary key, n int)");
	const char *cfg = t_config(
		"sqlonce", ci,
		"workers: 2\nlease: 2s\n"
		"queues: { default: { concurrency: 4 } }\n"
		"handlers:\n"
		"  charge: { type: sql, statement: \"insert into ledger"
		" select $2, ($1->>'n')::int from pg_sleep(0.01)\" }\n");
	t_exec(c, "insert into pgjob.jobs (kind, payload) select 'charge', "
		  "jsonb_build_object('n', i) from generate_series(1, 400) i");
	pid_t p[2];
	t_daemons(cfg, 2, "sqlonce", p);
	/* Faults while it runs: kill -9 workers, cut connections, stop a
	 * worker past its lease. */
	for (int round = 0; round < 6; round++) {
		t_sleep_ms(400);
		long long w = t_long(c, "select coalesce(min(pid), 0) from "
					"pgjob.workers");
		if (round % 3 == 0 && w)
			kill((pid_t)w, SIGKILL);
		if (round % 3 == 1)
			t_exec(c, "select pg_terminate_backend(pid) from "
				  "pg_stat_activity where application_name = "
				  "'pgjobd' and datname = current_database()");
		if (round % 3 == 2 && w) {
			kill((pid_t)w, SIGSTOP);
			t_sleep_ms(3000);
			kill((pid_t)w, SIGCONT);
		}
	}
	t_wait_done(c, 400, 120);
	/* Exactly one row per job, with the job's own payload. */
	assert_int_equal(t_long(c, "select count(*) from ledger"), 400);
	assert_int_equal(t_long(c, "select count(*) from ledger l join "
				   "pgjob.all_jobs j on j.id = l.job_id and "
				   "(j.payload->>'n')::int = l.n"),
			 400);
	/* No second run even tried: it would have hit the primary key. */
	assert_int_equal(t_long(c, "select count(*) from pgjob.all_jobs where "
				   "last_error like '%%duplicate key%%'"),
			 0);
	t_stop_clean(p[0]);
	t_stop_clean(p[1]);
	PQfinish(c);
	free(ci);
}

static void
test_sql_failure_rolls_back(void **state)
{
	char *ci = t_db_migrated("t_sql_fail");
	PGconn *c = t_connect(ci);
	t_exec(c, "create table ledger (job_id bigint)");
	t_exec(c, "create function t_fail(p jsonb, id bigint) returns void "
		  "language plpgsql as $$ begin insert into ledger values "
		  "(id); raise exception 'boom %%', p->>'x'; end $$");
	long long id = t_long(c, "select pgjob.enqueue('f', '{\"x\": \"y\"}')");
	pid_t p = t_start("sqlfail", ci,
			  "workers: 1\ndefaults: { backoff: { base: 100ms, "
			  "max: 100ms } }\n"
			  "handlers:\n"
			  "  f: { type: sql, max_attempts: 2,"
			  " statement: \"select t_fail($1, $2)\" }\n");
	t_wait_state(c, id, "dead", 30);
	/* Each attempt's insert was rolled back with it. */
	t_assert_job(c, id, "attempts || '|' || last_error", "2|P0001: boom y");
	assert_int_equal(t_long(c, "select count(*) from ledger"), 0);
	t_stop_clean(p);
	PQfinish(c);
	free(ci);
}

/* Runs of the interval handler: id, start, end (ns), in file order. */
struct run {
	long long id, start, end;
};

static int
read_runs(const char *path, struct run *runs, int max)
{
	char *text = t_read_file(path);
	int n = 0;
	char *line = text;
	while (line && *line && n < max) {
		if (sscanf(line, "%lld %lld %lld", &runs[n].id, &runs[n].start,
			   &runs[n].end) == 3)
			n++;
		line = strchr(line, '\n');
		if (line)
			line++;
	}
	free(text);
	return n;
}

static int
by_start(const void *a, const void *b)
{
	const struct run *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

/* Checks that runs never overlap and follow id order. */
static void
assert_one_at_a_time(struct run *runs, int n)
{
	qsort(runs, (size_t)n, sizeof(*runs), by_start);
	for (int i = 1; i < n; i++) {
		assert_true(runs[i].start >= runs[i - 1].end);
		assert_true(runs[i].id > runs[i - 1].id);
	}
}

static const char *
interval_config(const char *name, const char *ci, const char *mode,
		const char *file)
{
	char body[4096];
	snprintf(body, sizeof(body),
		 "workers: 2\n"
		 "queues: { q: { concurrency: 4, mode: %s } }\n"
		 "handlers:\n"
		 "  iv: { type: exec, queue: q, command: [\"%s\", \"%s\", "
		 "\"0.03\"] }\n",
		 mode, t_src("tests/fixtures/daemon/interval.sh"), file);
	return t_config(name, ci, body);
}

static void
test_serial(void **state)
{
	char *ci = t_db_migrated("t_mode_serial");
	PGconn *c = t_connect(ci);
	char file[4200];
	snprintf(file, sizeof(file), "%s/serial.runs", t_tmpdir());
	unlink(file);
	const char *cfg = interval_config("serial", ci, "serial", file);
	t_exec(c, "insert into pgjob.jobs (kind, queue, priority) select "
		  "'iv', 'q', (random() * 10)::int from "
		  "generate_series(1, 30)");
	pid_t p[3];
	t_daemons(cfg, 3, "serial", p);
	t_wait_done(c, 30, 120);
	struct run runs[64];
	int n = read_runs(file, runs, 64);
	assert_int_equal(n, 30);
	/* Across 3 instances x 2 workers: one at a time, in id order,
	 * whatever the priorities. */
	assert_one_at_a_time(runs, n);
	for (int i = 0; i < 3; i++)
		t_stop_clean(p[i]);
	PQfinish(c);
	free(ci);
}

static void
test_per_key(void **state)
{
	char *ci = t_db_migrated("t_mode_perkey");
	PGconn *c = t_connect(ci);
	char file[4200];
	snprintf(file, sizeof(file), "%s/perkey.runs", t_tmpdir());
	unlink(file);
	const char *cfg = interval_config("perkey", ci, "per_key", file);
	t_exec(c, "insert into pgjob.jobs (kind, queue, ordering_key) select "
		  "'iv', 'q', 'k' || (i %% 4) from generate_series(1, 48) i");
	pid_t p[3];
	t_daemons(cfg, 3, "perkey", p);
	t_wait_done(c, 48, 120);
	struct run all[64], mine[64];
	int n = read_runs(file, all, 64);
	assert_int_equal(n, 48);
	int overlaps = 0;
	qsort(all, (size_t)n, sizeof(*all), by_start);
	for (int i = 1; i < n; i++)
		overlaps += all[i].start < all[i - 1].end;
	/* Different keys ran in parallel. */
	assert_true(overlaps > 0);
	for (int k = 0; k < 4; k++) {
		int m = 0;
		for (int i = 0; i < n; i++)
			if (all[i].id % 4 == k)
				mine[m++] = all[i];
		assert_int_equal(m, 12);
		assert_one_at_a_time(mine, m);
	}
	for (int i = 0; i < 3; i++)
		t_stop_clean(p[i]);
	PQfinish(c);
	free(ci);
}

static void
test_http_through_daemon(void **state)
{
	char *ci = t_db_migrated("t_http");
	PGconn *c = t_connect(ci);
	int in;
	pid_t hp;
	int port = t_httpd_start(&in, &hp);
	long long ok = t_long(c, "select pgjob.enqueue('ok', '{\"n\": 7}')");
	long long gone = t_long(c, "select pgjob.enqueue('gone')");
	long long busy = t_long(c, "select pgjob.enqueue('busy')");
	pid_t p = t_start("http", ci,
			  "workers: 1\n"
			  "defaults: { backoff: { base: 100ms, max: 100ms } }\n"
			  "handlers:\n"
			  "  ok: { type: http, url: \"http://127.0.0.1:%d/ok\","
			  " headers: { X-Tenant: \"t-7\" } }\n"
			  "  gone: { type: http, url: "
			  "\"http://127.0.0.1:%d/status/410\" }\n"
			  "  busy: { type: http, max_attempts: 2,"
			  " url: \"http://127.0.0.1:%d/status/503\" }\n",
			  port, port, port);
	t_wait_ended(c, 3, 60);
	/* 2xx: done, the JSON answer is the result; the server saw the
	 * payload, the job id as Idempotency-Key and our header. */
	t_assert_job_has(c, ok,
			 "state || '|' || (result->>'body') || '|' || "
			 "(result->'headers'->>'idempotency-key' = id::text or "
			 "result->'headers'->>'Idempotency-Key' = id::text)",
			 "done|", "7", "|true");
	/* Other 4xx: dead at once.  503 without Retry-After: retried
	 * (with one it is a snooze: test_worker_edges). */
	t_assert_job_has(c, gone,
			 "state || '|' || attempts || '|' || last_error",
			 "dead|1|HTTP 410");
	t_assert_job(c, busy, "state || '|' || attempts", "dead|2");
	t_stop_clean(p);
	t_httpd_stop(in, hp);
	PQfinish(c);
	free(ci);
}

/* Jobs per second between the first and the last finish of queue q. */
static double
rate(PGconn *c, const char *q)
{
	char *v = t_value(c,
			  "select count(*) / greatest(extract(epoch from "
			  "max(finished_at) - min(finished_at)), 0.001) "
			  "from pgjob.all_jobs where queue = '%s'",
			  q);
	double r = atof(v);
	free(v);
	return r;
}

static void
test_per_key_throughput(void **state)
{
	/* per_key with many keys stays within a small factor of parallel:
	 * a ratio measured in one run, not a time limit. */
	char *ci = t_db_migrated("t_mode_rate");
	PGconn *c = t_connect(ci);
	t_exec(c, "insert into pgjob.jobs (kind, queue) select 'a', 'par' "
		  "from generate_series(1, 3000)");
	pid_t p =
		t_start("rate", ci,
			"workers: 2\n"
			"queues:\n"
			"  par: { concurrency: 50 }\n"
			"  keyed: { concurrency: 50, mode: per_key }\n"
			"handlers:\n"
			"  a: { type: plugin, queue: par, library: \"%s\","
			" symbol: pgjobd_example }\n"
			"  b: { type: plugin, queue: keyed, library: \"%s\","
			" symbol: pgjobd_example }\n",
			t_bin("pgjobd_example.so"), t_bin("pgjobd_example.so"));
	t_wait_done(c, 3000, 120);
	t_exec(c, "insert into pgjob.jobs (kind, queue, ordering_key) select "
		  "'b', 'keyed', 'k' || (i %% 100) from "
		  "generate_series(1, 3000) i");
	t_wait_done(c, 6000, 120);
	double par = rate(c, "par"), keyed = rate(c, "keyed");
	print_message("parallel %.0f jobs/s, per_key (100 keys) %.0f jobs/s, "
		      "ratio %.2f\n",
		      par, keyed, keyed / par);
	assert_true(keyed * 5 >= par);
	t_stop_clean(p);
	PQfinish(c);
	free(ci);
}

static void
test_cancel_running(void **state)
{
	char *ci = t_db_migrated("t_cancel_running");
	PGconn *c = t_connect(ci);
	long long id = t_long(c, "select pgjob.enqueue('long')");
	pid_t p = t_start(
		"cancel", ci,
		"workers: 1\nlease: 3s\nhandlers:\n"
		"  long: { type: exec, command: [\"/bin/sleep\", \"60\"] }\n"
		"  mark: { type: exec, command: [\"/bin/true\"] }\n");
	t_wait_state(c, id, "running", 30);
	char ids[24];
	snprintf(ids, sizeof(ids), "%lld", id);
	struct t_run r;
	t_pgjob(&r, ci, "cancel", ids, NULL);
	assert_int_equal(r.status, 0);
	t_run_free(&r);
	/* The worker stops the handler at its next renewal, and writes
	 * nothing more: the job stays cancelled. */
	t_wait_log("cancel", "stopped: cancelled", 1, 10);
	assert_int_equal(t_log_count("cancel", "cancelled by an operator"), 1);
	/* A job enqueued now is claimed in a turn of the worker's loop sent
	 * after the handler's end was seen, and a turn writes the ends
	 * waiting before it claims (src/worker/worker.c): once it is done,
	 * an end of the cancelled job would have been written. */
	long long mark = t_long(c, "select pgjob.enqueue('mark')");
	t_wait_state(c, mark, "done", 30);
	t_assert_job(c, id, "state", "cancelled");
	t_stop_clean(p);
	PQfinish(c);
	free(ci);
}

/*
 * A claim reads a parallel queue from past its last position while batches
 * come back full (docs/performance.md, "An old snapshot": the head can be
 * full of entries that cannot be cleaned).  A more urgent job enqueued behind
 * that position must still run long before the backlog drains: the worker reads
 * from the head after a NOTIFY, and at least once a second.
 */
static void
test_urgent_job_not_behind_position(void **state)
{
	char *ci = t_db_migrated("t_mode_urgent");
	PGconn *c = t_connect(ci);
	/* 2,000 jobs of 50 ms, 20 at a time: at least 5 s of work. */
	t_exec(c, "insert into pgjob.jobs (kind, priority) select 'slow', 5 "
		  "from generate_series(1, 2000)");
	pid_t p = t_start(
		"urgent", ci,
		"workers: 1\n"
		"queues: { default: { concurrency: 20 } }\n"
		"handlers:\n"
		"  slow: { type: exec, command: [\"/bin/sleep\", \"0.05\"] }\n"
		"  urgent: { type: exec, command: [\"/bin/true\"] }\n");
	t_wait_until(c, 60,
		     "select count(*) >= 100 from pgjob.all_jobs where state = "
		     "'done'");
	long long urgent =
		t_long(c, "select pgjob.enqueue('urgent', priority => 0)");
	t_wait_state(c, urgent, "done", 60);
	char *left = t_value(c, "select count(*) from pgjob.all_jobs "
				"where kind = 'slow' and state = 'available'");
	print_message("slow jobs still queued when the urgent one ended: %s\n",
		      left);
	assert_true(atoi(left) >= 1000);
	free(left);
	t_stop_clean(p);
	PQfinish(c);
	free(ci);
}

/*
 * The same under a snapshot held open, for the two ways a job comes to sort
 * behind a busy queue's position: a NOTIFY whose key says so (a run_at an
 * hour ago: sql/upgrade/017_notify_key.sql), and none at all (a cancelled job
 * made available again by hand, which no trigger announces): the claim from the
 * head, at most a second apart while it is cheap, finds it
 * (from_positions() in src/worker/claim.c).  And the payload's key itself.
 */
static void
test_behind_position(void **state)
{
	char *ci = t_db_migrated("t_mode_behind");
	PGconn *c = t_connect(ci);
	PGconn *listener = t_connect(ci);
	t_exec(listener, "listen pgjob");
	long long old = t_long(c, "select pgjob.enqueue('urgent', priority "
				  "=> 5, run_at => now() - interval '1 "
				  "hour')");
	t_exec(c,
	       "update pgjob.jobs set state = 'cancelled', finished_at = now() "
	       "where id = %lld",
	       old);
	t_exec(c, "insert into pgjob.jobs (kind, priority) select 'slow', 5 "
		  "from generate_series(1, 2000)");
	/* The enqueue's payload: transaction, 1 due job, priority 5 and its
	 * run_at in microseconds. */
	PGnotify *n = NULL;
	for (int i = 0; i < 600 && !n; i++) {
		PQconsumeInput(listener);
		n = PQnotifies(listener);
		if (!n)
			t_sleep_ms(50);
	}
	char *want = t_value(c,
			     "select format('1 5 %%s', floor(extract(epoch "
			     "from run_at) * 1000000)::bigint) from "
			     "pgjob.all_jobs where id = %lld",
			     old);
	assert_non_null(n);
	assert_non_null(strchr(n->extra, ' '));
	assert_string_equal(strchr(n->extra, ' ') + 1, want);
	PQfreemem(n);
	free(want);
	PQfinish(listener);
	/* A snapshot held from here to the end. */
	PGconn *holder = t_connect(ci);
	t_exec(holder, "begin isolation level repeatable read");
	t_exec(holder, "select 1");
	pid_t p = t_start(
		"behind", ci,
		"workers: 1\n"
		"queues: { default: { concurrency: 20 } }\n"
		"handlers:\n"
		"  slow: { type: exec, command: [\"/bin/sleep\", \"0.05\"] }\n"
		"  urgent: { type: exec, command: [\"/bin/true\"] }\n");
	t_wait_until(c, 60,
		     "select count(*) >= 100 from pgjob.all_jobs where state = "
		     "'done'");
	long long past = t_long(c, "select pgjob.enqueue('urgent', priority "
				   "=> 5, run_at => now() - interval '1 "
				   "hour')");
	t_wait_state(c, past, "done", 60);
	t_exec(c,
	       "update pgjob.jobs set state = 'available', finished_at = null"
	       " where id = %lld",
	       old);
	t_wait_state(c, old, "done", 60);
	char *left = t_value(c, "select count(*) from pgjob.all_jobs "
				"where kind = 'slow' and state = 'available'");
	print_message("slow jobs still queued when both had ended: %s\n", left);
	assert_true(atoi(left) >= 1000);
	free(left);
	t_stop_clean(p);
	t_exec(holder, "rollback");
	PQfinish(holder);
	PQfinish(c);
	free(ci);
}

/*
 * A job that a transaction locked and left (its row keeps the lock's xmax)
 * is passed over by the claims that read from a position (the xmax test of
 * claim_sql in src/db/claim.c); the claim from the head, once a second,
 * takes it as soon as it is the first in line.  2,000 jobs of 50 ms at 20
 * at a time, with the locked one after the first 1,000: it must end while
 * most of the second 1,000 still wait.
 */
static void
test_locked_behind_position(void **state)
{
	char *ci = t_db_migrated("t_mode_locked");
	PGconn *c = t_connect(ci);
	t_exec(c, "insert into pgjob.jobs (kind, priority) select 'slow', 5 "
		  "from generate_series(1, 1000)");
	t_exec(c, "begin");
	long long locked = t_long(c, "select pgjob.enqueue('urgent', "
				     "priority => 5)");
	t_exec(c, "select 1 from pgjob.jobs where id = %lld for key share",
	       locked);
	t_exec(c, "commit");
	t_assert_value(c, "t",
		       "select xmax <> '0' from pgjob.jobs where id "
		       "= %lld",
		       locked);
	t_exec(c, "insert into pgjob.jobs (kind, priority) select 'slow', 5 "
		  "from generate_series(1, 1000)");
	pid_t p = t_start(
		"locked", ci,
		"workers: 1\n"
		"queues: { default: { concurrency: 20 } }\n"
		"handlers:\n"
		"  slow: { type: exec, command: [\"/bin/sleep\", \"0.05\"] }\n"
		"  urgent: { type: exec, command: [\"/bin/true\"] }\n");
	t_wait_state(c, locked, "done", 120);
	char *left = t_value(c,
			     "select count(*) from pgjob.all_jobs where kind "
			     "= 'slow' and state = 'available' and id > "
			     "%lld",
			     locked);
	print_message("of the 1,000 jobs after it, %s still queued when the "
		      "locked job ended\n",
		      left);
	assert_true(atoi(left) >= 300);
	free(left);
	t_stop_clean(p);
	PQfinish(c);
	free(ci);
}

/*
 * A sweep (the claim from every queue's head, once a second at most) that
 * runs out of its time limit is stopped, the worker says why once, and
 * claims go on.  Here a lock on the table stands in for the dead index
 * entries of a held snapshot: a poll of an idle worker (5 s apart) is a
 * sweep while a sweep costs 100 ms or less (the next comes 50 of its
 * round trips after the last; so is the first claim, at connect), which
 * waits for the lock until its limit stops it; the claims after it (the
 * next sweep is 50 limits away) wait for the lock to go.  A poll that is
 * not a sweep (a slow host: CI's sanitizer pass) would wait for the lock
 * unstopped, so the lock is given up and taken again, three times at most.
 */
static void
test_sweep_time_limit(void **state)
{
	char *ci = t_db_migrated("t_mode_sweep_limit");
	PGconn *c = t_connect(ci);
	PGconn *locker = t_connect(ci);
	pid_t p = t_start("sweeplimit", ci,
			  "workers: 1\npoll_interval: 5s\n"
			  "handlers:\n"
			  "  s: { type: exec, command: [\"/bin/true\"] }\n");
	/* No job before the lock: a claim after a job's end is not a sweep,
	 * and one sent as the lock is taken would wait for it unstopped; so
	 * would the pruning at start (the next is a minute away): the lock
	 * comes once the worker's connection has written the prune lease
	 * and gone idle after it. */
	t_wait_until(c, 30,
		     "select count(*) = 1 from pgjob.leases where name = "
		     "'pgjob:prune' and holder is not null");
	for (int try = 1;; try++) {
		t_wait_until(c, 30,
			     "select count(*) = 1 from pg_stat_activity where "
			     "application_name = 'pgjobd' and datname = "
			     "current_database() and state = 'idle' and query "
			     "not like '%%delete from pgjob.jobs%%'");
		t_exec(locker, "begin");
		t_exec(locker,
		       "lock table pgjob.jobs in access exclusive mode");
		/* The next poll within 5 s, its limit 1 s after. */
		for (int i = 0; i < 240; i++) {
			if (t_log_count("sweeplimit", "was stopped") > 0)
				break;
			t_sleep_ms(50);
		}
		int stopped = t_log_count("sweeplimit", "was stopped") > 0;
		t_exec(locker, "rollback");
		if (stopped)
			break;
		if (try == 3)
			fail_msg("no sweep was stopped in 3 tries of 12 s");
	}
	long long id = t_long(c, "select pgjob.enqueue('s')");
	t_wait_state(c, id, "done", 30);
	assert_int_equal(t_log_count("sweeplimit", "took over 1000 ms"), 1);
	t_stop_clean(p);
	PQfinish(locker);
	PQfinish(c);
	free(ci);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sql_exactly_once_under_faults),
		cmocka_unit_test(test_sql_failure_rolls_back),
		cmocka_unit_test(test_serial),
		cmocka_unit_test(test_per_key),
		cmocka_unit_test(test_per_key_throughput),
		cmocka_unit_test(test_http_through_daemon),
		cmocka_unit_test(test_cancel_running),
		cmocka_unit_test(test_urgent_job_not_behind_position),
		cmocka_unit_test(test_behind_position),
		cmocka_unit_test(test_locked_behind_position),
		cmocka_unit_test(test_sweep_time_limit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
