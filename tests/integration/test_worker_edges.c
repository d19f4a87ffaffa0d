/*
 * Integration: the worker at its edges (issue 46).  Real pgjobd processes
 * against the real PostgreSQL: an exec handler must run in a session of
 * its own (no controlling terminal to inject keystrokes into), a worker
 * frozen past its lease must log only the lease loss, a worker that moves
 * to another slot on reconnect must move its held jobs' locked_by along,
 * a snooze (retry_in) must not spend an attempt, and hostile queue names
 * must not blind /metrics.
 */
#include "testlib.h"

#include "common/config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"

/*
 * An exec handler prints whether it leads a session of its own, and
 * whether it could open a controlling terminal: setsid() in the child
 * leaves it none, so a handler running as nobody cannot push keystrokes
 * into the terminal pgjobd was started from (TIOCSTI).
 */
static void
test_exec_own_session(void **state)
{
	char *ci = t_db_migrated("t_edges_session");
	PGconn *c = t_connect(ci);
	char *script = xasprintf("%s/session.py", t_tmpdir());
	t_write_file(script,
		     "import json, os\n"
		     "try:\n"
		     "    os.close(os.open('/dev/tty', os.O_RDWR))\n"
		     "    tty = 'opened'\n"
		     "except OSError as e:\n"
		     "    tty = 'refused'\n"
		     "print(json.dumps({'leader': os.getsid(0) == os.getpid(),"
		     " 'group': os.getpgid(0) == os.getpid(), 'tty': tty}))\n");
	pid_t p = t_start("session", ci,
			  "workers: 1\nhandlers:\n"
			  "  s: { type: exec, command: [\"/usr/bin/python3\","
			  " \"%s\"] }\n",
			  script);
	long long id = t_long(c, "select pgjob.enqueue('s')");
	t_wait_state(c, id, "done", 60);
	t_assert_job(c, id,
		     "(result->>'leader') || '|' || (result->>'group') || '|' "
		     "|| (result->>'tty')",
		     "true|true|refused");
	t_stop_clean(p);
	free(script);
	PQfinish(c);
	free(ci);
}

/*
 * A worker stopped (SIGSTOP) past its lease while its handler fails: the
 * other worker takes the job over and ends it.  Resumed, the stopped worker
 * must say that it lost the lease, and not that the attempt failed and
 * will be retried: the job is not its to retry.
 */
static void
test_frozen_worker_logs_lease_loss_only(void **state)
{
	char *ci = t_db_migrated("t_edges_frozen");
	PGconn *c = t_connect(ci);
	char mark[512], ended[512];
	snprintf(mark, sizeof(mark), "%s/frozen.started", t_tmpdir());
	snprintf(ended, sizeof(ended), "%s/frozen.ended", t_tmpdir());
	unlink(mark);
	unlink(ended);
	/* The first run fails after 3 s; the takeover's run succeeds. */
	pid_t p = t_start("frozen", ci,
			  "workers: 2\nlease: 2s\nhandlers:\n"
			  "  f: { type: exec, max_attempts: 5, command:"
			  " [\"/bin/sh\", \"-c\", \"if [ -e %s ]; then echo"
			  " '{}'; exit 0; fi; touch %s; sleep 3; touch %s;"
			  " echo boom >&2; exit 3\"] }\n",
			  mark, mark, ended);
	t_wait_workers(c, 2, 30);
	long long id = t_long(c, "select pgjob.enqueue('f')");
	t_wait_state(c, id, "running", 30);
	t_wait_file(mark, 30);
	pid_t w = t_holder_pid(c, id);
	kill(w, SIGSTOP);
	t_wait_until(c, 60,
		     "select state = 'done' and lease_token = 2 from "
		     "pgjob.all_jobs where id = %lld",
		     id);
	/* The first run's command has failed meanwhile. */
	t_wait_file(ended, 30);
	kill(w, SIGCONT);
	char needle[64];
	snprintf(needle, sizeof(needle), "job=%lld ", id);
	t_wait_log("frozen", "lease lost", 1, 30);
	char *log = t_read_file(t_log("frozen"));
	assert_non_null(log);
	for (char *l = log; l && *l;) {
		char *e = strchr(l, '\n');
		if (e)
			*e = '\0';
		if (strstr(l, needle) && strstr(l, "attempt failed"))
			fail_msg("a false retry line: %s", l);
		l = e ? e + 1 : NULL;
	}
	free(log);
	t_assert_job(c, id, "state || '|' || lease_token", "done|2");
	t_stop_clean(p);
	PQfinish(c);
	free(ci);
}

/*
 * A worker holding jobs loses its connection, and its slot is taken by
 * another session before it reconnects: it gets another slot, and the jobs
 * it holds must name it there (locked_by host:2), where their lease token
 * still holds, so that `pgjob status` and the attempt history count them
 * on their real worker, not on the next holder of slot 1.
 */
static void
test_reslot_moves_locked_by(void **state)
{
	char *ci = t_db_migrated("t_edges_reslot");
	PGconn *c = t_connect(ci);
	char dir[512];
	snprintf(dir, sizeof(dir), "%s/reslot", t_tmpdir());
	mkdir(dir, 0700);
	pid_t p = t_start("reslot", ci,
			  "workers: 1\nlease: 30s\nhandlers:\n"
			  "  s: { type: exec, command: [\"/bin/sh\", \"-c\","
			  " \"touch %s/$PGJOB_JOB_ID; while [ ! -e %s/go ]; do"
			  " sleep 0.1; done; echo '{}'\"] }\n",
			  dir, dir);
	pid_t w = t_worker_pid(c, p);
	assert_int_equal(t_long(c, "select slot from pgjob.workers"), 1);
	t_exec(c, "select pgjob.enqueue('s') from generate_series(1, 4)");
	t_wait_running(c, 4, 30);
	char *host = t_value(c, "select host from pgjob.workers");
	t_assert_value(c, "4",
		       "select count(*) from pgjob.jobs where locked_by = "
		       "'%s:1'",
		       host);
	/* As test_daemon_faults' test_reconnect_other_slot: this session
	 * queues for slot 1's lock as the worker's session ends. */
	t_exec(c,
	       "do $$ begin"
	       " perform pg_terminate_backend(pid) from pg_stat_activity"
	       "  where application_name = 'pgjobd'"
	       "  and datname = current_database();"
	       " perform pg_advisory_lock(%d, 1); end $$",
	       CONFIG_DEFAULT_LOCK_CLASS);
	t_wait_log("reslot", "slot changed from 1 to 2", 1, 30);
	t_wait_until(c, 30,
		     "select count(*) = 1 from pgjob.workers where pid = %d "
		     "and slot = 2",
		     (int)w);
	/* Its held jobs follow it to slot 2 (the renewal after the
	 * reconnect writes it, by token). */
	t_wait_until(c, 30,
		     "select count(*) = 4 from pgjob.jobs where state = "
		     "'running' and locked_by = '%s:2' and lease_token = 1",
		     host);
	char go[600];
	snprintf(go, sizeof(go), "%s/go", dir);
	t_write_file(go, "");
	t_wait_done(c, 4, 60);
	/* Done where they ran: slot 2, no attempt lost. */
	t_assert_value(c, "4",
		       "select count(*) from pgjob.all_jobs where locked_by = "
		       "'%s:2' and attempts = 1",
		       host);
	t_exec(c, "select pg_advisory_unlock(%d, 1)",
	       CONFIG_DEFAULT_LOCK_CLASS);
	t_stop_clean(p);
	free(host);
	PQfinish(c);
	free(ci);
}

/*
 * A worker that reconnects takes its last slot again when it is free,
 * though a lower one is free too: it started on slot 2 (this session held
 * 1), slot 1 is given back, and its session is ended.
 */
static void
test_reconnect_keeps_slot(void **state)
{
	char *ci = t_db_migrated("t_edges_keepslot");
	PGconn *c = t_connect(ci);
	t_exec(c, "select pg_advisory_lock(%d, 1)", CONFIG_DEFAULT_LOCK_CLASS);
	pid_t p = t_start("keepslot", ci,
			  "workers: 1\nhandlers:\n"
			  "  s: { type: exec, command: [\"/bin/true\"] }\n");
	pid_t w = t_worker_pid(c, p);
	/* Its session set up whole (its row is written before its LISTEN):
	 * a session ended halfway is a first connection's failure. */
	t_wait_log("keepslot", "connected, slot 2", 1, 30);
	assert_int_equal(t_long(c, "select slot from pgjob.workers"), 2);
	t_exec(c, "select pg_advisory_unlock(%d, 1)",
	       CONFIG_DEFAULT_LOCK_CLASS);
	/* The worker is stopped while its session is ended, and the end
	 * waited for: when it sees the loss and reconnects, slot 2's lock
	 * has surely gone with the old session. */
	kill(w, SIGSTOP);
	t_exec(c, "select pg_terminate_backend(pid, 30000)"
		  " from pg_stat_activity where application_name = 'pgjobd'"
		  " and datname = current_database()");
	kill(w, SIGCONT);
	t_wait_log("keepslot", "connected again", 1, 30);
	t_wait_until(c, 30,
		     "select count(*) = 1 from pgjob.workers where pid = %d",
		     (int)w);
	t_assert_value(c, "2", "select slot from pgjob.workers");
	assert_int_equal(t_log_count("keepslot", "slot changed"), 0);
	t_stop_clean(p);
	PQfinish(c);
	free(ci);
}

/* /metrics from port, once it holds every line of want (each a whole
 * line); fails after 120 s, saying which is missing.  Caller frees. */
static char *
metrics_with(int port, const char *const *want)
{
	char *m = NULL;
	for (int i = 0; i < 1200; i++) {
		free(m);
		m = t_http_get(port, "/metrics");
		int all = m != NULL;
		for (const char *const *w = want; all && *w; w++) {
			char line[512];
			snprintf(line, sizeof(line), "\n%s\n", *w);
			all = strstr(m, line) != NULL;
		}
		if (all)
			return m;
		t_sleep_ms(100);
	}
	for (const char *const *w = want; m && *w; w++) {
		char line[512];
		snprintf(line, sizeof(line), "\n%s\n", *w);
		if (!strstr(m, line))
			fail_msg(
				"/metrics never held \"%s\"; its due jobs:\n%s",
				*w, strstr(m, "\npgjobd_queue_due{"));
	}
	fail_msg("/metrics never answered");
	return NULL;
}

/*
 * A client enqueues into 40 queues whose names sort before the configured
 * one ("!00".."!39"), and into queues with hostile names (a quote, a
 * newline, a brace, 300 bytes): the configured queue keeps its series with
 * its own figures, the others are summed into one series, queue="(other)",
 * and no hostile name reaches the text.
 */
static void
test_metrics_hostile_queues(void **state)
{
	char *ci = t_db_migrated("t_edges_metrics");
	PGconn *c = t_connect(ci);
	/* Every row is there before the daemon starts: its first read
	 * counts them all (dead jobs are counted again only a minute
	 * later).  Kind z has no handler: its jobs stay due. */
	t_exec(c, "select pgjob.enqueue('z', '{}', 'real')"
		  " from generate_series(1, 3)");
	t_exec(c, "select pgjob.enqueue('z', '{}', 'real', now() +"
		  " interval '1 hour')");
	t_exec(c, "select pgjob.enqueue('z', '{}', '!' || lpad(i::text, 2,"
		  " '0')) from generate_series(0, 39) i");
	t_exec(c, "select pgjob.enqueue('z', '{}', q) from unnest(array["
		  "E'x\"} 1\\npgjobd_fake 1', repeat('long', 75), chr(92) || "
		  "chr(13)]) q");
	/* Dead jobs, in the real queue and in 40 hostile ones. */
	t_exec(c, "select pgjob.enqueue('z', '{}', 'real')"
		  " from generate_series(1, 2)");
	t_exec(c, "select pgjob.enqueue('z', '{}', '!d' || lpad(i::text, 2,"
		  " '0')) from generate_series(0, 39) i");
	t_exec(c, "update pgjob.jobs set state = 'dead', finished_at = now()"
		  " where id in (select id from pgjob.jobs where queue = 'real'"
		  " order by id desc limit 2) or queue like '!d%%'");
	int port = t_free_port();
	pid_t p = t_start("metrics", ci,
			  "workers: 1\n"
			  "queues: { real: {} }\n"
			  "metrics: { listen: \"127.0.0.1:%d\" }\n"
			  "handlers:\n"
			  "  k: { type: exec, queue: real, command: "
			  "[\"/bin/true\"] }\n",
			  port);
	t_wait_workers(c, 1, 30);
	const char *want[] = {
		"pgjobd_queue_due{queue=\"real\"} 3",
		"pgjobd_queue_scheduled{queue=\"real\"} 1",
		"pgjobd_queue_unhandled{queue=\"real\"} 4",
		"pgjobd_queue_dead{queue=\"real\"} 2",
		"pgjobd_queue_due{queue=\"(other)\"} 43",
		"pgjobd_queue_dead{queue=\"(other)\"} 40",
		NULL,
	};
	char *m = metrics_with(port, want);
	if (strstr(m, "queue=\"!") || strstr(m, "pgjobd_fake") ||
	    strstr(m, "longlong"))
		fail_msg("a client's queue name in /metrics:\n%s", m);
	/* Another instance may handle the others' kinds: not reported. */
	assert_null(strstr(m, "pgjobd_queue_unhandled{queue=\"(other)\"}"));
	/* The queue gauges have the real queue, "(other)" and nothing else. */
	for (const char *l = m; (l = strstr(l, "\npgjobd_queue_due{"));) {
		l++;
		if (strncmp(l, "pgjobd_queue_due{queue=\"real\"}", 30) &&
		    strncmp(l, "pgjobd_queue_due{queue=\"(other)\"}", 33))
			fail_msg("an unexpected series: %.80s", l);
	}
	free(m);
	t_stop_clean(p);
	PQfinish(c);
	free(ci);
}

/*
 * The queue figures are counted up to 10,000 jobs a window and estimated
 * past it (src/db/monitor.c), where counting every job passed the read's
 * 5 s at ten million.  A queue of 12,000 due jobs and 11,000 scheduled
 * ones in a table of fewer than 2,000 pages: the sample is the whole
 * table, so the estimate is the count, and the series say it is one.
 * The oldest due job is behind the window, at a lower priority: it is
 * found (the first of each priority), not the window's oldest.  A queue
 * under the cap is exact and not estimated.
 */
static void
test_metrics_past_the_cap(void **state)
{
	char *ci = t_db_migrated("t_edges_cap");
	PGconn *c = t_connect(ci);
	t_exec(c, "insert into pgjob.jobs (kind, queue, run_at)"
		  " select 'z', 'big', now() - interval '1 minute'"
		  " from generate_series(1, 11999)");
	t_exec(c, "insert into pgjob.jobs (kind, queue, priority, run_at)"
		  " values ('z', 'big', 5, now() - interval '2 hours')");
	t_exec(c, "insert into pgjob.jobs (kind, queue, run_at)"
		  " select 'z', 'big', now() + interval '1 day'"
		  " from generate_series(1, 11000)");
	t_exec(c, "insert into pgjob.jobs (kind, queue)"
		  " select 'z', 'small' from generate_series(1, 7)");
	int port = t_free_port();
	pid_t p = t_start("cap", ci,
			  "workers: 1\n"
			  "queues: { big: {}, small: {} }\n"
			  "metrics: { listen: \"127.0.0.1:%d\" }\n"
			  "handlers:\n"
			  "  k: { type: exec, queue: big, command: "
			  "[\"/bin/true\"] }\n",
			  port);
	t_wait_workers(c, 1, 30);
	const char *want[] = {
		"pgjobd_queue_due{queue=\"big\"} 12000",
		"pgjobd_queue_scheduled{queue=\"big\"} 11000",
		"pgjobd_queue_unhandled{queue=\"big\"} 23000",
		"pgjobd_queue_estimated{queue=\"big\"} 1",
		"pgjobd_queue_due{queue=\"small\"} 7",
		"pgjobd_queue_unhandled{queue=\"small\"} 7",
		"pgjobd_queue_estimated{queue=\"small\"} 0",
		NULL,
	};
	char *m = metrics_with(port, want);
	const char *o = strstr(m, "\npgjobd_queue_oldest_due_seconds{queue="
				  "\"big\"} ");
	assert_non_null(o);
	double age = strtod(strchr(o, '}') + 2, NULL);
	if (age < 7200 || age > 7800)
		fail_msg("the oldest due job is 2 hours old, not %.0f s", age);
	/* When they were read: within the last minute. */
	const char *r = strstr(m, "\npgjobd_queue_read_timestamp_seconds ");
	assert_non_null(r);
	double at = strtod(strchr(r + 1, ' ') + 1, NULL);
	double now = (double)time(NULL);
	if (at < now - 60 || at > now + 1)
		fail_msg("queue figures read at %.0f, now %.0f", at, now);
	free(m);
	t_stop_clean(p);
	PQfinish(c);
	free(ci);
}

/* "attempt|outcome|status|error" of job id's attempt rows, oldest first. */
#define HISTORY_SQL                                                            \
	"select string_agg(attempt || '|' || outcome || '|' ||"                \
	"  coalesce(status::text, '-') || '|' || coalesce(error, '-'),"        \
	"  E'\\n' order by token) from pgjob.attempts where job_id = %lld"

/*
 * An exec handler snoozes once (exit 75 with retry_in), then succeeds:
 * with max_attempts 1 the job still ends done, at attempt 1, without an
 * error, and its history has one snoozed attempt, not a failed one.  A
 * snooze after a real failure leaves that failure's last_error as it was.
 */
static void
test_snooze_once_then_done(void **state)
{
	char *ci = t_db_migrated("t_edges_snooze");
	PGconn *c = t_connect(ci);
	char *script = xasprintf("%s/snooze.sh", t_tmpdir());
	/* Per job: runs counted in a file named after it; argument N says
	 * what run N does ("snooze", "fail"; none: succeed). */
	char *text = xasprintf(
		"f=%s/snooze.$PGJOB_JOB_ID\n"
		"n=$(cat $f 2>/dev/null || echo 0); n=$((n + 1)); echo $n > "
		"$f\n"
		"eval \"what=\\${$n:-}\"\n"
		"case \"$what\" in\n"
		"snooze) echo '{\"retry_in\": \"10ms\"}'; echo busy >&2;"
		" exit 75;;\n"
		"fail) echo boom >&2; exit 3;;\n"
		"*) echo '{}';;\n"
		"esac\n",
		t_tmpdir());
	t_write_file(script, text);
	free(text);
	pid_t p = t_start("snooze", ci,
			  "workers: 1\n"
			  "defaults: { backoff: { base: 10ms, max: 10ms } }\n"
			  "handlers:\n"
			  "  once: { type: exec, max_attempts: 1, command:"
			  " [\"/bin/sh\", \"%s\", \"snooze\"] }\n"
			  "  after: { type: exec, max_attempts: 2, command:"
			  " [\"/bin/sh\", \"%s\", \"fail\", \"snooze\"] }\n",
			  script, script);
	long long id = t_long(c, "select pgjob.enqueue('once')");
	t_wait_ended(c, 1, 60);
	t_assert_job(c, id,
		     "state || '|' || attempts || '|' || "
		     "coalesce(last_error, '-')",
		     "done|1|-");
	t_assert_value(c, "1|snoozed|-|-", HISTORY_SQL, id);

	long long id2 = t_long(c, "select pgjob.enqueue('after')");
	t_wait_ended(c, 2, 60);
	t_assert_job(c, id2, "state || '|' || attempts", "done|2");
	t_assert_value(c,
		       "1|failed|3|exit status 3: boom\n"
		       "2|snoozed|-|-",
		       HISTORY_SQL, id2);
	t_stop_clean(p);
	free(script);
	PQfinish(c);
	free(ci);
}

/*
 * A plugin that snoozes every time (PGJOBD_RETRY with retry_in_ms 0) stops
 * at the cap: the job ends dead after 1,000 snoozes, with last_error
 * saying why; max_attempts 1 did not end it at the first.
 */
static void
test_snooze_forever_capped(void **state)
{
	char *ci = t_db_migrated("t_edges_snoozecap");
	PGconn *c = t_connect(ci);
	pid_t p = t_start("snoozecap", ci,
			  "workers: 1\nhandlers:\n"
			  "  p: { type: plugin, max_attempts: 1, library: "
			  "\"%s\", symbol: pgjobd_example }\n",
			  t_bin("pgjobd_example.so"));
	long long id = t_long(c, "select pgjob.enqueue('p', "
				 "'{\"retry_in\": 0}')");
	t_wait_state(c, id, "dead", 240);
	t_assert_job(c, id, "last_error",
		     "snoozed 1000 times, the most a job may");
	t_assert_value(c, "1000|1",
		       "select count(*) filter (where outcome = 'snoozed')"
		       " || '|' || count(*) filter (where outcome = 'dead')"
		       " from pgjob.attempts where job_id = %lld",
		       id);
	t_wait_log("snoozecap", "dead: snoozed 1000 times", 1, 30);
	t_stop_clean(p);
	PQfinish(c);
	free(ci);
}

/*
 * An http handler's server answers 503 with Retry-After: 0, every time:
 * each is a snooze, so the job with max_attempts 1 keeps coming back
 * instead of ending dead at the first answer.
 */
static void
test_http_retry_after_snoozes(void **state)
{
	int in_fd;
	pid_t srv;
	int port = t_httpd_start(&in_fd, &srv);
	char *ci = t_db_migrated("t_edges_httpsnooze");
	PGconn *c = t_connect(ci);
	pid_t p = t_start("httpsnooze", ci,
			  "workers: 1\nhandlers:\n"
			  "  hook: { type: http, max_attempts: 1,"
			  " url: \"http://127.0.0.1:%d/retry-after/0\" }\n",
			  port);
	long long id = t_long(c, "select pgjob.enqueue('hook')");
	t_wait_until(c, 60,
		     "select count(*) >= 3 from pgjob.attempts where job_id = "
		     "%lld and outcome = 'snoozed'",
		     id);
	t_assert_value(c, "0",
		       "select count(*) from pgjob.attempts where job_id = "
		       "%lld and outcome <> 'snoozed'",
		       id);
	t_stop_clean(p);
	t_assert_value(c, "t",
		       "select state <> 'dead' and last_error is null from "
		       "pgjob.jobs where id = %lld",
		       id);
	t_httpd_stop(in_fd, srv);
	PQfinish(c);
	free(ci);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exec_own_session),
		cmocka_unit_test(test_frozen_worker_logs_lease_loss_only),
		cmocka_unit_test(test_reslot_moves_locked_by),
		cmocka_unit_test(test_reconnect_keeps_slot),
		cmocka_unit_test(test_metrics_hostile_queues),
		cmocka_unit_test(test_metrics_past_the_cap),
		cmocka_unit_test(test_snooze_once_then_done),
		cmocka_unit_test(test_snooze_forever_capped),
		cmocka_unit_test(test_http_retry_after_snoozes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
