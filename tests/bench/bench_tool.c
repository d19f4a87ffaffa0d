/*
 * pgjobd_bench_tool: the measuring half of tests/bench/suite.sh, on one
 * connection so that watching a run costs the server little.
 *
 *   pgjobd_bench_tool wait CONNINFO TIMEOUT_S
 *	Polls every 20 ms until no job is available or running.  Prints
 *	"first_us=<first poll that saw a job running (or none left)>
 *	end_us=<first poll that saw none left> max_dead=<largest n_dead_tup
 *	of pgjob.jobs seen> polls=<n>", times in CLOCK_REALTIME µs.  Exit 1
 *	on timeout.  With $PGJOBD_BENCH_DEAD_TRACE naming a file, appends
 *	"<µs> <n_dead_tup>" to it at every poll: the dead tuples over the
 *	run.  With $PGJOBD_BENCH_READY naming a file, creates it after the
 *	first poll: the caller starts the daemons once the watch has begun,
 *	so that a drain quicker than the watcher's start (5,000 jobs take
 *	70 ms) is not taken for one that was over at the first poll.
 *
 *   pgjobd_bench_tool latency CONNINFO COUNT INTERVAL_MS
 *	Enqueues COUNT single 'noop' jobs with payload {"seq": i}, one
 *	transaction each, INTERVAL_MS apart, and prints "E <seq> <µs>" as
 *	each commit is acknowledged: the bench plugin's "S <seq> <µs>"
 *	handler-start stamps are joined with these.
 *
 *   pgjobd_bench_tool loadlat CONNINFO RATE SECONDS INTERVAL_MS
 *	Latency under load.  A feeder process, on its own connection,
 *	inserts RATE jobs/s into the queue 'default' for SECONDS: one
 *	INSERT ... SELECT generate_series of RATE/100 rows every 10 ms, on
 *	absolute CLOCK_MONOTONIC deadlines so that a slow tick is caught up
 *	rather than lost.  Meanwhile, from 1 s in to 0.5 s before the end,
 *	single 'noop' jobs with payload {"seq": i} go to the idle queue
 *	'fast', INTERVAL_MS apart, with "E <seq> <µs>" printed as each
 *	commit is acknowledged (as in latency).  Last line: "R fed=<rows>
 *	feed_s=<s> feed_rate=<rows/s> late_ticks=<n> backlog=<jobs of
 *	'default' not yet done when the feed stopped> drain_rate=<(fed -
 *	backlog) / feed_s>".
 *
 *   pgjobd_bench_tool many CONNINFO CLIENTS SIZE KEYS SECONDS
 *	Bulk enqueue as an application does it: CLIENTS processes, each on
 *	its own connection, call pgjob.enqueue_many($1) for SECONDS with a
 *	JSON array of SIZE jobs {"kind": "bench", "payload": {"n": i}},
 *	built anew for each call and sent as a parameter; with KEYS 1 each
 *	job has a unique_key of its own ("<pid>-<call>-<i>", new on every
 *	call, so none meets a held key).  Prints "jobs=<n> secs=<s>
 *	rate=<jobs/s>".  (pgbench substitutes a variable by moving the rest
 *	of the script's text, once per occurrence: a key per job made its
 *	own CPU the measure of an array of 10,000.)
 */
#include <libpq-fe.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long
now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void
sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static PGconn *
connect_or_die(const char *conninfo)
{
	PGconn *c = PQconnectdb(conninfo);
	if (PQstatus(c) != CONNECTION_OK) {
		fprintf(stderr, "bench_tool: %s", PQerrorMessage(c));
		exit(2);
	}
	return c;
}

static int
wait_empty(PGconn *c, double timeout_s)
{
	/* Index probes, not counts: a count of 200,000 queued jobs would
	 * cost the server more than the jobs it watches.  Each probe reads
	 * a partial index in its order (jobs_claim_idx, jobs_running_idx):
	 * written as a bare EXISTS, the planner would scan the heap from
	 * its start, through every finished row.  Each reads from the
	 * index's right edge, the newest lease and the last job a claim
	 * will take: from the left, a probe passed the entries of every job
	 * claimed or ended since the last vacuum (7-44 ms and 1,100-7,000
	 * buffers a poll in a drain of 600,000 jobs, 50 polls a second: a
	 * fifth of a core or more, taken from what it measured).  Once a
	 * job ran, only "any left?" is asked, available jobs first: no job
	 * may be running for a moment between two batches, and the probe
	 * of running jobs then reads its whole index. */
#define PROBE_R                                                                \
	"with r as (select 1 from pgjob.jobs where finished_at is null"        \
	"   and coalesce(parents_left, 0) = 0 and state = 'running'"           \
	"   order by queue, priority, run_at, id limit 1),"                    \
	" u as (select 1 from pgjob.jobs where finished_at is null"            \
	"   and coalesce(parents_left, 0) = 0"                                 \
	"   order by queue desc, priority desc, run_at desc, id desc limit "   \
	"1),"                                                                  \
	" a as (select 1 from pgjob.jobs where finished_at is null"            \
	"   and coalesce(parents_left, 0) = 0 and state = 'available'"         \
	"   order by queue desc, priority desc, run_at desc, id desc"          \
	"   limit 1)"
#define PROBE_DEAD                                                             \
	" coalesce((select n_dead_tup from pg_stat_user_tables"                \
	"   where relid = 'pgjob.jobs'::regclass), 0)"
#define HAS_R " exists (select 1 from r)"
#define HAS_A " exists (select 1 from a)"
	static const char sql_start[] =
		PROBE_R " select" HAS_R "," HAS_R " or" HAS_A "," PROBE_DEAD;
	static const char sql_after[] =
		PROBE_R " select true," HAS_A
			" or exists (select 1 from u)," PROBE_DEAD;
	long long start = now_us(), first = 0, dead = 0, polls = 0;
	/* The last poll that saw jobs waiting.  A short drain can fall
	 * wholly between two polls (5,000 jobs ran in less than a poll's
	 * 20 ms and its probes, with the HOT claim): then it began after
	 * that poll, and that poll is its start, which makes the rate a
	 * lower bound instead of a division by nothing (a bench.short run
	 * printed 5,000,000 jobs/s, and the fresh database's feed, 0.8 of
	 * it, queued minutes of inserts). */
	long long waiting = 0;
	const char *trace_path = getenv("PGJOBD_BENCH_DEAD_TRACE");
	FILE *trace = trace_path && *trace_path ? fopen(trace_path, "a") : NULL;
	const char *ready = getenv("PGJOBD_BENCH_READY");
	for (;;) {
		PGresult *r = PQexec(c, first ? sql_after : sql_start);
		if (PQresultStatus(r) != PGRES_TUPLES_OK) {
			fprintf(stderr, "bench_tool: %s", PQerrorMessage(c));
			return 2;
		}
		long long t = now_us();
		polls++;
		int started = *PQgetvalue(r, 0, 0) == 't';
		int left = *PQgetvalue(r, 0, 1) == 't';
		long long d = atoll(PQgetvalue(r, 0, 2));
		PQclear(r);
		if (d > dead)
			dead = d;
		if (trace)
			fprintf(trace, "%lld %lld\n", t, d);
		if (polls == 1 && ready && *ready) {
			FILE *f = fopen(ready, "w");
			if (f)
				fclose(f);
		}
		if (!first && started)
			first = t;
		if (!first && !left)
			first = waiting ? waiting : t;
		if (left)
			waiting = t;
		if (!left) {
			printf("first_us=%lld end_us=%lld max_dead=%lld "
			       "polls=%lld\n",
			       first, t, dead, polls);
			if (trace)
				fclose(trace);
			return 0;
		}
		if (t - start > (long long)(timeout_s * 1e6)) {
			fprintf(stderr, "bench_tool: jobs left after %.0f s\n",
				timeout_s);
			return 1;
		}
		sleep_ms(20);
	}
}

/* Enqueues job seq into queue, one transaction, and prints "E <seq> <us>"
 * as its commit is acknowledged.  Returns 0 or 2. */
static int
enqueue_seq(PGconn *c, int seq, const char *queue)
{
	char s[16];
	snprintf(s, sizeof(s), "%d", seq);
	const char *p[] = {s, queue};
	PGresult *r = PQexecParams(c,
				   "select pgjob.enqueue('noop',"
				   " jsonb_build_object('seq', $1::int),"
				   " queue => $2)",
				   2, NULL, p, NULL, NULL, 0);
	long long t = now_us();
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		fprintf(stderr, "bench_tool: %s", PQerrorMessage(c));
		PQclear(r);
		return 2;
	}
	PQclear(r);
	printf("E %d %lld\n", seq, t);
	fflush(stdout);
	return 0;
}

static int
latency(PGconn *c, int count, int interval_ms)
{
	for (int i = 0; i < count; i++) {
		if (enqueue_seq(c, i, "default"))
			return 2;
		sleep_ms(interval_ms);
	}
	return 0;
}

/* The feeder's tick: RATE/100 rows every 10 ms. */
#define TICK_NS 10000000L

static void
add_ns(struct timespec *t, long ns)
{
	t->tv_nsec += ns;
	while (t->tv_nsec >= 1000000000L) {
		t->tv_nsec -= 1000000000L;
		t->tv_sec++;
	}
}

static double
mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The feeder, in its own process: writes "<rows> <seconds> <late ticks>"
 * to fd once the feed is over.  A tick is late when its insert starts a
 * whole tick after its deadline: the inserts themselves could not keep
 * the pace. */
static int
feed(const char *conninfo, int rate, double seconds, int fd)
{
	PGconn *c = connect_or_die(conninfo);
	PGresult *r = PQprepare(c, "feed",
				"insert into pgjob.jobs (kind, payload)"
				" select 'noop', jsonb_build_object('id', i)"
				" from generate_series(1, $1::int) i",
				1, NULL);
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		fprintf(stderr, "bench_tool: %s", PQerrorMessage(c));
		return 2;
	}
	PQclear(r);
	char per_tick[16];
	snprintf(per_tick, sizeof(per_tick), "%d", rate / 100);
	const char *p[] = {per_tick};
	long ticks = (long)(seconds * 100), fed = 0, late = 0;
	struct timespec next;
	clock_gettime(CLOCK_MONOTONIC, &next);
	double start = mono_s();
	for (long i = 0; i < ticks; i++) {
		if (mono_s() - start > (i + 1) * (TICK_NS / 1e9))
			late++;
		r = PQexecPrepared(c, "feed", 1, p, NULL, NULL, 0);
		if (PQresultStatus(r) != PGRES_COMMAND_OK) {
			fprintf(stderr, "bench_tool: %s", PQerrorMessage(c));
			return 2;
		}
		fed += atol(PQcmdTuples(r));
		PQclear(r);
		add_ns(&next, TICK_NS);
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
	}
	dprintf(fd, "%ld %.3f %ld\n", fed, mono_s() - start, late);
	PQfinish(c);
	return 0;
}

/* The single jobs into 'fast', one per INTERVAL_MS while the feed is
 * steady (from 1 s in to half a second before its end), each at a random
 * point of its interval's first feed tick.  On a fixed grid every job met
 * the feed's tick at the same phase, set by when the two processes
 * started: one round measured jobs that arrived just after a tick's
 * insert (waiting behind its claim), the next jobs that arrived between
 * them, and p50s of 0.7 and 1.4 ms came from the same build.  A job of an
 * application comes at any point of the tick. */
static int
fast_jobs(PGconn *c, double start, double seconds, int interval_ms)
{
	int count = (int)((seconds - 1.5) * 1000 / interval_ms);
	unsigned long long x = 0x9e3779b97f4a7c15ULL; /* xorshift64 */
	for (int i = 0; i < count; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		double phase = (double)(x % 1000000) / 1e6 * (TICK_NS / 1e9);
		if (phase * 1e3 >= interval_ms)
			phase = 0;
		double at = start + 1 + i * interval_ms / 1e3 + phase;
		struct timespec t = {(time_t)at,
				     (long)((at - (double)(time_t)at) * 1e9)};
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL);
		if (enqueue_seq(c, i, "fast"))
			return 2;
	}
	return 0;
}

/* The jobs of 'default' not yet done, or -1; the partial indexes answer
 * without reading the finished rows. */
static long
default_backlog(PGconn *c)
{
	PGresult *r = PQexec(c, "select count(*) from pgjob.jobs"
				"  where finished_at is null"
				"   and coalesce(parents_left, 0) = 0"
				"   and queue = 'default'");
	long n = -1;
	if (PQresultStatus(r) == PGRES_TUPLES_OK)
		n = atol(PQgetvalue(r, 0, 0));
	else
		fprintf(stderr, "bench_tool: %s", PQerrorMessage(c));
	PQclear(r);
	return n;
}

static int
load_latency(const char *conninfo, int rate, double seconds, int interval_ms)
{
	int fds[2];
	if (rate < 100 || seconds < 2 || pipe(fds) != 0) {
		fprintf(stderr, "bench_tool: loadlat needs RATE >= 100 and "
				"SECONDS >= 2\n");
		return 2;
	}
	fflush(stdout);
	pid_t child = fork();
	if (child == 0) {
		close(fds[0]);
		_exit(feed(conninfo, rate, seconds, fds[1]));
	}
	close(fds[1]);
	PGconn *c = connect_or_die(conninfo);
	if (fast_jobs(c, mono_s(), seconds, interval_ms) != 0)
		kill(child, SIGTERM);
	int status;
	waitpid(child, &status, 0);
	long fed = 0, late = 0;
	double feed_s = 0;
	FILE *f = fdopen(fds[0], "r");
	int got = fscanf(f, "%ld %lf %ld", &fed, &feed_s, &late);
	fclose(f);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || got != 3) {
		fprintf(stderr, "bench_tool: the feeder failed\n");
		return 2;
	}
	/* What the workers had not finished when the feed stopped. */
	long backlog = default_backlog(c);
	PQfinish(c);
	if (backlog < 0)
		return 2;
	printf("R fed=%ld feed_s=%.3f feed_rate=%.0f late_ticks=%ld "
	       "backlog=%ld drain_rate=%.0f\n",
	       fed, feed_s, fed / feed_s, late, backlog,
	       (fed - backlog) / feed_s);
	return 0;
}

/* One client of "many": calls until the deadline, returns jobs enqueued
 * (or -1 on an error, said on stderr). */
static long long
many_client(const char *conninfo, int size, int keys, long long until_us)
{
	PGconn *c = connect_or_die(conninfo);
	size_t cap = (size_t)size * 96 + 16;
	char *buf = malloc(cap);
	long long jobs = 0;
	if (!buf)
		exit(2);
	for (long call = 0; now_us() < until_us; call++) {
		size_t n = 0;
		buf[n++] = '[';
		for (int i = 0; i < size; i++) {
			n += (size_t)snprintf(
				buf + n, cap - n,
				"%s{\"kind\":\"bench\",\"payload\":{\"n\":%d}",
				i ? "," : "", i);
			if (keys)
				n += (size_t)snprintf(
					buf + n, cap - n,
					",\"unique_key\":\"%ld-%ld-%d\"",
					(long)getpid(), call, i);
			buf[n++] = '}';
		}
		buf[n++] = ']';
		buf[n] = '\0';
		const char *params[1] = {buf};
		PGresult *r = PQexecParams(
			c, "select count(*) from pgjob.enqueue_many($1::jsonb)",
			1, NULL, params, NULL, NULL, 0);
		if (PQresultStatus(r) != PGRES_TUPLES_OK) {
			fprintf(stderr, "bench_tool: %s", PQerrorMessage(c));
			PQclear(r);
			jobs = -1;
			break;
		}
		jobs += atoll(PQgetvalue(r, 0, 0));
		PQclear(r);
	}
	free(buf);
	PQfinish(c);
	return jobs;
}

static int
many(const char *conninfo, int clients, int size, int keys, double secs)
{
	if (clients < 1 || clients > 64 || size < 1 || size > 1000000 ||
	    secs <= 0) {
		fprintf(stderr, "bench_tool: many: bad arguments\n");
		return 2;
	}
	int fds[64][2];
	pid_t pids[64];
	long long start = now_us(), until = start + (long long)(secs * 1e6);
	for (int k = 0; k < clients; k++) {
		if (pipe(fds[k]) != 0 || (pids[k] = fork()) < 0) {
			perror("bench_tool");
			return 2;
		}
		if (pids[k] == 0) {
			close(fds[k][0]);
			long long jobs =
				many_client(conninfo, size, keys, until);
			dprintf(fds[k][1], "%lld\n", jobs);
			_exit(jobs < 0 ? 1 : 0);
		}
		close(fds[k][1]);
	}
	long long total = 0;
	int bad = 0;
	for (int k = 0; k < clients; k++) {
		char line[64] = "";
		ssize_t got = read(fds[k][0], line, sizeof(line) - 1);
		close(fds[k][0]);
		int st = 0;
		waitpid(pids[k], &st, 0);
		if (got <= 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			bad = 1;
		else
			total += atoll(line);
	}
	double took = (now_us() - start) / 1e6;
	if (bad)
		return 1;
	printf("jobs=%lld secs=%.3f rate=%.0f\n", total, took, total / took);
	return 0;
}

int
main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "wait") == 0) {
		PGconn *c = connect_or_die(argv[2]);
		int rc = wait_empty(c, atof(argv[3]));
		PQfinish(c);
		return rc;
	}
	if (argc == 5 && strcmp(argv[1], "latency") == 0) {
		PGconn *c = connect_or_die(argv[2]);
		int rc = latency(c, atoi(argv[3]), atoi(argv[4]));
		PQfinish(c);
		return rc;
	}
	if (argc == 6 && strcmp(argv[1], "loadlat") == 0)
		return load_latency(argv[2], atoi(argv[3]), atof(argv[4]),
				    atoi(argv[5]));
	if (argc == 7 && strcmp(argv[1], "many") == 0)
		return many(argv[2], atoi(argv[3]), atoi(argv[4]),
			    atoi(argv[5]), atof(argv[6]));
	fprintf(stderr,
		"usage: pgjobd_bench_tool wait CONNINFO TIMEOUT_S\n"
		"       pgjobd_bench_tool latency CONNINFO COUNT "
		"INTERVAL_MS\n"
		"       pgjobd_bench_tool loadlat CONNINFO RATE SECONDS "
		"INTERVAL_MS\n"
		"       pgjobd_bench_tool many CONNINFO CLIENTS SIZE KEYS "
		"SECONDS\n");
	return 2;
}
