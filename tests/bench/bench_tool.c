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
 *	run.
 *
 *   pgjobd_bench_tool latency CONNINFO COUNT INTERVAL_MS
 *	Enqueues COUNT single 'noop' jobs with payload {"seq": i}, one
 *	transaction each, INTERVAL_MS apart, and prints "E <seq> <µs>" as
 *	each commit is acknowledged: the bench plugin's "S <seq> <µs>"
 *	handler-start stamps are joined with these.
 */
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
	 * a partial index in its order (jobs_queue_order_idx,
	 * jobs_running_idx): written as a bare EXISTS, the planner would
	 * scan the heap from its start, through every finished row. */
	static const char sql[] =
		"with r as (select 1 from pgjob.jobs where state = 'running'"
		"   order by queue, locked_until limit 1),"
		" a as (select 1 from pgjob.jobs where state = 'available'"
		"   order by queue, id limit 1)"
		" select exists (select 1 from r),"
		"  exists (select 1 from r) or exists (select 1 from a),"
		"  coalesce((select n_dead_tup from pg_stat_user_tables"
		"   where relid = 'pgjob.jobs'::regclass), 0)";
	long long start = now_us(), first = 0, dead = 0, polls = 0;
	const char *trace_path = getenv("PGJOBD_BENCH_DEAD_TRACE");
	FILE *trace = trace_path && *trace_path ? fopen(trace_path, "a") : NULL;
	for (;;) {
		PGresult *r = PQexec(c, sql);
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
		if (!first && (started || !left))
			first = t;
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

static int
latency(PGconn *c, int count, int interval_ms)
{
	for (int i = 0; i < count; i++) {
		char seq[16];
		snprintf(seq, sizeof(seq), "%d", i);
		const char *p[] = {seq};
		PGresult *r =
			PQexecParams(c,
				     "select pgjob.enqueue('noop',"
				     " jsonb_build_object('seq', $1::int))",
				     1, NULL, p, NULL, NULL, 0);
		long long t = now_us();
		if (PQresultStatus(r) != PGRES_TUPLES_OK) {
			fprintf(stderr, "bench_tool: %s", PQerrorMessage(c));
			PQclear(r);
			return 2;
		}
		PQclear(r);
		printf("E %d %lld\n", i, t);
		fflush(stdout);
		sleep_ms(interval_ms);
	}
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
	fprintf(stderr, "usage: pgjobd_bench_tool wait CONNINFO TIMEOUT_S\n"
			"       pgjobd_bench_tool latency CONNINFO COUNT "
			"INTERVAL_MS\n");
	return 2;
}
