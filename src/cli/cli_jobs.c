/*
 * cli_jobs: reading jobs.  `pgjob jobs` lists them, newest first, with
 * filters; `pgjob show ID` prints one with every column of pgjob.jobs (a
 * column that a later migration adds shows up without a change here), then
 * its attempt history (sql/upgrade/013_attempts.sql).
 */
#include "cli/cli.h"

#include <stdlib.h>
#include <string.h>

#include "common/duration.h"
#include "common/util.h"

#define JOBS_DEFAULT_LIMIT 50
#define JOBS_ERROR_CHARS   60

/* Column numbers of LIST_SQL. */
enum {
	J_ID,
	J_QUEUE,
	J_KIND,
	J_STATE,
	J_ATTEMPTS,
	J_MAX,
	J_RUN_AT,
	J_LAST_ERROR,
	J_CREATED,
	J_FINISHED,
};

/* Parameters: state, queue, kind (each NULL for any), limit. */
static const char LIST_SQL[] =
	"select id, queue, kind, state, attempts, max_attempts, run_at,"
	"  last_error, created_at, finished_at"
	" from pgjob.all_jobs"
	" where ($1::text is null or state = $1)"
	"  and ($2::text is null or queue = $2)"
	"  and ($3::text is null or kind = $3)"
	" order by id desc limit $4";

static const char *const states[] = {"waiting", "available", "running",
				     "done",	"dead",	     "cancelled"};

struct list_args {
	const char *p[4]; /* state queue kind limit+1 */
	long limit;
	int json;
	char limit1[24];
};

static int
valid_state(const char *s)
{
	for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++)
		if (strcmp(s, states[i]) == 0)
			return 1;
	return 0;
}

static int
list_parse(int argc, char **argv, struct list_args *a)
{
	static const struct option opts[] = {
		{"state", required_argument, NULL, 's'},
		{"queue", required_argument, NULL, 'q'},
		{"kind", required_argument, NULL, 'k'},
		{"limit", required_argument, NULL, 'n'},
		{"json", no_argument, NULL, 'j'},
		{NULL, 0, NULL, 0},
	};
	int c;

	a->limit = JOBS_DEFAULT_LIMIT;
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			if (!valid_state(optarg))
				return cli_fail(CLI_EXIT_USAGE,
						"jobs: bad --state \"%s\" "
						"(waiting, available, running, "
						"done, dead or cancelled)",
						optarg);
			a->p[0] = optarg;
			break;
		case 'q':
			a->p[1] = optarg;
			break;
		case 'k':
			a->p[2] = optarg;
			break;
		case 'n':
			if (cli_parse_int(optarg, 1, 1000000, &a->limit) < 0)
				return cli_fail(CLI_EXIT_USAGE,
						"jobs: bad --limit \"%s\" (an "
						"integer from 1 to 1000000)",
						optarg);
			break;
		case 'j':
			a->json = 1;
			break;
		default:
			return cli_bad_option("jobs", c, argv);
		}
	}
	if (optind < argc)
		return cli_fail(CLI_EXIT_USAGE,
				"jobs: unexpected argument \"%s\"",
				argv[optind]);
	/* One row more than asked tells whether there are more. */
	snprintf(a->limit1, sizeof(a->limit1), "%ld", a->limit + 1);
	a->p[3] = a->limit1;
	return 0;
}

static void
list_json(const struct db_rows *res, int n)
{
	cJSON *a = cJSON_CreateArray();
	for (int i = 0; i < n; i++) {
		cJSON *o = cJSON_CreateObject();
		cli_json_add_columns(o, res, i, 0, db_rows_columns(res));
		cJSON_AddItemToArray(a, o);
	}
	cli_json_print(a);
}

static void
list_table(const struct db_rows *res, int n, int more)
{
	static const char *const head[] = {"ID",	"QUEUE",    "KIND",
					   "STATE",	"ATTEMPTS", "RUN AT",
					   "LAST ERROR"};
	struct cli_table t;

	if (n == 0) {
		puts("no jobs");
		return;
	}
	cli_table_init(&t, 7, head, "rlllrll");
	for (int i = 0; i < n; i++) {
		char att[48], when[64];
		snprintf(att, sizeof(att), "%s/%s",
			 db_rows_text(res, i, J_ATTEMPTS),
			 (db_rows_value(res, i, J_MAX) == NULL)
				 ? "-"
				 : db_rows_text(res, i, J_MAX));
		char *err = (db_rows_value(res, i, J_LAST_ERROR) == NULL)
				    ? NULL
				    : cli_one_line(db_rows_text(res, i,
								J_LAST_ERROR),
						   JOBS_ERROR_CHARS);
		const char *row[] = {
			db_rows_text(res, i, J_ID),
			db_rows_text(res, i, J_QUEUE),
			db_rows_text(res, i, J_KIND),
			db_rows_text(res, i, J_STATE),
			att,
			cli_format_time(db_rows_text(res, i, J_RUN_AT), when,
					sizeof(when)),
			err,
		};
		cli_table_add(&t, row);
		free(err);
	}
	cli_table_print(&t, stdout, "");
	if (more)
		printf("(the newest %d; --limit shows more)\n", n);
}

int
cli_jobs_list(struct cli *cli, int argc, char **argv)
{
	struct list_args a = {0};
	struct db_conn *conn;
	int rc;

	if ((rc = list_parse(argc, argv, &a)) != 0)
		return rc;
	if ((rc = cli_open(cli, &conn)) != 0)
		return rc;
	struct db_rows *res = cli_exec(conn, "jobs", LIST_SQL, 4, a.p);
	if (!res)
		return cli_abort(conn);
	int n = db_rows_count(res), more = n > a.limit;
	if (more)
		n = (int)a.limit;
	if (a.json)
		list_json(res, n);
	else
		list_table(res, n, more);
	db_rows_free(res);
	db_close(conn);
	return 0;
}

static int
show_parse(int argc, char **argv, char *id, size_t len, int *json)
{
	int rc = cli_parse_json_only("show", argc, argv, json);

	if (rc != 0)
		return rc;
	if (optind >= argc)
		return cli_fail(CLI_EXIT_USAGE, "show: missing job ID");
	if (optind + 1 < argc)
		return cli_fail(CLI_EXIT_USAGE,
				"show: unexpected argument \"%s\"",
				argv[optind + 1]);
	return cli_parse_id("show", argv[optind], id, len);
}

/* Column numbers of ATTEMPTS_SQL. */
enum {
	A_ATTEMPT,
	A_STARTED,
	A_FINISHED,
	A_WORKER,
	A_OUTCOME,
	A_STATUS,
	A_ERROR,
	A_WALL,
	A_CPU,
	A_RSS,
	A_NCOLS,
};

/* Job $1's attempts, oldest first (sql/upgrade/013_attempts.sql).  The lease
 * token orders them: attempt numbers can repeat (pgjob retry, a shutdown). */
static const char ATTEMPTS_SQL[] =
	"select attempt, started_at, finished_at, worker, outcome, status,"
	"  error, wall_ms, cpu_ms, max_rss_kb from pgjob.job_attempts($1)";

/* "name   value", with the lines of a multi-line value aligned. */
static void
show_field(const char *name, int width, const char *value)
{
	printf("%-*s", width, name);
	for (const char *p = value;;) {
		size_t n = strcspn(p, "\n");
		printf("%.*s\n", (int)n, p);
		if (!p[n] || !p[n + 1])
			break;
		p += n + 1;
		printf("%*s", width, "");
	}
}

static void
show_text(const struct db_rows *res)
{
	int width = 0;
	for (int c = 0; c < db_rows_columns(res); c++) {
		int n = (int)strlen(db_rows_name(res, c));
		if (n > width)
			width = n;
	}
	for (int c = 0; c < db_rows_columns(res); c++) {
		/* Any column may hold what a client wrote: kind, queue,
		 * payload, last_error, keys, locked_by. */
		char *v = cli_text((db_rows_value(res, 0, c) == NULL)
					   ? "-"
					   : db_rows_text(res, 0, c));
		show_field(db_rows_name(res, c), width + 2, v);
		free(v);
	}
}

/* How long an attempt ran: its wall time, else "-". */
static const char *
attempt_duration(const struct db_rows *res, int i, char *buf, size_t len)
{
	if (db_rows_value(res, i, A_WALL) == NULL)
		return NULL;
	return duration_format(atoll(db_rows_text(res, i, A_WALL)), buf, len);
}

/*
 * The attempt history as a table.  Everything in it but the numbers and
 * times was written by a worker or a handler: cli_table_add() makes each
 * cell one line with its control characters and bad UTF-8 escaped, and the
 * error is cut.
 */
static void
show_attempts(const struct db_rows *res)
{
	static const char *const head[] = {
		"ATTEMPT", "STARTED", "ENDED",	  "WORKER",
		"OUTCOME", "STATUS",  "DURATION", "ERROR",
	};
	struct cli_table t;
	int n = db_rows_count(res);

	if (n == 0) {
		puts("\nno attempts yet");
		return;
	}
	printf("\nattempts\n");
	cli_table_init(&t, 8, head, "rllllrrl");
	for (int i = 0; i < n; i++) {
		char start[64], end[64], dur[32];
		const char *s = db_rows_value(res, i, A_STARTED);
		const char *e = db_rows_value(res, i, A_FINISHED);
		const char *err = db_rows_value(res, i, A_ERROR);
		char *err1 = err ? cli_one_line(err, JOBS_ERROR_CHARS) : NULL;
		const char *row[] = {
			db_rows_text(res, i, A_ATTEMPT),
			s ? cli_format_time(s, start, sizeof(start)) : NULL,
			e ? cli_format_time(e, end, sizeof(end)) : NULL,
			db_rows_value(res, i, A_WORKER),
			db_rows_text(res, i, A_OUTCOME),
			db_rows_value(res, i, A_STATUS),
			attempt_duration(res, i, dur, sizeof(dur)),
			err1,
		};
		cli_table_add(&t, row);
		free(err1);
	}
	cli_table_print(&t, stdout, "  ");
}

static cJSON *
attempts_json(const struct db_rows *res)
{
	cJSON *a = cJSON_CreateArray();
	for (int i = 0; i < db_rows_count(res); i++) {
		cJSON *o = cJSON_CreateObject();
		cli_json_add_columns(o, res, i, 0, A_NCOLS);
		cJSON_AddItemToArray(a, o);
	}
	return a;
}

/* Job $1's timeline (sql/schema/functions/job_timeline.sql). */
static const char TIMELINE_SQL[] =
	"select at, event, attempt, worker, wait_ms, detail"
	" from pgjob.job_timeline($1)";

/* The timeline as a table: the worker and the detail (an error) are a
 * handler's or a client's text, one line each by cli_table_add(). */
static void
show_timeline(const struct db_rows *res)
{
	static const char *const head[] = {
		"AT", "EVENT", "ATTEMPT", "WORKER", "WAITED", "DETAIL",
	};
	struct cli_table t;
	int n = db_rows_count(res);
	if (n == 0)
		return;
	printf("\ntimeline\n");
	cli_table_init(&t, 6, head, "llrlrl");
	for (int i = 0; i < n; i++) {
		char at[64], wait[32];
		const char *w = db_rows_value(res, i, 4);
		const char *d = db_rows_value(res, i, 5);
		char *d1 = d ? cli_one_line(d, JOBS_ERROR_CHARS) : NULL;
		const char *row[] = {
			cli_format_time(db_rows_text(res, i, 0), at,
					sizeof(at)),
			db_rows_text(res, i, 1),
			db_rows_value(res, i, 2),
			db_rows_value(res, i, 3),
			w ? duration_format(atoll(w), wait, sizeof(wait))
			  : NULL,
			d1,
		};
		cli_table_add(&t, row);
		free(d1);
	}
	cli_table_print(&t, stdout, "  ");
}

static cJSON *
rows_json(const struct db_rows *res)
{
	cJSON *a = cJSON_CreateArray();
	for (int i = 0; i < db_rows_count(res); i++) {
		cJSON *o = cJSON_CreateObject();
		cli_json_add_columns(o, res, i, 0, db_rows_columns(res));
		cJSON_AddItemToArray(a, o);
	}
	return a;
}

int
cli_jobs_show(struct cli *cli, int argc, char **argv)
{
	char id[24];
	struct db_conn *conn;
	int json = 0, rc;

	if ((rc = show_parse(argc, argv, id, sizeof(id), &json)) != 0)
		return rc;
	if ((rc = cli_open(cli, &conn)) != 0)
		return rc;
	const char *p[] = {id};
	struct db_rows *res =
		cli_exec(conn, "show",
			 /* trace_id: the trace's id alone, the one a
			  * tracing tool searches by (docs/tracing.md). */
			 "select j.*, substr(j.traceparent, 4, 32) as trace_id"
			 " from pgjob.all_jobs j where j.id = $1",
			 1, p);
	if (!res)
		return cli_abort(conn);
	if (db_rows_count(res) == 0) {
		db_rows_free(res);
		db_close(conn);
		return cli_fail(CLI_EXIT_FAILED, "no job %s", id);
	}
	struct db_rows *att = cli_exec(conn, "show", ATTEMPTS_SQL, 1, p);
	if (!att) {
		db_rows_free(res);
		return cli_abort(conn);
	}
	struct db_rows *tl = cli_exec(conn, "show", TIMELINE_SQL, 1, p);
	if (!tl) {
		db_rows_free(att);
		db_rows_free(res);
		return cli_abort(conn);
	}
	if (json) {
		cJSON *o = cJSON_CreateObject();
		cli_json_add_columns(o, res, 0, 0, db_rows_columns(res));
		/* "attempts" is the job's count already. */
		cJSON_AddItemToObject(o, "attempt_history", attempts_json(att));
		cJSON_AddItemToObject(o, "timeline", rows_json(tl));
		cli_json_print(o);
	} else {
		show_text(res);
		show_attempts(att);
		show_timeline(tl);
	}
	db_rows_free(tl);
	db_rows_free(att);
	db_rows_free(res);
	db_close(conn);
	return rc;
}
