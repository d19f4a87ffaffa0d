/*
 * cli_status: `pgjob status [--json] [--exact]`, the cluster at a glance:
 * workers by host and instance, queues (and which are paused, limited or
 * throttled), jobs that wait because no live worker serves their kind and
 * queue, and the leases of cluster-wide tasks and duties.  No count reads
 * past a thousand rows unless --exact says so (docs/cli.md, "status").
 *
 * One statement per section, each its own snapshot: the sections can
 * disagree by what happened between them, which is fine for a status view.
 * A worker is live while its heartbeat is at most 30 s old (the same rule
 * that shares leased tasks out: src/worker/tasks.c).
 */
#include "cli/cli.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "db/queue_counts.h"

/* Column numbers of WORKERS_SQL. */
enum {
	W_HOST,
	W_SPID,
	W_SLOT,
	W_PID,
	W_VERSION,
	W_AGE,
	W_STALE,
	W_RUNNING,
	W_KINDS,
	W_STARTED,
	W_HEARTBEAT,
	W_CRASHES,
	W_CRASH_LOOPS,
	W_KINDS_TEXT, /* human output only */
	W_LOOPS_TEXT, /* human output only */
};

/*
 * The running jobs of a worker: the count it wrote with its last
 * heartbeat (schema 41; null from a worker older than that, shown "-"),
 * or with --exact, counted from the jobs table (jobs with state =
 * 'running' and locked_by = host:slot), which reads every unfinished job:
 * seconds behind a backlog of millions.
 */
/* clang-format off */
#define WORKERS_SQL(running_cte, running_col, running_join)                    \
	running_cte                                                            \
	" select w.host, w.supervisor_pid, w.slot, w.pid, w.version,"          \
	"  round(greatest(extract(epoch from now() - w.heartbeat_at), 0)"      \
	"   ::numeric, 3) as heartbeat_age_s,"                                 \
	"  w.heartbeat_at < now() - interval '30 seconds' as stale,"           \
	"  " running_col " as running_jobs,"                                   \
	"  array_to_json(w.kinds) as kinds, w.started_at, w.heartbeat_at,"     \
	"  w.process_crashes, array_to_json(w.crash_loops) as crash_loops,"    \
	"  nullif(array_to_string(w.kinds, ', '), ''),"                        \
	"  array_to_string(w.crash_loops, ', ')"                               \
	" from pgjob.workers w" running_join                                   \
	" order by w.host, w.supervisor_pid, w.slot"
/* clang-format on */

static const char WORKERS_HEARTBEAT_SQL[] = WORKERS_SQL("", "w.running", "");
static const char WORKERS_EXACT_SQL[] = WORKERS_SQL(
	"with r as ("
	"  select locked_by, count(*) as n from pgjob.jobs"
	"   where finished_at is null and coalesce(parents_left, 0) = 0"
	"    and state = 'running' group by locked_by)",
	"coalesce(r.n, 0)",
	" left join r on r.locked_by = w.host || ':' || w.slot");

/* Column numbers of QUEUES_SQL. */
enum {
	Q_QUEUE,
	Q_DUE,
	Q_SCHEDULED,
	Q_RUNNING,
	Q_DEAD,
	Q_OLDEST,
	Q_DONE,
	Q_PAUSED,
	Q_PAUSED_KINDS,
	Q_LIMITED,
	Q_THROTTLED,
	Q_WAITING,
	Q_KINDS_TEXT, /* human output only */
	Q_AT_LEAST,   /* a JSON array of the columns' names */
};

/*
 * The default: the counts of db/queue_counts.h (the console's), none past
 * QC_CAP + 1 rows, so that a backlog of ten million answers as fast as a
 * thousand jobs do; at_least names the figures that stopped there (lower
 * bounds).  Columns as QUEUES_EXACT_SQL's.
 */
/* clang-format off */
static const char QUEUES_SQL[] =
	"with recursive"
	QC_QUEUES ")"
	" select n.queue, least(o.available, " QC_CAP ") as due,"
	"  least(s.n, " QC_CAP ") as scheduled,"
	"  least(o.running, " QC_CAP ") as running,"
	"  least(d.n, " QC_CAP ") as dead,"
	"  round(extract(epoch from now() - o.oldest)::numeric, 3)"
	"   as oldest_due_age_s,"
	"  coalesce(f.done, 0) as done_last_minute,"
	"  coalesce(l.paused, false) as paused,"
	"  coalesce(array_to_json(l.paused_kinds), '[]') as paused_kinds,"
	QC_LIMITED_THROTTLED
	"  least(w.n, " QC_CAP ") as waiting,"
	"  array_to_string(l.paused_kinds, ', '),"
	/* Past the window, a running job is not seen either: its count is
	 * a lower bound too. */
	"  to_json(array_remove(array["
	"   case when o.seen > " QC_CAP " then 'due' end,"
	"   case when s.n > " QC_CAP " then 'scheduled' end,"
	"   case when o.seen > " QC_CAP " then 'running' end,"
	"   case when d.n > " QC_CAP " then 'dead' end,"
	"   case when o.seen > " QC_CAP " then 'oldest_due_age_s' end,"
	"   case when w.n > " QC_CAP " then 'waiting' end], null))"
	"   as at_least"
	QC_FROM_QUEUES;
/* clang-format on */

/*
 * --exact: every job counted.  Reads the partial indexes' rows only: no
 * done job older than a minute.
 * A queue with a row in pgjob.limits (paused, limited or throttled) is
 * listed even when it has no jobs: an empty paused queue is still paused.
 */
/* clang-format off */
static const char QUEUES_EXACT_SQL[] =
	"with j as ("
	"  select queue,"
	"   sum(n) filter (where state = 'available' and run_at <= "
	"now())::bigint"
	"    as due,"
	"   sum(n) filter (where state = 'available' and run_at > "
	"now())::bigint"
	"    as scheduled,"
	"   sum(n) filter (where state = 'running')::bigint as running,"
	"   sum(n) filter (where state = 'dead')::bigint as dead,"
	"   round(extract(epoch from now() - min(run_at) filter ("
	"    where state = 'available' and run_at <= now()))::numeric, 3)"
	"    as oldest_due_age_s,"
	"   sum(n) filter (where state = 'done')::bigint as done_last_minute"
	"  from (select queue, state, run_at, 1::bigint as n from pgjob.jobs"
	/* One arm a partial index (schema 27): jobs_claim_idx,
	 * jobs_dead_idx, jobs_finished_idx. */
	"   where (finished_at is null and coalesce(parents_left, 0) = 0)"
	"    or dead"
	"    or (finished_at > now() - interval '1 minute' and state = 'done')"
	/* Plain jobs done: sql/upgrade/019_jobs_done.sql. */
	"   union all select queue, 'done', null, n"
	"   from pgjob.done_since(now() - interval '1 minute')) x"
	"  group by queue),"
	/* Jobs that wait for their parents, along jobs_waiting_idx. */
	" w as (select queue, count(*) as waiting from pgjob.jobs"
	"  where finished_at is null and parents_left > 0 group by queue),"
	" jw as (select coalesce(j.queue, w.queue) as queue, j.due, "
	"j.scheduled,"
	"  j.running, j.dead, j.oldest_due_age_s, j.done_last_minute,"
	"  w.waiting from j full join w on w.queue = j.queue)"
	" select coalesce(j.queue, l.queue) as queue, coalesce(j.due, 0) as "
	"due,"
	"  coalesce(j.scheduled, 0) as scheduled,"
	"  coalesce(j.running, 0) as running, coalesce(j.dead, 0) as dead,"
	"  j.oldest_due_age_s,"
	"  coalesce(j.done_last_minute, 0) as done_last_minute,"
	"  coalesce(l.paused, false) as paused,"
	"  coalesce(array_to_json(l.paused_kinds), '[]') as paused_kinds,"
	QC_LIMITED_THROTTLED
	"  coalesce(j.waiting, 0) as waiting,"
	"  array_to_string(l.paused_kinds, ', '),"
	"  '[]'::json as at_least"
	" from jw j full join pgjob.limits l on l.queue = j.queue"
	" order by 1";
/* clang-format on */

/* Column numbers of NO_HANDLER_SQL. */
enum { N_KIND, N_JOBS, N_DUE, N_OLDEST };

static const char NO_HANDLER_SQL[] =
	"with live as ("
	"  select distinct unnest(kinds) as kind from pgjob.workers"
	"   where heartbeat_at >= now() - interval '30 seconds')"
	" select j.kind, count(*) as jobs,"
	"  count(*) filter (where j.run_at <= now()) as due,"
	"  round(extract(epoch from now() - min(j.run_at) filter ("
	"   where j.run_at <= now()))::numeric, 3) as oldest_due_age_s"
	" from pgjob.jobs j"
	" where j.finished_at is null and coalesce(j.parents_left, 0) = 0"
	"  and j.state = 'available'"
	"  and not exists (select 1 from live where live.kind = j.kind)"
	" group by j.kind order by j.kind";

/* Column numbers of UNSERVED_SQL and UNSERVED_HEAD_SQL. */
enum { U_KIND, U_QUEUE, U_JOBS, U_DUE, U_OLDEST, U_HANDLED, U_AT_LEAST };

/*
 * --exact: the jobs no live worker serves, by kind and queue
 * (pgjob.unserved(), sql/032): a kind no live worker handles, or one that
 * is handled, but not in the job's queue (a worker claims a kind only from
 * the queues of its handlers).  It reads every available job.
 */
static const char UNSERVED_SQL[] =
	"select kind, queue, jobs, due,"
	"  round(extract(epoch from now() - oldest_due_at)::numeric, 3)"
	"   as oldest_due_age_s, kind_handled, '[]'::json as at_least"
	" from pgjob.unserved()";

/* The default: the same among each queue's first QC_CAP + 1 available
 * jobs (QC_UNSERVED_HEAD, src/db/queue_counts.h), a worker live while its
 * heartbeat is under 30 s old, as pgjob.unserved()'s default. */
#define UNSERVED_HEAD_SQL QC_UNSERVED_HEAD("interval '30 seconds'")

/* The kinds no live worker handles at all, from rows as above: --json's
 * no_handler, older than unserved. */
#define NO_HANDLER_OF(unserved)                                                \
	"select kind, sum(jobs)::bigint as jobs, sum(due)::bigint as due,"     \
	"  max(oldest_due_age_s) as oldest_due_age_s"                          \
	" from (" unserved ") u where not kind_handled"                        \
	" group by kind order by kind"

/* Column numbers of LEASES_SQL. */
enum { L_NAME, L_HOLDER, L_TOKEN, L_EXPIRES_IN, L_EXPIRES_AT };

static const char LEASES_SQL[] =
	"select name, holder, token,"
	"  round(extract(epoch from expires_at - now())::numeric, 3)"
	"   as expires_in_s, expires_at"
	" from pgjob.leases order by name";

/* A cell: the value, or NULL for SQL null (the table prints "-"). */
static const char *
val(const struct db_rows *res, int row, int col)
{
	return (db_rows_value(res, row, col) == NULL)
		       ? NULL
		       : db_rows_text(res, row, col);
}

/* An age column as "3m07s", or NULL for SQL null. */
static const char *
age(const struct db_rows *res, int row, int col, char *buf, size_t len)
{
	if ((db_rows_value(res, row, col) == NULL))
		return NULL;
	return cli_format_age(strtod(db_rows_text(res, row, col), NULL), buf,
			      len);
}

/* 1 when rows a and b are workers of one instance (host, supervisor). */
static int
same_instance(const struct db_rows *res, int a, int b)
{
	const char *ha = db_rows_text(res, a, W_HOST);
	const char *hb = db_rows_text(res, b, W_HOST);
	const char *sa = db_rows_text(res, a, W_SPID);
	const char *sb = db_rows_text(res, b, W_SPID);
	return strcmp(ha, hb) == 0 && strcmp(sa, sb) == 0;
}

/* One table, grouped: host and instance only where they change. */
static void
print_workers(const struct db_rows *res, FILE *f)
{
	static const char *const head[] = {"HOST",    "INSTANCE", "SLOT",
					   "PID",     "VERSION",  "HEARTBEAT",
					   "RUNNING", "KINDS"};
	int n = db_rows_count(res), stale = 0;
	struct cli_table t;

	for (int i = 0; i < n; i++)
		stale += db_rows_text(res, i, W_STALE)[0] == 't';
	fprintf(f, "workers: %d live, %d stale\n", n - stale, stale);
	if (n == 0)
		return;
	cli_table_init(&t, 8, head, "lrrrllrl");
	for (int i = 0; i < n; i++) {
		char a[32], hb[48];
		int first = i == 0 || !same_instance(res, i - 1, i);
		snprintf(hb, sizeof(hb), "%s%s",
			 age(res, i, W_AGE, a, sizeof(a)),
			 db_rows_text(res, i, W_STALE)[0] == 't' ? " (stale)"
								 : "");
		const char *row[] = {first ? val(res, i, W_HOST) : "",
				     first ? val(res, i, W_SPID) : "",
				     val(res, i, W_SLOT),
				     val(res, i, W_PID),
				     val(res, i, W_VERSION),
				     hb,
				     val(res, i, W_RUNNING),
				     val(res, i, W_KINDS_TEXT)};
		cli_table_add(&t, row);
	}
	cli_table_print(&t, f, "  ");
	/* A process handler in a crash loop (docs/handlers.md), said apart
	 * from the table; the kinds are a config's, printed escaped. */
	for (int i = 0; i < n; i++) {
		if (!*db_rows_text(res, i, W_LOOPS_TEXT))
			continue;
		char *host = cli_one_line(db_rows_text(res, i, W_HOST), 200);
		char *loops =
			cli_one_line(db_rows_text(res, i, W_LOOPS_TEXT), 400);
		fprintf(f,
			"  crash loop: worker %s:%s, kind %s (%s copies ended "
			"unasked)\n",
			host, db_rows_text(res, i, W_SLOT), loops,
			db_rows_text(res, i, W_CRASHES));
		free(host);
		free(loops);
	}
}

struct db_rows *
cli_status_queues(struct db_conn *conn, int exact)
{
	return cli_exec(conn, "queues", exact ? QUEUES_EXACT_SQL : QUEUES_SQL,
			0, NULL);
}

/*
 * A cell that may be a lower bound: its text, with "+" after it when the
 * row's at_least (column atl, a JSON array of names) names it; NULL for
 * SQL null.  is_age: the value is an age in seconds, printed as one.
 */
static const char *
bounded(const struct db_rows *res, int row, int col, int atl, const char *name,
	int is_age, char *buf, size_t len)
{
	char a[32], quoted[64];
	const char *v =
		is_age ? age(res, row, col, a, sizeof(a)) : val(res, row, col);
	if (!v)
		return NULL;
	snprintf(quoted, sizeof(quoted), "\"%s\"", name);
	int more = strstr(db_rows_text(res, row, atl), quoted) != NULL;
	snprintf(buf, len, "%s%s", v, more ? "+" : "");
	return buf;
}

/*
 * The FLOW cell of a queue: "paused" (or "paused: KIND, ..."), "limited",
 * "throttled", joined by "; "; NULL when flow control leaves it alone.
 * Caller frees.  `pgjob limits` has the details.
 */
static char *
flow_text(const struct db_rows *res, int row)
{
	struct buf b = {0};
	const char *kinds = db_rows_text(res, row, Q_KINDS_TEXT);
	if (db_rows_text(res, row, Q_PAUSED)[0] == 't')
		buf_appendf(&b, "paused");
	else if (*kinds)
		buf_appendf(&b, "paused: %s", kinds);
	if (db_rows_text(res, row, Q_LIMITED)[0] == 't')
		buf_appendf(&b, "%slimited", b.len ? "; " : "");
	if (db_rows_value(res, row, Q_THROTTLED))
		buf_appendf(&b, "%sthrottled", b.len ? "; " : "");
	return b.data;
}

void
cli_status_print_queues(const struct db_rows *res, FILE *f)
{
	static const char *const head[] = {
		"QUEUE", "DUE",	       "SCHEDULED", "WAITING", "RUNNING",
		"DEAD",	 "OLDEST DUE", "DONE 1MIN", "FLOW"};
	int n = db_rows_count(res), flow = 0, waiting = 0;
	struct cli_table t;

	fputs("queues\n", f);
	if (n == 0) {
		fputs("  no jobs\n", f);
		return;
	}
	char **cell = xcalloc((size_t)n, sizeof(char *));
	for (int i = 0; i < n; i++) {
		flow |= (cell[i] = flow_text(res, i)) != NULL;
		waiting |= strcmp(db_rows_text(res, i, Q_WAITING), "0") != 0;
	}
	/* Without flow control or jobs that wait for others, those columns
	 * would say nothing: leave them out. */
	const char *const *h = head;
	const char *hw[8];
	if (!waiting) {
		int k = 0;
		for (int c = 0; c < 9; c++)
			if (c != 3)
				hw[k++] = head[c];
		h = hw;
	}
	cli_table_init(&t, 7 + waiting + flow, h,
		       waiting ? "lrrrrrrrl" : "lrrrrrrl");
	for (int i = 0; i < n; i++) {
		char b[6][40];
		const char *row[9],
			*all[] = {val(res, i, Q_QUEUE),
				  bounded(res, i, Q_DUE, Q_AT_LEAST, "due", 0,
					  b[0], sizeof(b[0])),
				  bounded(res, i, Q_SCHEDULED, Q_AT_LEAST,
					  "scheduled", 0, b[1], sizeof(b[1])),
				  bounded(res, i, Q_WAITING, Q_AT_LEAST,
					  "waiting", 0, b[2], sizeof(b[2])),
				  bounded(res, i, Q_RUNNING, Q_AT_LEAST,
					  "running", 0, b[3], sizeof(b[3])),
				  bounded(res, i, Q_DEAD, Q_AT_LEAST, "dead", 0,
					  b[4], sizeof(b[4])),
				  bounded(res, i, Q_OLDEST, Q_AT_LEAST,
					  "oldest_due_age_s", 1, b[5],
					  sizeof(b[5])),
				  val(res, i, Q_DONE),
				  cell[i]};
		int k = 0;
		for (int c = 0; c < 9; c++)
			if (c != 3 || waiting)
				row[k++] = all[c];
		cli_table_add(&t, row);
		free(cell[i]);
	}
	free(cell);
	cli_table_print(&t, f, "  ");
}

/*
 * 1 when some queue has more available jobs than the unserved section's
 * window of QC_CAP + 1 (its due and scheduled jobs, or either one a lower
 * bound): that section then looked at each queue's head only.  Not
 * for --exact's rows, which looked at every job.
 */
static int
partial_unserved(const struct db_rows *q)
{
	for (int i = 0; i < db_rows_count(q); i++) {
		const char *atl = db_rows_text(q, i, Q_AT_LEAST);
		if (strstr(atl, "\"due\"") || strstr(atl, "\"scheduled\"") ||
		    strtoll(db_rows_text(q, i, Q_DUE), NULL, 10) +
				    strtoll(db_rows_text(q, i, Q_SCHEDULED),
					    NULL, 10) >
			    atoll(QC_CAP))
			return 1;
	}
	return 0;
}

static void
print_unserved(const struct db_rows *res, int partial, FILE *f)
{
	static const char *const head[] = {"KIND", "QUEUE",	 "JOBS",
					   "DUE",  "OLDEST DUE", "WHY"};
	struct cli_table t;

	fputs("waiting, no live worker serves them\n", f);
	if (db_rows_count(res) == 0) {
		if (partial) {
			fputs("  none among the first " QC_CAP " available "
			      "jobs of each queue (pgjob status --exact reads "
			      "them all)\n",
			      f);
			return;
		}
		fputs("  none: a live worker serves the kind and queue of "
		      "every waiting job\n",
		      f);
		return;
	}
	cli_table_init(&t, 6, head, "llrrrl");
	for (int i = 0; i < db_rows_count(res); i++) {
		char b[3][40];
		const char *row[] = {val(res, i, U_KIND),
				     val(res, i, U_QUEUE),
				     bounded(res, i, U_JOBS, U_AT_LEAST, "jobs",
					     0, b[0], sizeof(b[0])),
				     bounded(res, i, U_DUE, U_AT_LEAST, "due",
					     0, b[1], sizeof(b[1])),
				     bounded(res, i, U_OLDEST, U_AT_LEAST,
					     "oldest_due_age_s", 1, b[2],
					     sizeof(b[2])),
				     db_rows_text(res, i, U_HANDLED)[0] == 't'
					     ? "queue not served"
					     : "no handler"};
		cli_table_add(&t, row);
	}
	cli_table_print(&t, f, "  ");
}

static void
print_leases(const struct db_rows *res, FILE *f)
{
	static const char *const head[] = {"NAME", "HOLDER", "TOKEN",
					   "EXPIRES IN"};
	struct cli_table t;

	fputs("leases\n", f);
	if (db_rows_count(res) == 0) {
		fputs("  none\n", f);
		return;
	}
	cli_table_init(&t, 4, head, "llrl");
	for (int i = 0; i < db_rows_count(res); i++) {
		char a[32], exp[48];
		const char *in = NULL;
		if (!(db_rows_value(res, i, L_EXPIRES_IN) == NULL)) {
			double s = strtod(db_rows_text(res, i, L_EXPIRES_IN),
					  NULL);
			cli_format_age(s < 0 ? -s : s, a, sizeof(a));
			snprintf(exp, sizeof(exp),
				 s < 0 ? "expired %s ago" : "%s", a);
			in = exp;
		}
		const char *row[] = {val(res, i, L_NAME), val(res, i, L_HOLDER),
				     val(res, i, L_TOKEN), in};
		cli_table_add(&t, row);
	}
	cli_table_print(&t, f, "  ");
}

/* The workers grouped into instances (host, supervisor pid). */
static cJSON *
json_instances(const struct db_rows *res, int *live, int *stale)
{
	cJSON *instances = cJSON_CreateArray(), *workers = NULL;
	int n = db_rows_count(res);

	*live = *stale = 0;
	for (int i = 0; i < n; i++) {
		if (i == 0 || !same_instance(res, i - 1, i)) {
			cJSON *inst = cJSON_CreateObject();
			cli_json_add_columns(inst, res, i, W_HOST, W_SLOT);
			workers = cJSON_AddArrayToObject(inst, "workers");
			cJSON_AddItemToArray(instances, inst);
		}
		cJSON *w = cJSON_CreateObject();
		cli_json_add_columns(w, res, i, W_SLOT, W_KINDS_TEXT);
		cJSON_AddItemToArray(workers, w);
		if (db_rows_text(res, i, W_STALE)[0] == 't')
			(*stale)++;
		else
			(*live)++;
	}
	return instances;
}

/* Rows as objects of their columns [0, ncols). */
static cJSON *
json_rows(const struct db_rows *res, int ncols)
{
	cJSON *a = cJSON_CreateArray();
	for (int i = 0; i < db_rows_count(res); i++) {
		cJSON *o = cJSON_CreateObject();
		cli_json_add_columns(o, res, i, 0, ncols);
		cJSON_AddItemToArray(a, o);
	}
	return a;
}

cJSON *
cli_status_queues_json(const struct db_rows *res)
{
	cJSON *a = cJSON_CreateArray();
	for (int i = 0; i < db_rows_count(res); i++) {
		cJSON *o = cJSON_CreateObject();
		cli_json_add_columns(o, res, i, 0, Q_KINDS_TEXT);
		cli_json_add_columns(o, res, i, Q_AT_LEAST, Q_AT_LEAST + 1);
		cJSON_AddItemToArray(a, o);
	}
	return a;
}

static cJSON *
status_json(struct db_rows *const res[5], int partial)
{
	cJSON *o = cJSON_CreateObject();
	int live, stale;
	cJSON *instances = json_instances(res[0], &live, &stale);
	cJSON_AddNumberToObject(o, "live_workers", live);
	cJSON_AddNumberToObject(o, "stale_workers", stale);
	cJSON_AddItemToObject(o, "instances", instances);
	cJSON_AddItemToObject(o, "queues", cli_status_queues_json(res[1]));
	cJSON_AddItemToObject(o, "no_handler",
			      json_rows(res[2], db_rows_columns(res[2])));
	cJSON_AddItemToObject(o, "unserved",
			      json_rows(res[4], db_rows_columns(res[4])));
	/* unserved and no_handler looked at each queue's head only. */
	cJSON_AddBoolToObject(o, "unserved_partial", partial);
	cJSON_AddItemToObject(o, "leases",
			      json_rows(res[3], db_rows_columns(res[3])));
	return o;
}

/* --json and --exact (every job counted: docs/cli.md, "status"). */
struct status_opts {
	int json, exact;
};

static int
parse(int argc, char **argv, struct status_opts *o)
{
	static const struct option opts[] = {
		{"json", no_argument, NULL, 'j'},
		{"exact", no_argument, NULL, 'x'},
		{NULL, 0, NULL, 0},
	};
	int c;

	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
		if (c == 'j')
			o->json = 1;
		else if (c == 'x')
			o->exact = 1;
		else
			return cli_bad_option("status", c, argv);
	}
	if (optind < argc)
		return cli_fail(CLI_EXIT_USAGE,
				"status: unexpected argument \"%s\"",
				argv[optind]);
	return 0;
}

/* clang-format off */
static const char UNSERVED_HEAD[] = UNSERVED_HEAD_SQL;
static const char NO_HANDLER_HEAD_SQL[] = NO_HANDLER_OF(UNSERVED_HEAD_SQL);
/* clang-format on */

/*
 * The status of one database (cli->database, else the config's, else
 * PG*): printed, or with o->json set, returned in *out (caller frees).
 */
static int
status_one(struct cli *cli, const struct status_opts *o, cJSON **out)
{
	struct db_rows *res[5] = {NULL};
	struct db_conn *conn;
	int rc, x = o->exact;

	if ((rc = cli_open(cli, &conn)) != 0)
		return rc;
	if (!(res[0] = cli_exec(conn, "workers",
				x ? WORKERS_EXACT_SQL : WORKERS_HEARTBEAT_SQL,
				0, NULL)) ||
	    !(res[1] = cli_status_queues(conn, x)) ||
	    /* The kinds alone: --json's no_handler, older than unserved. */
	    (o->json &&
	     !(res[2] = cli_exec(conn, "waiting kinds",
				 x ? NO_HANDLER_SQL : NO_HANDLER_HEAD_SQL, 0,
				 NULL))) ||
	    !(res[3] = cli_exec(conn, "leases", LEASES_SQL, 0, NULL)) ||
	    !(res[4] = cli_exec(conn, "waiting jobs",
				x ? UNSERVED_SQL : UNSERVED_HEAD, 0, NULL))) {
		rc = CLI_EXIT_FAILED;
		goto out;
	}
	int partial = !x && partial_unserved(res[1]);
	if (o->json) {
		*out = status_json(res, partial);
	} else {
		print_workers(res[0], stdout);
		fputc('\n', stdout);
		cli_status_print_queues(res[1], stdout);
		fputc('\n', stdout);
		print_unserved(res[4], partial, stdout);
		fputc('\n', stdout);
		print_leases(res[3], stdout);
	}
out:
	for (int i = 0; i < 5; i++)
		db_rows_free(res[i]);
	db_close(conn);
	return rc;
}

/*
 * With a config of several databases (databases:) and no --database, each
 * database in turn: a header line "database NAME" before each, or in
 * JSON {"databases": [{"database": NAME, ...its status...}, ...]}.  One
 * that cannot be read is said (its error on stderr, then a line that names
 * it; in JSON "reachable": false, true for the others) and the others are
 * still shown; the exit code is then 1.
 */
static int
status_each(struct cli *cli, const struct status_opts *o)
{
	int json = o->json;
	cJSON *all = json ? cJSON_CreateArray() : NULL;
	int rc = 0;

	for (size_t i = 0; i < cli->cfg->ndatabases; i++) {
		const struct database_conf *d = &cli->cfg->databases[i];
		cJSON *one = NULL;
		if (!json)
			printf("%sdatabase %s\n\n", i ? "\n" : "", d->name);
		cli->database = xstrdup(d->conninfo);
		int r = status_one(cli, o, &one);
		free(cli->database);
		cli->database = NULL;
		if (r != 0) {
			rc = rc ? rc : r;
			/* The error above does not say which database. */
			cli_fail(r,
				 "status: database %s: not reachable (the "
				 "error above)",
				 d->name);
			if (!json)
				printf("(not reachable: see the error "
				       "above)\n");
			else
				cJSON_AddFalseToObject(
					one = cJSON_CreateObject(),
					"reachable");
		} else if (json) {
			cJSON_AddTrueToObject(one, "reachable");
		}
		if (json) {
			cJSON_AddItemToObject(one, "database",
					      cJSON_CreateString(d->name));
			cJSON_AddItemToArray(all, one);
		}
	}
	if (json) {
		cJSON *top = cJSON_CreateObject();
		cJSON_AddItemToObject(top, "databases", all);
		cli_json_print(top);
	}
	return rc;
}

int
cli_status_run(struct cli *cli, int argc, char **argv)
{
	struct status_opts opts = {0};
	cJSON *o = NULL;
	int rc;

	if ((rc = parse(argc, argv, &opts)) != 0)
		return rc;
	if (!cli->database && cli->cfg && cli->cfg->ndatabases > 1)
		return status_each(cli, &opts);
	if ((rc = status_one(cli, &opts, &o)) == 0 && o)
		cli_json_print(o);
	return rc;
}
