/*
 * Integration: flow control (docs/queues.md, "Flow control").  Limits hold
 * across three instances of three workers while one worker is killed with
 * -9; a sampler reads the database every 10 ms and counts the handlers'
 * processes; every start is logged by a trigger of the test's own, so that
 * the rate can be checked over every window.
 */
#include "testlib.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "db/sqlstate.h"

/* --- the sampler -------------------------------------------------------- */

/*
 * A child process that, every 10 ms until SIGTERM, reads how many jobs of a
 * queue hold a lease (state running and the lease not expired, by the
 * database's clock at that moment; with per_key, the most of any one key)
 * and counts the processes whose argv holds marker; it writes the most of
 * each, and how many samples it took, to its file.
 */
struct sampler {
	pid_t pid;
	char path[512];
};

static volatile sig_atomic_t sampler_stop;

static void
on_sampler_term(int sig)
{
	(void)sig;
	sampler_stop = 1;
}

/* Whether /proc/PID/cmdline of pid (a string) contains marker. */
static int
has_marker(const char *pid, const char *marker)
{
	char path[300], buf[4096];
	snprintf(path, sizeof(path), "/proc/%s/cmdline", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t len = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	for (size_t i = 0; i < len; i++)
		if (buf[i] == '\0')
			buf[i] = ' ';
	buf[len] = '\0';
	return strstr(buf, marker) != NULL;
}

/* The parent of pid, as a string in buf, or "" when gone. */
static const char *
parent_of(const char *pid, char *buf, size_t len)
{
	char path[300];
	int ppid = 0;
	snprintf(path, sizeof(path), "/proc/%s/stat", pid);
	FILE *f = fopen(path, "r");
	/* pid (comm) state ppid: comm ends at the last ')'. */
	char line[1024] = "";
	if (f) {
		if (!fgets(line, sizeof(line), f))
			line[0] = '\0';
		fclose(f);
	}
	char *close = strrchr(line, ')');
	if (close)
		sscanf(close + 1, " %*c %d", &ppid);
	snprintf(buf, len, "%d", ppid);
	return buf;
}

/*
 * Handlers running: processes whose argv holds marker, less the shell's
 * own forks (a fork keeps its parent's argv until it execs).
 */
static int
count_processes(const char *marker)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int n = 0;
	char ppid[32];

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		if (has_marker(e->d_name, marker) &&
		    !has_marker(parent_of(e->d_name, ppid, sizeof(ppid)),
				marker))
			n++;
	}
	closedir(d);
	return n;
}

static void
sampler_start(struct sampler *s, const char *ci, const char *queue,
	      const char *marker, int per_key)
{
	snprintf(s->path, sizeof(s->path), "%s/sampler-%s", t_tmpdir(), queue);
	s->pid = fork();
	assert_true(s->pid >= 0);
	if (s->pid > 0)
		return;
	signal(SIGTERM, on_sampler_term);
	PGconn *c = PQconnectdb(ci);
	const char *sql =
		per_key ? "select coalesce(max(n), 0) from (select count(*) n"
			  " from pgjob.all_jobs where queue = $1 and state = "
			  "'running' and locked_until >= clock_timestamp()"
			  " group by coalesce(limit_key, ordering_key)) k"
			: "select count(*) from pgjob.all_jobs where queue = "
			  "$1 "
			  "and state = 'running' and locked_until >= "
			  "clock_timestamp()";
	long most_db = 0, most_proc = 0, samples = 0;
	const char *p[] = {queue};
	while (!sampler_stop && PQstatus(c) == CONNECTION_OK) {
		PGresult *r = PQexecParams(c, sql, 1, NULL, p, NULL, NULL, 0);
		if (PQresultStatus(r) == PGRES_TUPLES_OK) {
			long n = atol(PQgetvalue(r, 0, 0));
			most_db = n > most_db ? n : most_db;
			samples++;
		}
		PQclear(r);
		if (marker) {
			long n = count_processes(marker);
			most_proc = n > most_proc ? n : most_proc;
		}
		usleep(10000);
	}
	FILE *f = fopen(s->path, "w");
	if (f) {
		fprintf(f, "%ld %ld %ld\n", most_db, most_proc, samples);
		fclose(f);
	}
	PQfinish(c);
	_exit(0);
}

/* Stops the sampler: the most it saw in the database and in processes. */
static void
sampler_stop_read(struct sampler *s, long *most_db, long *most_proc)
{
	long samples = 0;
	assert_int_equal(t_stop(s->pid, SIGTERM, 10), 0);
	char *text = t_read_file(s->path);
	assert_non_null(text);
	assert_int_equal(
		sscanf(text, "%ld %ld %ld", most_db, most_proc, &samples), 3);
	free(text);
	/* It sampled all along (every 10 ms, give or take the reads). */
	assert_true(samples > 50);
}

/* Logs every claim of a job (an attempt starts) into t_starts, at the time
 * the claim took (attempted_at). */
static void
log_starts(PGconn *c)
{
	t_exec(c, "create table t_starts (id bigint, attempt int,"
		  " at timestamptz, cost int)");
	t_exec(c, "create function t_log_start() returns trigger"
		  " language plpgsql as $$ begin insert into t_starts"
		  " values (new.id, new.attempts, new.attempted_at, new.cost);"
		  " return null; end $$");
	t_exec(c, "create trigger t_log_start after update of attempted_at"
		  " on pgjob.jobs for each row when (new.attempted_at is"
		  " distinct from old.attempted_at)"
		  " execute function t_log_start()");
}

/* Kills with -9 the worker that holds a running job of queue. */
static void
kill_a_holder(PGconn *c, const char *queue)
{
	/* One read: a job seen running by one query can have ended by the
	 * next (a local run saw "query returned null" here). */
	long long id = 0;
	for (int i = 0; i < 3000 && id == 0; i++) {
		char *v = t_value(c,
				  "select min(id) from pgjob.all_jobs where"
				  " queue = '%s' and state = 'running'"
				  " and locked_until > now()",
				  queue);
		if (v)
			id = atoll(v);
		else
			t_sleep_ms(10);
		free(v);
	}
	assert_true(id > 0);
	pid_t pid = t_holder_pid(c, id);
	assert_true(pid > 0);
	assert_int_equal(kill(pid, SIGKILL), 0);
}

/*
 * Every job ended done exactly once: no attempt failed, and a job ran more
 * than once only where its worker was killed under it (a lost attempt).
 * done: the file each run appended its job id to.
 */
static void
assert_done_once(PGconn *c, const char *queue, int n, const char *done)
{
	/* Should it fail: each such job's attempts, as the history has them. */
	char *why = t_value(
		c,
		"select coalesce(string_agg(format('job %%s %%s: attempts %%s,"
		" lost %%s; history: %%s', j.id, j.state, j.attempts,"
		" j.lost_attempts, (select string_agg(format('%%s %%s %%s %%s',"
		" a.attempt, a.outcome, a.worker, a.error), '; ' order by"
		" a.token) from pgjob.attempts a where a.job_id = j.id)),"
		" E'\\n'), '') from pgjob.all_jobs j where queue = '%s'"
		" and (state <> 'done' or attempts - lost_attempts <> 1)",
		queue);
	if (*why)
		print_message("%s\n", why);
	free(why);
	t_assert_value(
		c, "0",
		"select count(*) from pgjob.all_jobs where queue = '%s'"
		" and (state <> 'done' or attempts - lost_attempts <> 1)",
		queue);
	assert_int_equal(
		t_long(c,
		       "select count(*) from pgjob.all_jobs where queue ="
		       " '%s'",
		       queue),
		n);
	if (!done)
		return;
	/* Each job's run finished once, or more only if it was lost. */
	char *text = t_read_file(done);
	assert_non_null(text);
	t_exec(c, "create temporary table t_ran (id bigint)");
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
		t_exec(c, "insert into t_ran values (%lld)", atoll(line));
	free(text);
	t_assert_value(
		c, "0",
		"select count(*) from pgjob.all_jobs j where queue = '%s'"
		" and (select count(*) from t_ran r where r.id = j.id)"
		" not between 1 and 1 + j.lost_attempts",
		queue);
	t_exec(c, "drop table t_ran");
}

/* --- global concurrency ------------------------------------------------- */

static void
test_global_concurrency(void **state)
{
	char *ci = t_db_migrated("t_flow_conc");
	PGconn *c = t_connect(ci);
	char done[512], body[2048];
	snprintf(done, sizeof(done), "%s/conc.done", t_tmpdir());
	unlink(done);
	snprintf(body, sizeof(body),
		 "workers: 3\nlease: 2s\npoll_interval: 200ms\n"
		 "queues: { ex: { concurrency: 4, global_concurrency: 4 } }\n"
		 "handlers:\n"
		 "  work: { type: exec, queue: ex, command: [/bin/sh, -c,"
		 " \"sleep 0.15; echo $PGJOB_JOB_ID >> %s\","
		 " flowconc-marker] }\n",
		 done);
	const char *cfg = t_config("conc", ci, body);
	t_exec(c, "select pgjob.enqueue('work', '{}', 'ex')"
		  " from generate_series(1, 120)");
	struct sampler s;
	sampler_start(&s, ci, "ex", "flowconc-marker", 0);
	pid_t p[3];
	t_daemons(cfg, 3, "conc", p);
	t_wait_until(c, 60,
		     "select count(*) >= 40 from pgjob.all_jobs where state = "
		     "'done'");
	kill_a_holder(c, "ex");
	t_wait_done(c, 120, 120);
	long most_db, most_proc;
	sampler_stop_read(&s, &most_db, &most_proc);
	print_message("global_concurrency 4, 3 instances x 3 workers: the "
		      "sampler saw at most %ld holding a lease, %ld handler "
		      "processes\n",
		      most_db, most_proc);
	assert_true(most_db <= 4);
	assert_true(most_proc <= 4);
	/* The limit was reached: the test tested it. */
	assert_int_equal(most_db, 4);
	assert_done_once(c, "ex", 120, done);
	/* The killed worker's job came back once its lease expired. */
	assert_true(
		t_long(c, "select sum(lost_attempts) from pgjob.all_jobs") >=
		1);
	for (int i = 0; i < 3; i++)
		t_stop_clean(p[i]);
	PQfinish(c);
	free(ci);
}

/* --- rate ----------------------------------------------------------------- */

static void
test_rate(void **state)
{
	char *ci = t_db_migrated("t_flow_rate");
	PGconn *c = t_connect(ci);
	log_starts(c);
	const char *cfg = t_config(
		"rate", ci,
		"workers: 3\nlease: 2s\npoll_interval: 200ms\n"
		"queues: { rl: { concurrency: 4, rate: 40/s, burst: 8 } }\n"
		"handlers:\n"
		"  tick: { type: exec, queue: rl, command: [/bin/sleep, "
		"\"0.05\"] }\n");
	/* Costs 1, 2, 3: 240 tokens. */
	t_exec(c, "select pgjob.enqueue('tick', '{}', 'rl', cost => 1 + i %% 3)"
		  " from generate_series(1, 120) i");
	pid_t p[3];
	t_daemons(cfg, 3, "rate", p);
	t_wait_until(c, 60,
		     "select count(*) >= 40 from pgjob.all_jobs where state = "
		     "'done'");
	kill_a_holder(c, "rl");
	t_wait_done(c, 120, 120);
	/*
	 * A token bucket of 40/s holding 8: over any stretch of time d, the
	 * starts cost at most 8 + 40 d.  Checked between every two starts;
	 * the worst stretch is printed as its cost over that allowance.
	 */
	char *worst = t_value(
		c, "select round(max(cum / (8 + 40 * extract(epoch from"
		   " b.at - a.at))), 3) from t_starts a join lateral"
		   " (select b.at, (select sum(x.cost) from t_starts x where"
		   " x.at between a.at and b.at) as cum from t_starts b"
		   " where b.at >= a.at) b on true");
	char *second =
		t_value(c, "select max(s) from (select (select sum(x.cost) from"
			   " t_starts x where x.at >= a.at and x.at < a.at +"
			   " interval '1 second') s from t_starts a) w");
	print_message("rate 40/s burst 8, 3 instances x 3 workers: worst "
		      "stretch used %s of its allowance; the most tokens in "
		      "any 1 s: %s (allowance 48)\n",
		      worst, second);
	/* 1.0 is a stretch that used all of it; the rest is rounding. */
	assert_true(atof(worst) <= 1.001);
	assert_true(atol(second) <= 48);
	/* It ran at the rate: not far under it either. */
	assert_true(atol(second) >= 30);
	free(worst);
	free(second);
	assert_done_once(c, "rl", 120, NULL);
	for (int i = 0; i < 3; i++)
		t_stop_clean(p[i]);
	PQfinish(c);
	free(ci);
}

/* --- per-key concurrency ------------------------------------------------ */

static void
test_per_key_concurrency(void **state)
{
	char *ci = t_db_migrated("t_flow_key");
	PGconn *c = t_connect(ci);
	const char *cfg = t_config(
		"perkey", ci,
		"workers: 2\nlease: 2s\npoll_interval: 200ms\n"
		"queues: { pk: { concurrency: 8, per_key_concurrency: 2 } }\n"
		"handlers:\n"
		"  w: { type: exec, queue: pk, command: [/bin/sleep, "
		"\"0.1\"] }\n");
	t_exec(c, "select pgjob.enqueue('w', '{}', 'pk', limit_key => 'k' ||"
		  " (i %% 3)) from generate_series(1, 36) i");
	struct sampler s;
	sampler_start(&s, ci, "pk", NULL, 1);
	pid_t p[2];
	t_daemons(cfg, 2, "perkey", p);
	/* A worker killed under its jobs: their keys' slots stay taken
	 * until the leases expire (the keys' holders keep the ids), then
	 * the jobs run again. */
	t_wait_until(c, 60,
		     "select count(*) >= 12 from pgjob.all_jobs where state = "
		     "'done'");
	kill_a_holder(c, "pk");
	t_wait_done(c, 36, 60);
	long most_key, unused;
	sampler_stop_read(&s, &most_key, &unused);
	print_message("per_key_concurrency 2: at most %ld of one key\n",
		      most_key);
	assert_int_equal(most_key, 2);
	assert_done_once(c, "pk", 36, NULL);
	assert_true(
		t_long(c, "select sum(lost_attempts) from pgjob.all_jobs") >=
		1);
	for (int i = 0; i < 2; i++)
		t_stop_clean(p[i]);
	PQfinish(c);
	free(ci);
}

/* --- fairness ---------------------------------------------------------------
 */

static void
test_fairness(void **state)
{
	char *ci = t_db_migrated("t_flow_fair");
	PGconn *c = t_connect(ci);
	char body[1024];
	snprintf(body, sizeof(body),
		 "workers: 2\n"
		 "queues: { t: { concurrency: 16, fair: true } }\n"
		 "handlers:\n"
		 "  noop: { type: plugin, queue: t, library: %s,"
		 " symbol: pgjobd_example }\n",
		 t_bin("pgjobd_example.so"));
	const char *cfg = t_config("fair", ci, body);
	/* One tenant's 100,000 jobs first, then 20 tenants' 10 each. */
	t_exec(c, "insert into pgjob.jobs (queue, kind, limit_key)"
		  " select 't', 'noop', 'big' from generate_series(1, 100000)");
	t_exec(c, "insert into pgjob.jobs (queue, kind, limit_key)"
		  " select 't', 'noop', 'small-' || (i %% 20)"
		  " from generate_series(1, 200) i");
	t_exec(c, "analyze pgjob.jobs");
	pid_t p = t_daemon(cfg, 0, "fair");
	t_wait_until(c, 120,
		     "select count(*) = 200 from pgjob.all_jobs where limit_key"
		     " like 'small-%%' and attempted_at is not null");
	t_stop_clean(p);
	long long before = t_long(
		c, "select count(*) from pgjob.all_jobs where limit_key = 'big'"
		   " and attempted_at <= (select max(attempted_at) from"
		   " pgjob.all_jobs where limit_key like 'small-%%')");
	print_message("fair: the 200 small jobs had all started when the big "
		      "key had started %lld\n",
		      before);
	assert_true(before < 2000);
	PQfinish(c);
	free(ci);
}

/* --- pause and resume ------------------------------------------------------
 */

static long long
attempted(PGconn *c, const char *kind)
{
	return t_long(c,
		      "select count(*) from pgjob.all_jobs where kind = '%s'"
		      " and attempted_at is not null",
		      kind);
}

static void
test_pause_resume(void **state)
{
	char *ci = t_db_migrated("t_flow_pause");
	PGconn *c = t_connect(ci);
	int port = t_free_port();
	char body[512];
	/* A long poll: a resume is seen at once only through the NOTIFY. */
	snprintf(body, sizeof(body),
		 "workers: 2\npoll_interval: 30s\n"
		 "metrics: { listen: \"127.0.0.1:%d\" }\n"
		 "queues: { q: { concurrency: 4 } }\n"
		 "handlers:\n"
		 "  a: { type: exec, queue: q, command: [/bin/true] }\n"
		 "  b: { type: exec, queue: q, command: [/bin/true] }\n",
		 port);
	const char *cfg = t_config("pause", ci, body);
	pid_t p = t_daemon(cfg, 0, "pause");
	t_wait_workers(c, 2, 30);
	t_exec(c, "select pgjob.pause('q')");
	t_exec(c, "select pgjob.enqueue(k, '{}', 'q') from"
		  " (values ('a'), ('b')) v(k), generate_series(1, 3)");
	/* Claims of the queue ran with the jobs there, and took none. */
	t_wait_claims_after(c, port, 2);
	assert_int_equal(attempted(c, "a") + attempted(c, "b"), 0);
	/* The metrics say so. */
	char *m = NULL;
	for (int i = 0; i < 100; i++) {
		free(m);
		m = t_http_get(port, "/metrics");
		if (m && strstr(m, "pgjobd_queue_waiting{queue=\"q\","
				   "limit=\"paused\"} 6"))
			break;
		t_sleep_ms(100);
	}
	assert_non_null(strstr(m, "pgjobd_queue_paused{queue=\"q\"} 1"));
	assert_non_null(strstr(m, "pgjobd_queue_waiting{queue=\"q\","
				  "limit=\"paused\"} 6"));
	free(m);
	/* A restart does not resume it. */
	t_stop_clean(p);
	p = t_daemon(cfg, 0, "pause");
	t_wait_workers(c, 2, 30);
	t_wait_claims_after(c, port, 2);
	assert_int_equal(attempted(c, "a") + attempted(c, "b"), 0);
	/* Kind b paused, the queue resumed: a runs (within the NOTIFY's
	 * round trip, not the 30 s poll), b waits. */
	t_exec(c, "select pgjob.pause('q', 'b')");
	t_exec(c, "select pgjob.resume('q')");
	t_wait_until(
		c, 10,
		"select count(*) = 3 from pgjob.all_jobs where kind = 'a' and"
		" state = 'done'");
	assert_int_equal(attempted(c, "b"), 0);
	t_assert_value(c, "{b}",
		       "select paused_kinds::text from pgjob.limits where"
		       " queue = 'q'");
	t_exec(c, "select pgjob.resume('q', 'b')");
	t_wait_until(
		c, 10,
		"select count(*) = 3 from pgjob.all_jobs where kind = 'b' and"
		" state = 'done'");
	/* Nothing left to limit: the row is gone, the queue ordinary. */
	t_assert_value(c, "0", "select count(*) from pgjob.limits");
	t_stop_clean(p);
	PQfinish(c);
	free(ci);
}

/* --- runtime changes, config and SQL ----------------------------------------
 */

static void
test_runtime_limits(void **state)
{
	char *ci = t_db_migrated("t_flow_runtime");
	PGconn *c = t_connect(ci);
	int port = t_free_port();
	char body[512];
	snprintf(body, sizeof(body),
		 "workers: 2\npoll_interval: 200ms\nshutdown_timeout: 1s\n"
		 "metrics: { listen: \"127.0.0.1:%d\" }\n"
		 "queues: { q: { concurrency: 4, global_concurrency: 1 } }\n"
		 "handlers:\n"
		 "  s: { type: exec, queue: q, command: [/bin/sleep, 30] }\n",
		 port);
	const char *cfg = t_config("runtime", ci, body);
	/* Paused before any worker came: the pause is the database's, the
	 * limits are still the config's to publish. */
	t_exec(c, "insert into pgjob.queues (name) values ('q')");
	t_exec(c, "select pgjob.pause('q')");
	pid_t p = t_daemon(cfg, 0, "runtime");
	t_wait_workers(c, 2, 30);
	/* The config's limit is published: by each worker before its row
	 * in pgjob.workers is written (session_register()), so by the time
	 * t_wait_workers() returns. */
	t_assert_value(c, "1 config true",
		       "select global_concurrency || ' ' || source || ' ' ||"
		       " paused from pgjob.limits where queue = 'q'");
	t_exec(c, "select pgjob.resume('q')");
	t_exec(c, "select pgjob.enqueue('s', '{}', 'q') from"
		  " generate_series(1, 6)");
	t_wait_running(c, 1, 10);
	/* Claims with room for more came after it started: the limit held
	 * them back. */
	t_wait_claims_after(c, port, 2);
	t_assert_value(c, "1",
		       "select count(*) from pgjob.all_jobs where state = "
		       "'running'");
	/* Raised in SQL, without a restart. */
	t_exec(c,
	       "select pgjob.set_limits('q', '{\"global_concurrency\": 3}')");
	t_wait_running(c, 3, 10);
	t_assert_value(c, "sql",
		       "select source from pgjob.limits where queue = 'q'");
	/* Back to the config's: the workers publish it again. */
	t_exec(c, "select pgjob.reset_limits('q')");
	t_wait_until(c, 10,
		     "select global_concurrency = 1 and source = 'config'"
		     " from pgjob.limits where queue = 'q'");
	/* Clear errors, nothing changed. */
	char *e = t_expect_sqlstate(
		c, "22023",
		"select pgjob.set_limits('q', '{\"rate\": \"10/x\"}')");
	assert_non_null(strstr(e, "rate \"10/x\""));
	free(e);
	e = t_expect_sqlstate(c, "22023",
			      "select pgjob.set_limits('q',"
			      " '{\"global_concurrency\": -1}')");
	assert_non_null(strstr(e, "whole number"));
	free(e);
	e = t_expect_sqlstate(c, "42704",
			      "select pgjob.set_limits('nosuch',"
			      " '{\"global_concurrency\": 1}')");
	assert_non_null(strstr(e, "unknown queue"));
	free(e);
	e = t_expect_sqlstate(c, "22023",
			      "select pgjob.set_limits('q', '{\"speed\": 1}')");
	free(e);
	t_assert_value(c, "1 config",
		       "select global_concurrency || ' ' || source from"
		       " pgjob.limits where queue = 'q'");
	t_stop_clean(p);
	PQfinish(c);
	free(ci);
}

/* --- limits shared with the application -------------------------------------
 */

static void
test_application_budget(void **state)
{
	char *ci = t_db_migrated("t_flow_app");
	PGconn *c = t_connect(ci);
	log_starts(c);
	int port = t_free_port();
	char body[1024];
	snprintf(body, sizeof(body),
		 "workers: 2\npoll_interval: 200ms\nshutdown_timeout: 1s\n"
		 "metrics: { listen: \"127.0.0.1:%d\" }\n"
		 "queues:\n"
		 "  sl: { concurrency: 4, global_concurrency: 2 }\n"
		 "  tr: { concurrency: 4, rate: 5/s, burst: 5 }\n"
		 "handlers:\n"
		 "  s: { type: exec, queue: sl, command: [/bin/sleep, 30] }\n"
		 "  t: { type: exec, queue: tr, command: [/bin/true] }\n",
		 port);
	const char *cfg = t_config("app", ci, body);
	pid_t p = t_daemon(cfg, 0, "app");
	t_wait_workers(c, 2, 30);
	/* The application holds one of sl's two slots: one job runs. */
	long long hold = t_long(c, "select pgjob.acquire_slot('sl', ttl =>"
				   " '60 s')");
	t_exec(c, "select pgjob.enqueue('s', '{}', 'sl') from"
		  " generate_series(1, 3)");
	t_wait_running(c, 1, 10);
	/* Claims of both queues, from both workers (four statements on
	 * their way at most), came after it started. */
	t_wait_claims_after(c, port, 4);
	t_assert_value(c, "1",
		       "select count(*) from pgjob.all_jobs where state = "
		       "'running'");
	/* No second hold while the limit is reached. */
	t_assert_value(c, "t", "select pgjob.acquire_slot('sl') is null");
	t_assert_value(c, "t", "select pgjob.release_slot(%lld)", hold);
	t_wait_running(c, 2, 10);
	/* The application takes the whole bucket: the job waits for a
	 * token (a fifth of a second at 5/s). */
	t_assert_value(c, "t", "select taken from pgjob.take_rate('tr', 5)");
	t_assert_value(c, "f", "select taken from pgjob.take_rate('tr', 5)");
	t_exec(c, "create table t_took as select clock_timestamp() as at");
	long long id = t_long(c, "select pgjob.enqueue('t', '{}', 'tr')");
	t_wait_state(c, id, "done", 10);
	t_assert_value(c, "t",
		       "select min(s.at) >= t.at + interval '150 ms' from"
		       " t_starts s, t_took t where s.id = %lld group by t.at",
		       id);
	/* The bucket, and the concurrency limit's waiting jobs, in the
	 * metrics (read every 5 s). */
	char *m = NULL;
	for (int i = 0; i < 150; i++) {
		free(m);
		m = t_http_get(port, "/metrics");
		if (m && strstr(m, "pgjobd_queue_tokens{queue=\"tr\"}") &&
		    strstr(m, "pgjobd_queue_waiting{queue=\"sl\","
			      "limit=\"concurrency\"} 1") &&
		    strstr(m, "pgjobd_job_queue_wait_seconds_count{queue="
			      "\"tr\"} 1"))
			break;
		t_sleep_ms(100);
	}
	assert_non_null(strstr(m, "pgjobd_queue_tokens{queue=\"tr\"}"));
	assert_non_null(strstr(m, "pgjobd_queue_waiting{queue=\"sl\","
				  "limit=\"concurrency\"} 1"));
	assert_non_null(strstr(m, "pgjobd_queue_paused{queue=\"sl\"} 0"));
	/* The job's wait for its token, as the limited claim measured it:
	 * 150 ms or more, one observation. */
	assert_non_null(strstr(m, "pgjobd_job_queue_wait_seconds_bucket{queue="
				  "\"tr\",le=\"0.1\"} 0"));
	assert_non_null(strstr(m, "pgjobd_job_queue_wait_seconds_bucket{queue="
				  "\"tr\",le=\"60\"} 1"));
	free(m);
	/* Errors: no such limit, bad arguments. */
	char *e = t_expect_sqlstate(c, "55000",
				    "select pgjob.take_rate('sl', 1)");
	free(e);
	e = t_expect_sqlstate(c, "22023",
			      "select pgjob.acquire_slot('sl', ttl => '0 s')");
	free(e);
	t_stop_clean(p);
	PQfinish(c);
	free(ci);
}

/* --- adaptive: a 503 with Retry-After throttles the queue ------------------
 */

static void
test_adaptive_throttle(void **state)
{
	char *ci = t_db_migrated("t_flow_adaptive");
	PGconn *c = t_connect(ci);
	log_starts(c);
	int in_fd;
	pid_t httpd;
	int port = t_httpd_start(&in_fd, &httpd);
	char body[1024];
	snprintf(body, sizeof(body),
		 "workers: 1\npoll_interval: 200ms\n"
		 "queues: { api: { concurrency: 4, adaptive: true } }\n"
		 "handlers:\n"
		 "  call: { type: http, queue: api, max_attempts: 1,"
		 " url: \"http://127.0.0.1:%d/retry-after/2\" }\n"
		 "  other: { type: exec, queue: api, command: [/bin/true] }\n",
		 port);
	const char *cfg = t_config("adaptive", ci, body);
	pid_t p = t_daemon(cfg, 0, "adaptive");
	/* Its 503 with Retry-After is a snooze (docs/handlers.md): it comes
	 * back after the throttle, which is what is checked here. */
	t_exec(c, "select pgjob.enqueue('call', '{}', 'api')");
	t_wait_until(c, 20,
		     "select throttled_until is not null from pgjob.limits"
		     " where queue = 'api'");
	t_exec(c, "select pgjob.enqueue('other', '{}', 'api') from"
		  " generate_series(1, 3)");
	t_wait_until(
		c, 20,
		"select count(*) = 3 from pgjob.all_jobs where kind = 'other'"
		" and state = 'done'");
	/* None of them started before the server's two seconds were up. */
	t_assert_value(
		c, "t",
		"select min(s.at) >= (select min(a.at) + interval '1900 ms'"
		" from t_starts a join pgjob.all_jobs j on j.id = a.id"
		" where j.kind = 'call') from t_starts s join"
		" pgjob.all_jobs j on j.id = s.id where j.kind = 'other'");
	assert_true(t_log_count("adaptive", "queue throttled for 2s") >= 1);
	t_stop_clean(p);
	t_httpd_stop(in_fd, httpd);
	PQfinish(c);
	free(ci);
}

/* --- the limited claim itself, statement by statement ------------------- */

/* pgjob.claim_limited() of up to want jobs of q: "c" rows as "id", the
 * marker, if any, as "w:why" or "u"; space-separated, in order. */
static char *
claim(PGconn *c, const char *q, int want)
{
	return t_value(c,
		       "select coalesce(string_agg(case c_t when 'c' then"
		       " c_id::text when 'w' then 'w:' || c_kind else c_t"
		       " end, ' ' order by c_t, c_id), '') from"
		       " pgjob.claim_limited('%s', %d, '{k}', 'parallel',"
		       " 'me', 60000, 1000)",
		       q, want);
}

static void
assert_claim(PGconn *c, const char *q, int want, const char *expect)
{
	char *got = claim(c, q, want);
	if (strcmp(got, expect) != 0)
		fail_msg("claim of %s: got \"%s\", want \"%s\"", q, got,
			 expect);
	free(got);
}

static void
test_claim_limited_sql(void **state)
{
	char *ci = t_db_migrated("t_flow_sql");
	PGconn *c = t_connect(ci);
	PGconn *other = t_connect(ci);
	t_exec(c, "insert into pgjob.queues (name) values ('w'), ('r'),"
		  " ('x'), ('p')");
	/* Weights: a key of weight 3 gets three jobs per turn. */
	t_exec(c, "select pgjob.set_limits('w', '{\"fair\": true}')");
	t_exec(c, "select pgjob.set_key_weight('w', 'a', 3)");
	t_exec(c, "insert into pgjob.jobs (id, queue, kind, limit_key)"
		  " overriding system value select i, 'w', 'k',"
		  " case when i <= 10 then 'a' else 'b' end"
		  " from generate_series(1, 20) i");
	assert_claim(c, "w", 8, "1 2 3 4 5 6 11 12");
	/* Claims of one job (a binding global_concurrency, a worker with one
	 * free slot): the key's turn goes on across claims until it has had
	 * its weight (schema version 38: a key of weight 3 got one job a turn
	 * before, as a key of weight 1 did); then two at a time. */
	t_exec(c, "insert into pgjob.queues (name) values ('w1')");
	t_exec(c, "select pgjob.set_limits('w1', '{\"fair\": true}')");
	t_exec(c, "select pgjob.set_key_weight('w1', 'a', 3)");
	t_exec(c, "insert into pgjob.jobs (id, queue, kind, limit_key)"
		  " overriding system value select 700 + i, 'w1', 'k',"
		  " case when i <= 10 then 'a' else 'b' end"
		  " from generate_series(1, 20) i");
	static const char *const one[] = {"701", "702", "703", "711",
					  "704", "705", "706", "712"};
	for (size_t i = 0; i < sizeof(one) / sizeof(one[0]); i++)
		assert_claim(c, "w1", 1, one[i]);
	assert_claim(c, "w1", 2, "707 708");
	assert_claim(c, "w1", 2, "709 713");
	/* A key's bucket: 2 a second, 2 at most, each key apart. */
	t_exec(c,
	       "select pgjob.set_limits('r', '{\"rate_per_key\": \"2/s\"}')");
	t_exec(c, "insert into pgjob.jobs (id, queue, kind, limit_key)"
		  " overriding system value select 100 + i, 'r', 'k',"
		  " 'key' || (i %% 3) from generate_series(1, 15) i");
	assert_claim(c, "r", 10, "101 102 103 104 105 106 w:key_rate");
	assert_claim(c, "r", 10, "w:key_rate");
	/* The application takes the key's tokens too (and gives them back
	 * when it rolls back). */
	t_exec(c, "begin");
	t_assert_value(c, "f",
		       "select taken from pgjob.take_rate('r', 1, 'key1')");
	t_exec(c, "rollback");
	/* A job dearer than the bucket holds waits for a full bucket, and
	 * leaves it in debt. */
	t_exec(c, "select pgjob.set_limits('x', '{\"rate\": \"1/s\","
		  " \"burst\": 2}')");
	t_exec(c, "insert into pgjob.jobs (id, queue, kind, cost)"
		  " overriding system value values (201, 'x', 'k', 5),"
		  " (202, 'x', 'k', 1)");
	assert_claim(c, "x", 4, "201 w:rate");
	t_assert_value(
		c, "t",
		"select tokens < -2.9 from pgjob.limits where queue = 'x'");
	/* Paused kinds, then the whole queue; then no row at all. */
	t_exec(c, "insert into pgjob.jobs (id, queue, kind)"
		  " overriding system value values (301, 'p', 'k')");
	t_exec(c, "select pgjob.pause('p', 'k')");
	assert_claim(c, "p", 4, "");
	t_exec(c, "select pgjob.pause('p')");
	assert_claim(c, "p", 4, "w:paused");
	t_exec(c, "select pgjob.resume('p'), pgjob.resume('p', 'k')");
	assert_claim(c, "p", 4, "u");
	/* Another claimer holds the row: this one does not wait. */
	t_exec(c,
	       "select pgjob.set_limits('p', '{\"global_concurrency\": 1}')");
	t_exec(other, "begin");
	t_exec(other,
	       "select 1 from pgjob.limits where queue = 'p' for update");
	assert_claim(c, "p", 4, "w:busy");
	t_exec(other, "rollback");
	assert_claim(c, "p", 4, "301 w:concurrency");
	assert_claim(c, "p", 4, "w:concurrency");
	/* Its lease expired: the slot is free, and the job is claimed again,
	 * as a lost attempt, where it stands in the queue's order: at the
	 * next read from the head (the last claim's position is past it;
	 * the claim reads from the head once a second, schema 27). */
	t_exec(c, "update pgjob.jobs set locked_until = now() - interval '1s'"
		  " where id = 301");
	t_exec(c, "update pgjob.limits set pos_at = pos_at - interval '2 s'"
		  " where queue = 'p'");
	assert_claim(c, "p", 4, "301 w:concurrency");
	t_assert_job(c, 301, "attempts || ' ' || lost_attempts", "2 1");
	/* Each claimed job's time since its run_at, in c_ra of its 'c' row
	 * (sql/upgrade/018_claim_limited_wait.sql): in queue order (a global
	 * limit) and key by key (fair). */
	t_exec(c, "insert into pgjob.queues (name) values ('g')");
	t_exec(c,
	       "select pgjob.set_limits('g', '{\"global_concurrency\": 5}')");
	t_exec(c, "insert into pgjob.jobs (id, queue, kind, run_at)"
		  " overriding system value values"
		  " (401, 'g', 'k', now() - interval '5 s'),"
		  " (402, 'w', 'k', now() - interval '7 s')");
	t_assert_value(c, "t",
		       "select c_ra between 5000 and 65000 from"
		       " pgjob.claim_limited('g', 4, '{k}', 'parallel', 'h',"
		       " 60000, 1000) where c_t = 'c' and c_id = 401");
	t_exec(c, "update pgjob.jobs set state = 'done', finished_at = now() "
		  "where queue = 'w'"
		  " and state = 'running'");
	t_assert_value(c, "t",
		       "select bool_and(c_ra >= 0) and bool_or(c_id = 402 and"
		       " c_ra between 7000 and 67000) from"
		       " pgjob.claim_limited('w', 20, '{k}', 'parallel', 'h',"
		       " 60000, 1000) where c_t = 'c'");
	PQfinish(other);
	PQfinish(c);
	free(ci);
}

/* Ends jobs ids (a list) as done, as a worker's finish would. */
static void
end_jobs(PGconn *c, const char *ids)
{
	t_exec(c,
	       "update pgjob.jobs set state = 'done', finished_at = now()"
	       " where id in (%s)",
	       ids);
}

/*
 * per_key_concurrency counted from each key's holders (schema version 24):
 * the ids its claims let start, kept in its pgjob.limit_keys row and looked
 * up by primary key; not through an index of running jobs.
 */
static void
test_key_holders_sql(void **state)
{
	char *ci = t_db_migrated("t_flow_holders");
	PGconn *c = t_connect(ci);
	PGconn *other = t_connect(ci);
	t_exec(c, "insert into pgjob.queues (name) values ('kq')");
	t_exec(c, "select pgjob.set_limits('kq',"
		  " '{\"per_key_concurrency\": 2}')");
	t_exec(c, "insert into pgjob.jobs (id, queue, kind, limit_key)"
		  " overriding system value select i, 'kq', 'k',"
		  " case when i < 510 then 'a' else 'b' end"
		  " from generate_series(501, 505) i"
		  " union all select i, 'kq', 'k', 'b'"
		  " from generate_series(511, 513) i");
	t_assert_value(c, "t",
		       "select to_regclass('pgjob.jobs_running_key_idx') is"
		       " null");
	assert_claim(c, "kq", 10, "501 502 511 512 w:key_concurrency");
#define HOLDERS                                                                \
	"select string_agg(key || '=' || coalesce(holders::text, 'null'), ' '" \
	" order by key) from pgjob.limit_keys where queue = 'kq'"
	t_assert_value(c, "a={501,502} b={511,512}", HOLDERS);
	/* A job that ended leaves room; its id stays in the row until the
	 * ended ones are half of it (a look-up each until then). */
	end_jobs(c, "501");
	assert_claim(c, "kq", 10, "503 w:key_concurrency");
	t_assert_value(c, "a={501,502,503} b={511,512}", HOLDERS);
	/* An expired lease leaves room too, and its job is claimed again:
	 * its id is there twice, and counts once. */
	t_exec(c, "update pgjob.jobs set locked_until = now() - interval '1s'"
		  " where id = 502");
	assert_claim(c, "kq", 10, "502 w:key_concurrency");
	t_assert_job(c, 502, "attempts || ' ' || lost_attempts", "2 1");
	assert_claim(c, "kq", 10, "w:key_concurrency");
	t_assert_value(c, "a={501,502,503,502} b={511,512}", HOLDERS);
	/* An application's slot counts beside the key's jobs. */
	end_jobs(c, "511");
	t_assert_value(c, "t",
		       "select pgjob.acquire_slot('kq', 'b') is not null");
	t_assert_value(c, "t", "select pgjob.acquire_slot('kq', 'b') is null");
	assert_claim(c, "kq", 10, "w:key_concurrency");
	t_assert_value(c, "a={501,502,503,502} b={511,512}", HOLDERS);
	/* A new limit forgets the holders; they are counted again from the
	 * running jobs, exactly. */
	t_exec(c, "select pgjob.set_limits('kq',"
		  " '{\"per_key_concurrency\": 3}')");
	t_assert_value(c, "a=null b=null", HOLDERS);
	assert_claim(c, "kq", 10, "504 513 w:key_concurrency");
	t_assert_value(c, "a={502,503,504} b={512,513}", HOLDERS);
	/* Pruning keeps a key whose holders run and forgets one whose do
	 * not; that key is counted again at its next turn.  It takes the
	 * queue's limits row first, as claims do, and skips the queue while
	 * a claim holds it (deleting first deadlocked with claims). */
	t_exec(c, "delete from pgjob.limit_holds");
	end_jobs(c, "512, 513");
	t_exec(other, "begin");
	t_exec(other,
	       "select 1 from pgjob.limits where queue = 'kq' for update");
	t_exec(c, "select pgjob.prune_limits()");
	t_assert_value(c, "a={502,503,504} b={512,513}", HOLDERS);
	t_exec(other, "rollback");
	t_exec(c, "select pgjob.prune_limits()");
	t_assert_value(c, "a={502,503,504}", HOLDERS);
	t_exec(c, "insert into pgjob.jobs (id, queue, kind, limit_key)"
		  " overriding system value values (514, 'kq', 'k', 'b')");
	assert_claim(c, "kq", 10, "514 w:key_concurrency");
	t_assert_value(c, "a={502,503,504} b={514}", HOLDERS);
	/* The look-up goes by primary key, not through the running jobs'
	 * index: the planner's choice once, when the statement named the
	 * state and the queue, and statistics from before the jobs ran said
	 * that few did (0.3 ms a look, not 0.01).  Here 3,000 jobs of
	 * another key run since the last ANALYZE. */
	t_exec(c, "insert into pgjob.jobs (id, queue, kind, limit_key)"
		  " overriding system value select i, 'kq', 'k', 'z'"
		  " from generate_series(10001, 13000) i");
	t_exec(c, "analyze pgjob.jobs");
	t_exec(c, "update pgjob.jobs set state = 'running', locked_by = 'x',"
		  " locked_until = now() + interval '1 hour' where id > 10000");
#define IDX_SCANS(i)                                                           \
	"select idx_scan from pg_stat_user_indexes where indexrelname = '" i "'"
	t_exec(c, "select pg_stat_force_next_flush()");
	long long run0 = t_long(c, IDX_SCANS("jobs_claim_idx"));
	long long pk0 = t_long(c, IDX_SCANS("jobs_pkey"));
	t_exec(c, "select room from pgjob.limits l, pgjob.key_room(l, 'a',"
		  " clock_timestamp()) where l.queue = 'kq'");
	t_exec(c, "select pg_stat_force_next_flush()");
	assert_int_equal(t_long(c, IDX_SCANS("jobs_claim_idx")), run0);
	assert_true(t_long(c, IDX_SCANS("jobs_pkey")) > pk0);
#undef IDX_SCANS
	/* The row is written back without its ended ids once they are half
	 * of it (four ids, none running). */
	end_jobs(c, "502, 503, 504");
	assert_claim(c, "kq", 10, "505");
	end_jobs(c, "505");
	t_assert_value(c, "3",
		       "select room from pgjob.limits l, pgjob.key_room("
		       "l, 'a', clock_timestamp()) where l.queue = 'kq'");
	t_assert_value(c, "a={} b={514}", HOLDERS);
	PQfinish(other);
	PQfinish(c);
	free(ci);
#undef HOLDERS
}

/*
 * A per-key claim reads its keys' busy counts a chunk of keys at a time, in
 * one statement (schema version 51), where it called pgjob.key_room() for
 * each key it visited.  Counts exact across a claim's two rounds (what it
 * took this round is counted at the next), across chunks (a claim of two
 * reads 3 keys, then 6, 12, ...), and a key with no row yet is counted by
 * key_room() as before.
 */
static void
test_key_rooms_by_chunk(void **state)
{
	char *ci = t_db_migrated("t_flow_chunks");
	PGconn *c = t_connect(ci);
	t_exec(c, "set track_functions = 'pl'");
	t_exec(c, "insert into pgjob.queues (name) values ('kc')");
	t_exec(c, "select pgjob.set_limits('kc',"
		  " '{\"per_key_concurrency\": 2}')");
	/* 40 keys of 4 jobs: key i's are 1000 + 10 i + 1..4. */
	t_exec(c,
	       "insert into pgjob.jobs (id, queue, kind, limit_key)"
	       " overriding system value select 1000 + 10 * i + n, 'kc', 'k',"
	       " 'k' || lpad(i::text, 2, '0') from generate_series(0, 39) i,"
	       " generate_series(1, 4) n");
	/* How many jobs a claim of want took. */
#define CLAIMED(want)                                                          \
	"select count(*) filter (where c_t = 'c') from"                        \
	" pgjob.claim_limited('kc', " #want ", '{k}', 'parallel', 'me',"       \
	" 60000, 1000)"
	/* Keys running, the most of one key, jobs running. */
#define RUNNING                                                                \
	"select count(*) || ' ' || max(n) || ' ' || sum(n) from (select"       \
	" count(*) as n from pgjob.jobs where queue = 'kc'"                    \
	" and state = 'running' group by limit_key) x"
#define ROOM_CALLS                                                             \
	"select coalesce(sum(calls), 0) from pg_stat_user_functions"           \
	" where schemaname = 'pgjob' and funcname = 'key_room'"
	/* No key has a row: each is counted by key_room() (which writes
	 * it); the second round reads them by chunk and takes nothing. */
	t_assert_value(c, "80", CLAIMED(200));
	t_assert_value(c, "40 2 80", RUNNING);
	t_exec(c, "select pg_stat_force_next_flush()");
	long long calls0 = t_long(c, ROOM_CALLS);
	assert_int_equal(calls0, 40);
	/* One job of each even key ends: 20 take one each, and the next
	 * round, which sees the counts as this claim left them, none. */
	end_jobs(c,
		 "select min(id) from pgjob.jobs where queue = 'kc'"
		 " and state = 'running' and substr(limit_key, 2)::int % 2 = 0"
		 " group by limit_key");
	t_assert_value(c, "20", CLAIMED(200));
	t_assert_value(c, "40 2 80", RUNNING);
	/* Claims of two: chunks of 3, 6, 12, ... keys, the busy ones
	 * passed, until the key with room; nothing more after it. */
	end_jobs(c, "select id from pgjob.jobs where queue = 'kc'"
		    " and state = 'running' and limit_key = 'k31'");
	int took = 0;
	for (int i = 0; i < 6; i++)
		took += (int)t_long(c, CLAIMED(2));
	assert_int_equal(took, 2);
	t_assert_value(c, "40 2 80", RUNNING);
	t_assert_value(c, "running running",
		       "select string_agg(state, ' ' order by id) from"
		       " pgjob.jobs where id in (1313, 1314)");
	t_exec(c, "select pg_stat_force_next_flush()");
	assert_int_equal(t_long(c, ROOM_CALLS), calls0);
	/* A key with no row, among the keys of a chunk: key_room(). */
	t_exec(c, "insert into pgjob.jobs (id, queue, kind, limit_key)"
		  " overriding system value values (2001, 'kc', 'k', 'k15x'),"
		  " (2002, 'kc', 'k', 'k15x'), (2003, 'kc', 'k', 'k15x')");
	t_assert_value(c, "2", CLAIMED(200));
	t_assert_value(c, "41 2 82", RUNNING);
	t_assert_value(c, "running running available",
		       "select string_agg(state, ' ' order by id) from"
		       " pgjob.jobs where limit_key = 'k15x'");
	t_exec(c, "select pg_stat_force_next_flush()");
	assert_int_equal(t_long(c, ROOM_CALLS), calls0 + 1);
#undef CLAIMED
#undef RUNNING
#undef ROOM_CALLS
	PQfinish(c);
	free(ci);
}

/*
 * A global_concurrency near binding counts its queue's running jobs from
 * the ids its claims let start (pgjob.limits.holders, schema version 27;
 * far from binding it keeps a bound instead, schema 28, below).  The
 * array, which every claim rewrites, must not grow: it is looked up, and
 * its ended ids dropped, once it holds twice the running jobs the last
 * look-up found plus 64.  And near the limit the count is exact.
 */
static void
test_global_holders_sql(void **state)
{
	char *ci = t_db_migrated("t_flow_gholders");
	PGconn *c = t_connect(ci);
	t_exec(c, "insert into pgjob.queues (name) values ('gq')");
	/* 1,000 less the 100 running and a claim is within 1,024 of the
	 * limit: holders, not the bound. */
	t_exec(c, "select pgjob.set_limits('gq',"
		  " '{\"global_concurrency\": 1000}')");
	t_exec(c, "insert into pgjob.jobs (queue, kind)"
		  " select 'gq', 'k' from generate_series(1, 4000)");
	/* 100 jobs stay running throughout; then claims of 20, each ended
	 * before the next. */
	char *keep = claim(c, "gq", 100);
	free(keep);
	long long most = 0;
	for (int i = 0; i < 150; i++) {
		char *got = claim(c, "gq", 20);
		assert_non_null(strchr(got, ' '));
		free(got);
		long long n = t_long(c, "select cardinality(holders) from"
					" pgjob.limits where queue = 'gq'");
		if (n > most)
			most = n;
		t_exec(c, "update pgjob.jobs set state = 'done', finished_at ="
			  " now() where queue = 'gq' and state = 'running'"
			  " and id > (select min(id) + 99 from pgjob.jobs"
			  " where queue = 'gq')");
	}
	t_assert_value(c, "t",
		       "select running_ub is null from pgjob.limits"
		       " where queue = 'gq'");
	/* 100 running at each look-up: 2 * 100 + 64, and a claim's 20. */
	if (most > 2 * 100 + 64 + 20)
		fail_msg("the holders grew to %lld ids", most);
	assert_true(most >= 100 + 20);
	/* Near the limit, exact: 100 running, a limit of 130, a claim of 50
	 * takes 30. */
	t_exec(c, "update pgjob.jobs set state = 'done', finished_at = now()"
		  " where queue = 'gq' and state = 'running'"
		  " and id > (select min(id) + 99 from pgjob.jobs"
		  " where queue = 'gq')");
	t_exec(c, "update pgjob.limits set global_concurrency = 130"
		  " where queue = 'gq'");
	t_assert_value(
		c, "30 w:concurrency",
		"select count(*) filter (where c_t = 'c') || ' ' ||"
		" string_agg('w:' || c_kind, '') filter (where c_t = 'w')"
		" from"
		" pgjob.claim_limited('gq', 50, '{k}', 'parallel', 'me',"
		" 60000, 1000)");
	t_assert_value(c, "130",
		       "select count(*) from pgjob.jobs where queue = 'gq'"
		       " and state = 'running'");
	PQfinish(c);
	free(ci);
}

#define BOUND                                                                  \
	"select coalesce(running_ub::text, 'null') || ' ' ||"                  \
	" (case when holders is null then 't' else 'f' end)"                   \
	" from pgjob.limits where queue = 'bq'"

/*
 * A global_concurrency far from binding (schema version 28): the queue
 * keeps an upper bound of its running jobs, and a claim neither locks the
 * limits row nor keeps ids: it adds what it took to the bound at its end.
 * Near the limit a claim in turn counts the running jobs again; close to
 * it, the queue keeps holders.  A slot acquired counts in the bound.
 */
/*
 * A claim in turn (a binding limit) locks its queue's row in its own
 * transaction, after waiting for its turn on an advisory lock in a
 * subtransaction: no MultiXact.  Until version 50 the row was locked in
 * the subtransaction and updated by its parent, and each claim in turn
 * created a MultiXact (~50 us, and MultiXact ids used up at the rate of
 * the claims, which anti-wraparound vacuums then have to freeze).  Read
 * from the row's versions (pageinspect: xmax a MultiXact, 0x1000), not
 * from the server's counter, which other tests' sessions move.
 */
static void
test_claims_use_no_multixacts(void **state)
{
	char *ci = t_db_migrated("t_flow_mxact");
	PGconn *c = t_connect(ci);
	t_exec(c, "create extension if not exists pageinspect");
	t_exec(c, "insert into pgjob.queues (name) values ('mq')");
	t_exec(c, "select pgjob.set_limits('mq',"
		  " '{\"global_concurrency\": 4}')");
	t_exec(c, "insert into pgjob.jobs (queue, kind)"
		  " select 'mq', 'k' from generate_series(1, 100)");
	for (int i = 0; i < 20; i++) {
		t_assert_value(c, "4",
			       "select count(*) from pgjob.claim_limited('mq',"
			       " 4, '{k}', 'parallel', 'me', 60000, 1000)"
			       " where c_t = 'c'");
		t_exec(c, "update pgjob.jobs set state = 'done',"
			  " finished_at = now() where queue = 'mq'"
			  " and state = 'running'");
	}
	/* The row's 20 versions or so are all there: fewer than 50
	 * updates (no autovacuum), and the page far from full (no
	 * pruning). */
	assert_true(t_long(c, "select count(*) from generate_series(0,"
			      " pg_relation_size('pgjob.limits') / 8192 - 1) p,"
			      " heap_page_items(get_raw_page('pgjob.limits',"
			      " p::int))") >= 20);
	t_assert_value(c, "0",
		       "select count(*) from generate_series(0,"
		       " pg_relation_size('pgjob.limits') / 8192 - 1) p,"
		       " heap_page_items(get_raw_page('pgjob.limits', p::int))"
		       " where t_infomask & 4096 <> 0");
	/* Far from binding: unlocked claims, which wrote their jobs in a
	 * subtransaction until version 50 (the jobs' rows, locked by the
	 * transaction's candidate scan, got a MultiXact each claim). */
	t_exec(c, "select pgjob.set_limits('mq',"
		  " '{\"global_concurrency\": 100000}')");
	for (int i = 0; i < 5; i++) /* the 20 jobs left */
		t_assert_value(c, "4",
			       "select count(*) from pgjob.claim_limited('mq',"
			       " 4, '{k}', 'parallel', 'me', 60000, 1000)"
			       " where c_t = 'c'");
	t_assert_value(c, "20",
		       "select running_ub from pgjob.limits"
		       " where queue = 'mq'");
	t_assert_value(c, "0",
		       "select count(*) from generate_series(0,"
		       " pg_relation_size('pgjob.jobs') / 8192 - 1) p,"
		       " heap_page_items(get_raw_page('pgjob.jobs', p::int))"
		       " where t_infomask & 4096 <> 0");
	PQfinish(c);
	free(ci);
}

static void
test_global_bound_sql(void **state)
{
	char *ci = t_db_migrated("t_flow_gbound");
	PGconn *c = t_connect(ci);
	PGconn *other = t_connect(ci);
	t_exec(c, "insert into pgjob.queues (name) values ('bq')");
	t_exec(c, "select pgjob.set_limits('bq',"
		  " '{\"global_concurrency\": 100000}')");
	t_exec(c, "insert into pgjob.jobs (queue, kind)"
		  " select 'bq', 'k' from generate_series(1, 4000)");
	/* The first claim counts (in turn): none running, far from 100,000
	 * by more than 1,024 and a quarter of 4,000 unfinished jobs. */
	free(claim(c, "bq", 100));
	t_assert_value(c, "100 t", BOUND);
	/* Unlocked now: a share lock on the row's key would hold a claim in
	 * turn (it returns w:busy after its 20 ms), not these. */
	t_exec(other, "begin");
	t_exec(other, "select 1 from pgjob.limits where queue = 'bq'"
		      " for key share");
	for (int i = 0; i < 10; i++) {
		char *got = claim(c, "bq", 20);
		if (strstr(got, "w:") || !strchr(got, ' '))
			fail_msg("an unlocked claim got \"%s\"", got);
		free(got);
		t_exec(c, "update pgjob.jobs set state = 'done',"
			  " finished_at = now() where queue = 'bq'"
			  " and state = 'running' and id > 100");
	}
	/* Ended jobs stay in the bound: 100 + 10 * 20. */
	t_assert_value(c, "300 t", BOUND);
	t_exec(other, "rollback");
	/* A bound that leaves no room: the claim counts again, in turn, and
	 * the bound starts from the 100 still running. */
	t_exec(c, "update pgjob.limits set running_ub = 99990"
		  " where queue = 'bq'");
	free(claim(c, "bq", 20));
	t_assert_value(c, "120 t", BOUND);
	t_assert_value(c, "120",
		       "select count(*) from pgjob.jobs"
		       " where queue = 'bq' and state = 'running'");
	/* A slot acquired is in the bound at once. */
	t_exec(c, "select pgjob.acquire_slot('bq', null, '1 minute')");
	t_assert_value(c, "121 t", BOUND);
	/* Near the limit: counted, then holders, exact.  120 running and a
	 * slot, a limit of 150, a claim of 50 takes 29. */
	t_exec(c, "update pgjob.limits set global_concurrency = 150,"
		  " running_ub = 140 where queue = 'bq'");
	t_assert_value(
		c, "29 w:concurrency",
		"select count(*) filter (where c_t = 'c') || ' ' ||"
		" string_agg('w:' || c_kind, '') filter (where c_t = 'w')"
		" from pgjob.claim_limited('bq', 50, '{k}', 'parallel',"
		" 'me', 60000, 1000)");
	t_assert_value(c, "null f", BOUND);
	t_assert_value(c, "149",
		       "select count(*) from pgjob.jobs"
		       " where queue = 'bq' and state = 'running'");
	/* Limits set again: counted again, far from binding, the bound. */
	t_exec(c, "select pgjob.set_limits('bq',"
		  " '{\"global_concurrency\": 100000}')");
	t_assert_value(c, "null t", BOUND);
	free(claim(c, "bq", 1));
	/* 149 jobs and 1: the slot is counted apart again (pgjob.limit_holds),
	 * as it is at every claim. */
	t_assert_value(c, "150 t", BOUND);

	/* A pause that comes while an unlocked claim runs undoes it: the
	 * claim waits at its end for the row, sees the pause, takes
	 * nothing and asks to be sent again (w:busy). */
	t_exec(other, "begin");
	t_exec(other, "update pgjob.limits set paused = true"
		      " where queue = 'bq'");
	assert_int_equal(
		PQsendQuery(c, "select coalesce(string_agg(case c_t when 'c'"
			       " then c_id::text else 'w:' || c_kind end, ' '),"
			       " '') from pgjob.claim_limited('bq', 20, '{k}',"
			       " 'parallel', 'me', 60000, 1000)"),
		1);
	t_wait_lock_wait(other, PQbackendPID(c), 20);
	t_exec(other, "commit");
	PGresult *r = PQgetResult(c);
	assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
	assert_string_equal(PQgetvalue(r, 0, 0), "w:busy");
	PQclear(r);
	assert_null(PQgetResult(c));
	t_assert_value(c, "150",
		       "select count(*) from pgjob.jobs"
		       " where queue = 'bq' and state = 'running'");
	/* Paused: in turn, nothing. */
	assert_claim(c, "bq", 20, "w:paused");

#define BY_MODE                                                                \
	"select coalesce(string_agg(case c_t when 'c' then c_id::text"         \
	" else 'w:' || c_kind end, ' ' order by c_t, c_id), '') from"          \
	" pgjob.claim_limited('%s', 5, '{k}', '%s', 'me', 60000, 1000)"
	/* The serial and per_key queues' unlocked claims: the head alone,
	 * and each key's oldest job (9014 waits for 9013). */
	t_exec(c, "insert into pgjob.queues (name) values ('sq'), ('kq')");
	t_exec(c, "select pgjob.set_limits(q, '{\"global_concurrency\":"
		  " 100000}') from unnest(array['sq', 'kq']) q");
	t_exec(c, "insert into pgjob.jobs (id, queue, kind, ordering_key)"
		  " overriding system value values (9001, 'sq', 'k', null),"
		  " (9002, 'sq', 'k', null), (9003, 'sq', 'k', null),"
		  " (9011, 'kq', 'k', 'a'), (9012, 'kq', 'k', 'a'),"
		  " (9013, 'kq', 'k', 'b'), (9014, 'kq', 'k', 'b'),"
		  " (9015, 'kq', 'k', null)");
	t_assert_value(c, "9001", BY_MODE, "sq", "serial"); /* in turn */
	t_assert_value(c, "1 t",
		       "select running_ub || ' ' || (case when"
		       " holders is null then 't' end) from"
		       " pgjob.limits where queue = 'sq'");
	t_assert_value(c, "", BY_MODE, "sq", "serial"); /* unlocked */
	end_jobs(c, "9001");
	t_assert_value(c, "9002", BY_MODE, "sq", "serial");
	t_assert_value(c, "9011 9013 9015", BY_MODE, "kq",
		       "per_key"); /* in turn */
	end_jobs(c, "9011");
	t_assert_value(c, "9012", BY_MODE, "kq", "per_key");
	t_assert_value(c, "4 t",
		       "select running_ub || ' ' || (case when"
		       " holders is null then 't' end) from"
		       " pgjob.limits where queue = 'kq'");
	PQfinish(other);
	PQfinish(c);
	free(ci);
}

/*
 * A rate whose bucket holds what a claim asks is kept without a turn too
 * (schema version 28): the claim takes its cost from the bucket as the
 * row stands at its end.  Costs that pass the bucket cut the claim short
 * (w:rate), as in turn; an empty bucket sends the claim to its turn.
 */
static void
test_rate_unlocked_sql(void **state)
{
	char *ci = t_db_migrated("t_flow_rate_unlocked");
	PGconn *c = t_connect(ci);
	PGconn *other = t_connect(ci);
	t_exec(c, "insert into pgjob.queues (name) values ('rq')");
	t_exec(c, "select pgjob.set_limits('rq', '{\"rate\": \"100/h\"}')");
	t_exec(c, "insert into pgjob.jobs (id, queue, kind, cost)"
		  " overriding system value select i, 'rq', 'k', 10"
		  " from generate_series(1, 30) i");
	t_exec(other, "begin");
	t_exec(other, "select 1 from pgjob.limits where queue = 'rq'"
		      " for key share");
	/* A full bucket of 100 and 20 asked: unlocked; ten jobs of cost 10
	 * fit. */
	assert_claim(c, "rq", 20, "1 2 3 4 5 6 7 8 9 10 w:rate");
	t_assert_value(c, "0",
		       "select floor(tokens) from pgjob.limits"
		       " where queue = 'rq'");
	/* Empty: the claim's turn, which the share lock holds. */
	assert_claim(c, "rq", 20, "w:busy");
	t_exec(other, "rollback");
	assert_claim(c, "rq", 20, "w:rate");
	t_assert_value(c, "10",
		       "select count(*) from pgjob.jobs"
		       " where queue = 'rq' and state = 'running'");
	PQfinish(other);
	PQfinish(c);
	free(ci);
}

/*
 * Connections c[0..n-1] claim 50 at a time of queue q at once, nothing
 * ends, until three rounds take nothing and none is sent again; never more
 * than most run.  The leases are an hour long: a lease that expired
 * while a loaded machine ran the rounds (a minute's lease did, in 590
 * rounds) frees its place, rightly, and the count of running rows would
 * then pass the limit.  Returns the claims sent again (w:busy); *seen_bound
 * says whether q's row kept a bound after some round.
 */
static int
claim_together(PGconn **c, int n, const char *q, long long most,
	       int *seen_bound)
{
	int quiet = 0, rounds = 0, busy = 0;
	while (quiet < 3 && rounds < 1000) {
		rounds++;
		for (int i = 0; i < n; i++)
			assert_int_equal(
				PQsendQueryParams(
					c[i],
					"select count(*) filter (where c_t"
					" = 'c'), count(*) filter (where"
					" c_kind = 'busy') from"
					" pgjob.claim_limited($1, 50, '{k}',"
					" 'parallel', 'me', 3600000, 1000)",
					1, NULL, &q, NULL, NULL, 0),
				1);
		long took = 0;
		int again = busy;
		for (int i = 0; i < n; i++) {
			PGresult *r;
			while ((r = PQgetResult(c[i])) != NULL) {
				/* The function's 20 ms lock_timeout is
				 * delivered by the backend's SIGINT to
				 * itself (PostgreSQL's postinit.c), and on
				 * a loaded machine it can end the
				 * statement as "canceling statement due to
				 * user request" (57014): a claim that took
				 * nothing, rolled back, which the worker
				 * logs and sends again (worker/conn.c), as
				 * here. */
				if (PQresultStatus(r) == PGRES_FATAL_ERROR &&
				    sqlstate_is(PQresultErrorField(
							r, PG_DIAG_SQLSTATE),
						SQLSTATE_QUERY_CANCELED)) {
					busy++;
					PQclear(r);
					continue;
				}
				if (PQresultStatus(r) != PGRES_TUPLES_OK)
					fail_msg("claim_limited: %s",
						 PQresultErrorMessage(r));
				took += atol(PQgetvalue(r, 0, 0));
				busy += atoi(PQgetvalue(r, 0, 1));
				PQclear(r);
			}
		}
		quiet = took || busy > again ? 0 : quiet + 1;
		long long running =
			t_long(c[0],
			       "select count(*) from pgjob.jobs"
			       " where queue = '%s' and state = 'running'",
			       q);
		if (running > most)
			fail_msg("%lld of %s running, more than %lld, round %d",
				 running, q, most, rounds);
		if (seen_bound && t_long(c[0],
					 "select count(*) from"
					 " pgjob.limits where queue = '%s'"
					 " and running_ub is not null",
					 q))
			*seen_bound = 1;
	}
	print_message("[ INFO     ] %s: %d rounds, %d claims sent again\n", q,
		      rounds, busy);
	return busy;
}

/*
 * Four connections claim 50 at a time at once, nothing ends: through the
 * bound, the count near the limit and the holders, never more than the
 * limit run, and the limit is reached.  Likewise a bucket of 3,000 tokens
 * (3000/h: about one more token a second) claimed without turns: never
 * more than it holds.
 */
static void
test_global_bound_concurrent(void **state)
{
	enum { N = 4 };
	char *ci = t_db_migrated("t_flow_gbound_c");
	PGconn *c[N];
	for (int i = 0; i < N; i++)
		c[i] = t_connect(ci);
	t_exec(c[0], "insert into pgjob.queues (name) values ('cq'), ('cr')");
	t_exec(c[0], "select pgjob.set_limits('cq',"
		     " '{\"global_concurrency\": 5000}')");
	t_exec(c[0], "select pgjob.set_limits('cr', '{\"rate\": \"3000/h\"}')");
	t_exec(c[0], "insert into pgjob.jobs (queue, kind) select q, 'k'"
		     " from unnest(array['cq', 'cr']) q,"
		     " generate_series(1, 12000)");
	int seen_bound = 0;
	claim_together(c, N, "cq", 5000, &seen_bound);
	t_assert_value(c[0], "5000",
		       "select count(*) from pgjob.jobs"
		       " where queue = 'cq' and state = 'running'");
	/* The bound was kept on the way (the first count found none
	 * running, 5,000 from the limit). */
	assert_true(seen_bound);
	long long t0 = t_long(c[0], "select extract(epoch from now())::int");
	claim_together(c, N, "cr", 3000 + 60, NULL);
	long long took = t_long(c[0], "select count(*) from pgjob.jobs"
				      " where queue = 'cr'"
				      " and state = 'running'");
	long long secs =
		t_long(c[0], "select extract(epoch from now())::int") - t0 + 1;
	if (took < 3000 || took > 3000 + secs + 1)
		fail_msg("%lld claimed from a bucket of 3,000 in %lld s", took,
			 secs);
	for (int i = 0; i < N; i++)
		PQfinish(c[i]);
	free(ci);
}
#undef BOUND

/*
 * The key-by-key claim's scan of one key's jobs keeps one generic plan
 * (schema version 25: planned at every turn before): jobs_limit_key_idx
 * in its order, the key its index condition, no sort, whatever the key
 * and whatever an ANALYZE counted.  auto_explain prints the nested
 * statement's plan as a notice.
 */
static void
test_key_candidates_plan(void **state)
{
	char *ci = t_db_migrated("t_flow_kc");
	PGconn *c = t_connect(ci);
	t_exec(c, "insert into pgjob.jobs (queue, kind, limit_key)"
		  " select 'kc', 'k', 'k' || (i %% 30)"
		  " from generate_series(1, 30000) i");
	/* Statistics that mislead: counted while one key held every job. */
	t_exec(c, "update pgjob.jobs set limit_key = 'k0'");
	t_exec(c, "analyze pgjob.jobs");
	t_exec(c, "update pgjob.jobs set limit_key = 'k' || (id %% 30)");
	char *notices = NULL;
	t_explain_nested(c, &notices);
	for (int i = 0; i < 8; i++) {
		free(notices);
		notices = NULL;
		t_assert_value(c, "10",
			       "select cardinality(pgjob.key_candidates('kc',"
			       " 'k%d', '{k}', '{}', now(), 10, 'per_key'))",
			       i + 1);
	}
	t_explain_stop(c);
	assert_non_null(notices);
	/* Generic: the parameters stay $n in its conditions. */
	if (!strstr(notices, "Index Scan using jobs_limit_key_idx") ||
	    !strstr(notices, "(queue = $1) AND (COALESCE(limit_key, "
			     "ordering_key) = $2)") ||
	    strstr(notices, "Sort") || strstr(notices, "Seq Scan on jobs"))
		fail_msg("the key's scan: %s", notices);
	free(notices);
	PQfinish(c);
	free(ci);
}

/*
 * The per-key claim's chunk of keys (schema version 51) reads
 * pgjob.limit_keys by its primary key, and writes the holders back by it,
 * beside 20,000 keys of another queue: a scan of the table would read them
 * all at every chunk.  (A session's generic plans are made again when
 * ANALYZE has new figures: a plan made while the table was small is kept
 * until autovacuum's next ANALYZE of it.)
 */
static void
test_key_room_chunk_plan(void **state)
{
	char *ci = t_db_migrated("t_flow_chunk_plan");
	PGconn *c = t_connect(ci);
	t_exec(c, "insert into pgjob.queues (name) values ('kp')");
	t_exec(c, "select pgjob.set_limits('kp',"
		  " '{\"per_key_concurrency\": 1}')");
	t_exec(c, "insert into pgjob.limit_keys (queue, key, holders)"
		  " select 'other', 'k' || i, '{}' from"
		  " generate_series(1, 20000) i");
	/* 10 keys of 3 jobs; each key's row known, and stale (five ended
	 * ids, none running: written back at the next count). */
	t_exec(c, "insert into pgjob.jobs (id, queue, kind, limit_key)"
		  " overriding system value select 100 * i + n, 'kp', 'k',"
		  " 'k' || i from generate_series(1, 10) i,"
		  " generate_series(1, 3) n");
	t_exec(c, "insert into pgjob.limit_keys (queue, key, holders)"
		  " select 'kp', 'k' || i, '{1,2,3,4,5}' from"
		  " generate_series(1, 10) i");
	t_exec(c, "analyze pgjob.limit_keys");
	char *notices = NULL;
	t_explain_nested(c, &notices);
	t_assert_value(c, "10",
		       "select count(*) filter (where c_t = 'c') from"
		       " pgjob.claim_limited('kp', 100, '{k}', 'parallel',"
		       " 'me', 60000, 1000)");
	t_explain_stop(c);
	assert_non_null(notices);
	if (!strstr(notices,
		    "Index Scan using limit_keys_pkey on limit_keys") ||
	    !strstr(notices, "Conflict Arbiter Indexes: limit_keys_pkey") ||
	    strstr(notices, "Seq Scan on limit_keys"))
		fail_msg("the chunk's plans: %s", notices);
	free(notices);
	/* Written back: the ended ids gone, the claimed one added. */
	t_assert_value(
		c, "10",
		"select count(*) from pgjob.limit_keys where queue = 'kp'"
		" and cardinality(holders) = 1");
	PQfinish(c);
	free(ci);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_global_concurrency),
		cmocka_unit_test(test_rate),
		cmocka_unit_test(test_per_key_concurrency),
		cmocka_unit_test(test_fairness),
		cmocka_unit_test(test_pause_resume),
		cmocka_unit_test(test_runtime_limits),
		cmocka_unit_test(test_application_budget),
		cmocka_unit_test(test_adaptive_throttle),
		cmocka_unit_test(test_claim_limited_sql),
		cmocka_unit_test(test_key_holders_sql),
		cmocka_unit_test(test_key_rooms_by_chunk),
		cmocka_unit_test(test_global_holders_sql),
		cmocka_unit_test(test_global_bound_sql),
		cmocka_unit_test(test_global_bound_concurrent),
		cmocka_unit_test(test_claims_use_no_multixacts),
		cmocka_unit_test(test_rate_unlocked_sql),
		cmocka_unit_test(test_key_candidates_plan),
		cmocka_unit_test(test_key_room_chunk_plan),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
