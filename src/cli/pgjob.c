/*
 * pgjob: the operator's command line.
 *
 *   pgjob [-c FILE] [--database CONNINFO] COMMAND [ARGS]
 *
 * The database comes from --database, else the config file's
 * database.conninfo, else libpq's PG* environment.  Exit codes: 0 done,
 * 1 the command failed (unknown id, wrong state, database error), 2 usage,
 * 78 config or schema.
 * migrate and enqueue live here; the other commands in cli_*.c (cli.h).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "common/config.h"
#include "common/duration.h"
#include "common/conninfo.h"
#include "db/db.h"
#include "common/failpoint.h"
#include "common/log.h"
#include "db/migrate.h"
#include "common/util.h"

static void
usage(FILE *f)
{
	fputs("usage: pgjob [-c FILE] [--database CONNINFO] COMMAND [ARGS]\n"
	      "\n"
	      "commands:\n"
	      "  migrate [--status] [--json] | migrate --dry-run\n"
	      "                         apply pending schema migrations "
	      "(--status: list\n"
	      "                         them; --dry-run: print their SQL, "
	      "never JSON)\n"
	      "  enqueue KIND [JSON] [--queue Q] [--run-at TIME | --in DUR]\n"
	      "          [--priority N] [--unique-key K] [--ordering-key K]\n"
	      "          [--max-attempts N] [--limit-key K] [--cost N]\n"
	      "          [--after ID,... [--on-parent-failure "
	      "cancel|run|wait]] [--json]\n"
	      "                         enqueue a job and print its id\n"
	      "  enqueue --file FILE [--json]\n"
	      "                         enqueue the jobs of FILE (- for "
	      "stdin), one JSON\n"
	      "                         object per line, all or none; "
	      "print their ids\n"
	      "  status [--json]        workers, queues, jobs no live worker "
	      "serves\n"
	      "                         (kind and queue), leases\n"
	      "  jobs [--state S] [--queue Q] [--kind K] [--limit N] [--json]\n"
	      "                         list jobs, newest first (50 by "
	      "default)\n"
	      "  show ID [--json]       one job with every column, and its "
	      "attempts\n"
	      "  retry ID [--json]      a dead, cancelled or failed job: run "
	      "it again now\n"
	      "  retry --dead [--kind K] [--json]\n"
	      "                         every dead job (of one kind)\n"
	      "  cancel ID [--json]     cancel a job that waits or runs (its "
	      "worker\n"
	      "                         stops a running one)\n"
	      "  prune [--older-than DUR] [--json]\n"
	      "                         delete jobs finished before DUR ago\n"
	      "                         (default: the config's retention, "
	      "else 7d)\n"
	      "  top [--interval DUR] [--once] [--json]\n"
	      "                         throughput per kind and queue depth, "
	      "refreshed\n"
	      "                         (--json without --once: one line per "
	      "refresh)\n"
	      "  stats [--range 1h|24h|7d|30d] [--queue Q] [--json]\n"
	      "                         per queue and kind: done, failed, "
	      "retried,\n"
	      "                         wait and run time p50/p95/p99\n"
	      "  pause QUEUE [--kind K] [--wait [--timeout DUR]] [--json]\n"
	      "                         start no more jobs of QUEUE (of "
	      "kind K); --wait:\n"
	      "                         then wait until none is running\n"
	      "  resume QUEUE [--kind K] [--json]\n"
	      "                         start its jobs again\n"
	      "  limits [QUEUE] [--json]\n"
	      "                         paused and limited queues: limits, "
	      "running, tokens\n"
	      "  limits QUEUE [--set KEY=VALUE]... [--reset] [--weight "
	      "KEY=N]...\n"
	      "         [--json]\n"
	      "                         change them (KEY: global_concurrency,\n"
	      "                         per_key_concurrency, rate, burst, "
	      "rate_per_key,\n"
	      "                         burst_per_key, fair; VALUE none "
	      "removes one)\n"
	      "  workflow submit FILE [--json]\n"
	      "                         enqueue the workflow FILE describes "
	      "(- for stdin)\n"
	      "  workflow show ID [--json]\n"
	      "                         its steps, their states and "
	      "parents\n"
	      "  workflow cancel ID [--json]\n"
	      "                         cancel its steps that have not "
	      "started\n"
	      "  schedules [--json]     the schedules workers define: cron, "
	      "kind, queue,\n"
	      "                         enabled, last and next tick\n"
	      "  schedule run NAME [--json]\n"
	      "                         enqueue one job of it now (by the "
	      "scheduler)\n"
	      "  schedule enable|disable NAME [--json]\n"
	      "                         tick it again, or skip its ticks\n"
	      "  doctor [--json]        check the database's health (xmin "
	      "horizon, vacuum,\n"
	      "                         bloat, stuck jobs, jobs no worker "
	      "serves, stale\n"
	      "                         instances): OK, WARN or FAIL, each "
	      "with a fix;\n"
	      "                         exit 0 OK, 1 a warning, 2 a failure\n"
	      "  web [--listen ADDR:PORT]\n"
	      "                         the web console, in the foreground "
	      "(default\n"
	      "                         web.listen, else 127.0.0.1:8080)\n"
	      "  web --hash-password    read a password on stdin, print its "
	      "hash for\n"
	      "                         web.users\n"
	      "  version [--json]       print the version\n"
	      "\n"
	      "The database is --database, else database.conninfo of the "
	      "config (-c or\nPGJOBD_CONFIG), else the PG* environment.  "
	      "Durations: 500ms, 30s, 5m,\n2h, 7d.  Exit status: 0 done, 1 "
	      "failed, 2 usage, 78 config or schema.\n"
	      "--json: stdout is JSON only, one value per line; errors stay "
	      "on stderr.\n",
	      f);
}

/* {"version": N, "name": "..."} of a migration. */
static cJSON *
migration_json(const struct migration *m)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "version", m->version);
	cJSON_AddStringToObject(o, "name", m->name);
	return o;
}

/*
 * migrate --status --json: the database's version, this pgjob's, and every
 * migration this pgjob has with whether the database has it.
 */
static void
migrate_status_json(int version)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "schema_version", version);
	cJSON_AddNumberToObject(o, "latest", migrate_latest());
	cJSON_AddBoolToObject(o, "database_newer", version > migrate_latest());
	cJSON *list = cJSON_AddArrayToObject(o, "migrations");
	for (int i = 0; i < migrate_count; i++) {
		cJSON *m = migration_json(&migrate_list[i]);
		cJSON_AddBoolToObject(m, "applied",
				      migrate_list[i].version <= version);
		cJSON_AddItemToArray(list, m);
	}
	cli_json_print(o);
}

/* migrate --json: the migrations just applied, the last `applied` ones of
 * migrate_list (migrate_run() applies them in order up to the latest). */
static void
migrate_applied_json(int applied)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "schema_version", migrate_latest());
	cJSON *list = cJSON_AddArrayToObject(o, "applied");
	for (int i = migrate_count - applied; i < migrate_count; i++)
		cJSON_AddItemToArray(list, migration_json(&migrate_list[i]));
	cli_json_print(o);
}

/* migrate --dry-run: one piece of SQL migrate would run, with its title. */
static void
print_sql(const char *title, const char *sql, void *arg)
{
	(void)arg;
	printf("-- %s\n%s\n", title, sql);
}

/*
 * migrate [--status | --dry-run] [--json]: --status prints the database's
 * schema version and the migrations this pgjob would apply; --dry-run
 * prints their SQL and changes nothing (SQL is its output: no --json).
 * Both exit 0.
 */
static int
cmd_migrate(struct cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{"status", no_argument, NULL, 's'},
		{"dry-run", no_argument, NULL, 'n'},
		{"json", no_argument, NULL, 'j'},
		{NULL, 0, NULL, 0},
	};
	int status = 0, dry = 0, json = 0, c;
	char *err;
	int applied, version = -1;

	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
		if (c == 's')
			status = 1;
		else if (c == 'n')
			dry = 1;
		else if (c == 'j')
			json = 1;
		else
			return cli_bad_option("migrate", c, argv);
	}
	if (optind < argc)
		return cli_fail(CLI_EXIT_USAGE,
				"migrate: unexpected argument \"%s\"",
				argv[optind]);
	if (status && dry)
		return cli_fail(CLI_EXIT_USAGE, "migrate: %s",
				"--status and --dry-run exclude each other");
	if (dry && json)
		return cli_fail(CLI_EXIT_USAGE, "migrate: %s",
				"--dry-run prints SQL: it has no --json");
	struct db_conn *conn = cli_connect(cli);
	if (!conn)
		return 1;
	if (status || dry) {
		migrate_check(conn, &version, &err);
		db_close(conn);
		if (version < 0) {
			cli_fail(CLI_EXIT_FAILED, "migrate: %s",
				 err ? err : "cannot read the schema version");
			free(err);
			return CLI_EXIT_FAILED;
		}
		free(err);
		if (json) {
			migrate_status_json(version);
			return 0;
		}
		if (status)
			printf("schema version %d; this pgjob applies up to "
			       "%d\n",
			       version, migrate_latest());
		if (status) {
			for (int i = version; i < migrate_count; i++)
				printf("pending: %d %s\n",
				       migrate_list[i].version,
				       migrate_list[i].name);
		} else {
			migrate_plan(version, print_sql, NULL);
		}
		if (version > migrate_latest())
			printf("the database is newer than this pgjob\n");
		return 0;
	}
	int rc = migrate_run(conn, &applied, &err);
	db_close(conn);
	if (rc < 0) {
		cli_fail(CLI_EXIT_FAILED, "migrate: %s", err);
		free(err);
		return 1;
	}
	if (json)
		migrate_applied_json(applied);
	else if (applied)
		printf("migrated to schema version %d (%d applied)\n",
		       migrate_latest(), applied);
	else
		printf("schema is up to date (version %d)\n", migrate_latest());
	return 0;
}

enum {
	OPT_QUEUE = 256,
	OPT_RUN_AT,
	OPT_IN,
	OPT_PRIORITY,
	OPT_UNIQUE,
	OPT_ORDERING,
	OPT_MAX_ATTEMPTS,
	OPT_LIMIT_KEY,
	OPT_COST,
	OPT_AFTER,
	OPT_ON_PARENT_FAILURE,
	OPT_JSON,
	OPT_FILE
};

static const struct option enqueue_opts[] = {
	{"queue", required_argument, NULL, OPT_QUEUE},
	{"run-at", required_argument, NULL, OPT_RUN_AT},
	{"in", required_argument, NULL, OPT_IN},
	{"priority", required_argument, NULL, OPT_PRIORITY},
	{"unique-key", required_argument, NULL, OPT_UNIQUE},
	{"ordering-key", required_argument, NULL, OPT_ORDERING},
	{"max-attempts", required_argument, NULL, OPT_MAX_ATTEMPTS},
	{"limit-key", required_argument, NULL, OPT_LIMIT_KEY},
	{"cost", required_argument, NULL, OPT_COST},
	{"after", required_argument, NULL, OPT_AFTER},
	{"on-parent-failure", required_argument, NULL, OPT_ON_PARENT_FAILURE},
	{"json", no_argument, NULL, OPT_JSON},
	{"file", required_argument, NULL, OPT_FILE},
	{NULL, 0, NULL, 0},
};

/* The parameters of one enqueue, as text ($1..$13). */
struct enqueue_args {
	const char *p[13]; /* kind payload queue run_at in_ms priority
			      max_attempts unique_key ordering_key limit_key
			      cost depends_on on_parent_failure */
	char in_ms[24], priority[8], max_attempts[12], cost[12];
	char *after;	  /* "{1,2,3}", owned */
	const char *file; /* --file: JSON Lines (cli_enqueue_file.c) */
	int json;
};

/*
 * --after 12,15: job ids, as the array literal "{12,15}" in a->after; -1
 * when the list is not ids.
 */
static int
parse_after(const char *list, struct enqueue_args *a)
{
	size_t n = strlen(list);
	if (n == 0)
		return -1;
	free(a->after);
	a->after = xmalloc(n + 3);
	char *w = a->after;
	*w++ = '{';
	for (const char *s = list; *s;) {
		const char *e = s;
		while (*e >= '0' && *e <= '9')
			e++;
		if (e == s || e - s > 18 || (*e && *e != ','))
			return -1;
		memcpy(w, s, (size_t)(e - s));
		w += e - s;
		if (!*e)
			break;
		*w++ = ',';
		s = e + 1;
		if (!*s)
			return -1;
	}
	*w++ = '}';
	*w = 0;
	a->p[11] = a->after;
	return 0;
}

static int
enqueue_parse(int argc, char **argv, struct enqueue_args *a)
{
	int64_t ms;
	const char *why;
	long v;
	int c;

	/* optind 0 resets GNU getopt, which then permutes: options may come
	 * before or after KIND and JSON. */
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "", enqueue_opts, NULL)) != -1) {
		switch (c) {
		case OPT_QUEUE:
			a->p[2] = optarg;
			break;
		case OPT_RUN_AT:
			a->p[3] = optarg;
			break;
		case OPT_IN:
			if (duration_parse(optarg, &ms, &why) < 0)
				return cli_fail(
					CLI_EXIT_USAGE,
					"enqueue: bad --in \"%s\" (use 500ms, "
					"30s, 5m, 2h, 7d)",
					optarg);
			snprintf(a->in_ms, sizeof(a->in_ms), "%lld",
				 (long long)ms);
			a->p[4] = a->in_ms;
			break;
		case OPT_PRIORITY:
			if (cli_parse_int(optarg, -32768, 32767, &v) < 0)
				return cli_fail(
					CLI_EXIT_USAGE,
					"enqueue: bad --priority "
					"\"%s\" (an integer from -32768 to "
					"32767)",
					optarg);
			snprintf(a->priority, sizeof(a->priority), "%ld", v);
			a->p[5] = a->priority;
			break;
		case OPT_MAX_ATTEMPTS:
			if (cli_parse_int(optarg, 1, 1000000, &v) < 0)
				return cli_fail(
					CLI_EXIT_USAGE,
					"enqueue: bad "
					"--max-attempts \"%s\" (an integer "
					">= 1)",
					optarg);
			snprintf(a->max_attempts, sizeof(a->max_attempts),
				 "%ld", v);
			a->p[6] = a->max_attempts;
			break;
		case OPT_UNIQUE:
			a->p[7] = optarg;
			break;
		case OPT_ORDERING:
			a->p[8] = optarg;
			break;
		case OPT_LIMIT_KEY:
			a->p[9] = optarg;
			break;
		case OPT_COST:
			if (cli_parse_int(optarg, 0, 1000000, &v) < 0)
				return cli_fail(
					CLI_EXIT_USAGE,
					"enqueue: bad --cost \"%s\" (an "
					"integer from 0 to 1000000)",
					optarg);
			snprintf(a->cost, sizeof(a->cost), "%ld", v);
			a->p[10] = a->cost;
			break;
		case OPT_AFTER:
			if (parse_after(optarg, a) < 0)
				return cli_fail(
					CLI_EXIT_USAGE,
					"enqueue: bad --after \"%s\" (job "
					"ids separated by commas)",
					optarg);
			break;
		case OPT_ON_PARENT_FAILURE:
			if (strcmp(optarg, "cancel") != 0 &&
			    strcmp(optarg, "run") != 0 &&
			    strcmp(optarg, "wait") != 0)
				return cli_fail(
					CLI_EXIT_USAGE,
					"enqueue: bad --on-parent-failure "
					"\"%s\" (cancel, run or wait)",
					optarg);
			a->p[12] = optarg;
			break;
		case OPT_JSON:
			a->json = 1;
			break;
		case OPT_FILE:
			a->file = optarg;
			break;
		default:
			return cli_fail(CLI_EXIT_USAGE,
					"enqueue: unknown option \"%s\"",
					argv[optind - 1]);
		}
	}
	if (a->file) {
		/* Each line has its own kind, payload and options. */
		int other = optind < argc;
		for (int i = 2; i < 13; i++)
			other |= a->p[i] != NULL;
		if (other)
			return cli_fail(CLI_EXIT_USAGE, "enqueue: %s",
					"--file takes no KIND, JSON or job "
					"option (each line has its own)");
		return 0;
	}
	if (a->p[3] && a->p[4])
		return cli_fail(CLI_EXIT_USAGE, "enqueue: %s",
				"--run-at and --in "
				"exclude each other");
	if (a->p[12] && !a->p[11])
		return cli_fail(CLI_EXIT_USAGE, "enqueue: %s",
				"--on-parent-failure needs --after");
	if (optind >= argc)
		return cli_fail(CLI_EXIT_USAGE, "enqueue: %s", "missing KIND");
	a->p[0] = argv[optind++];
	if (!*a->p[0])
		return cli_fail(CLI_EXIT_USAGE, "enqueue: %s",
				"KIND must not be empty");
	a->p[1] = optind < argc ? argv[optind++] : "{}";
	if (optind < argc)
		return cli_fail(CLI_EXIT_USAGE,
				"enqueue: unexpected argument \"%s\"",
				argv[optind]);
	cJSON *json = cJSON_Parse(a->p[1]);
	int object = cJSON_IsObject(json);
	cJSON_Delete(json);
	if (!json)
		return cli_fail(CLI_EXIT_USAGE,
				"enqueue: payload is not valid JSON: %s",
				a->p[1]);
	if (!object)
		return cli_fail(CLI_EXIT_USAGE,
				"enqueue: payload must be a JSON object: "
				"%s",
				a->p[1]);
	return 0;
}

#define ENQUEUE_CALL                                                           \
	"select pgjob.enqueue($1, $2::jsonb,"                                  \
	" queue => coalesce($3, 'default'),"                                   \
	" run_at => coalesce($4::timestamptz, now() +"                         \
	"  coalesce($5::bigint, 0) * interval '1 millisecond'),"               \
	" priority => coalesce($6::int, 0),"                                   \
	" max_attempts => $7::int,"                                            \
	" unique_key => $8, ordering_key => $9,"                               \
	" limit_key => $10, cost => coalesce($11::int, 1),"                    \
	" depends_on => $12::bigint[], on_parent_failure => $13) as id"

static const char ENQUEUE_SQL[] = ENQUEUE_CALL;

/*
 * The enqueue, and whether this role may read pgjob.jobs: the enqueue-only
 * role of docs/security.md may not, and must still be able to enqueue.
 */
static const char ENQUEUE_CHECK_SQL[] =
	ENQUEUE_CALL ", has_table_privilege('pgjob.jobs', 'select')"
		     " as can_check";

/*
 * Whether job $1 is another transaction's: pgjob.enqueue() returned the
 * unfinished job that holds the unique_key, and inserted nothing.  A row
 * this transaction inserted has its xid as xmin.  NULL when the row is not
 * visible (row security).
 */
static const char EXISTING_SQL[] =
	"select (select xmin <> pg_current_xact_id()::xid"
	" from pgjob.jobs where id = $1) as existing";

/*
 * After an enqueue: a warning on stderr when the job's queue is one that no
 * live worker serves, which is most often a typo (--queue defualt) and
 * otherwise leaves the job waiting in silence.  pgjob.queue_served()
 * (sql/032) says null while no worker is live at all: then every queue
 * would be unknown, and the warning would only be noise (workers down for
 * a deploy, an enqueue before the first start); pgjob status and pgjob
 * doctor report the jobs.  A schema without the function, or a role that
 * may not call it, gets no warning: the job is enqueued all the same.
 */
static void
warn_unserved(struct db_conn *conn, const char *queue, const char *id)
{
	const char *q = queue ? queue : "default";
	const char *p[] = {q};
	char *err = NULL;
	struct db_rows *r =
		db_query(conn, "select pgjob.queue_served($1)", 1, p, &err);
	if (r && db_rows_count(r) == 1 && db_rows_value(r, 0, 0) &&
	    db_rows_text(r, 0, 0)[0] == 'f')
		fprintf(stderr,
			"pgjob: warning: no live worker serves queue \"%s\": "
			"job %s waits until one does (a typo? pgjob status "
			"lists the jobs no worker serves)\n",
			q, id);
	db_rows_free(r);
	free(err);
}

/*
 * enqueue --json: {"id": N, "existing": false}, existing true when the id
 * is that of the job that holds --unique-key.  Without --unique-key nothing
 * can exist already: one statement.  With it, the enqueue and the check run
 * in one transaction, so that the check can tell; a role that may not read
 * pgjob.jobs still enqueues, and gets "existing": null.
 */
static int
enqueue_json(struct db_conn *conn, const struct enqueue_args *a)
{
	struct db_rows *res, *ex = NULL, *done;
	cJSON *o;

	if (!a->p[7]) {
		if (!(res = cli_exec(conn, "enqueue", ENQUEUE_SQL, 13, a->p)))
			return cli_abort(conn);
		o = cJSON_CreateObject();
		cli_json_add_columns(o, res, 0, 0, 1);
		cJSON_AddFalseToObject(o, "existing");
		goto print;
	}
	if (!(res = cli_exec(conn, "enqueue", "begin", 0, NULL)))
		return cli_abort(conn);
	db_rows_free(res);
	if (!(res = cli_exec(conn, "enqueue", ENQUEUE_CHECK_SQL, 13, a->p)))
		return cli_abort(conn);
	if (db_rows_text(res, 0, 1)[0] == 't') {
		const char *p[] = {db_rows_text(res, 0, 0)};
		if (!(ex = cli_exec(conn, "enqueue", EXISTING_SQL, 1, p)))
			goto fail;
	}
	if (!(done = cli_exec(conn, "enqueue", "commit", 0, NULL)))
		goto fail;
	db_rows_free(done);
	o = cJSON_CreateObject();
	cli_json_add_columns(o, res, 0, 0, 1);
	if (ex)
		cli_json_add_columns(o, ex, 0, 0, 1);
	else
		cJSON_AddNullToObject(o, "existing");
print:
	warn_unserved(conn, a->p[2], db_rows_text(res, 0, 0));
	cli_json_print(o);
	db_rows_free(ex);
	db_rows_free(res);
	db_close(conn);
	return 0;
fail:
	db_rows_free(ex);
	db_rows_free(res);
	return cli_abort(conn);
}

static int
cmd_enqueue(struct cli *cli, int argc, char **argv)
{
	struct enqueue_args a = {0};
	int rc = enqueue_parse(argc, argv, &a);
	if (rc) {
		free(a.after);
		return rc;
	}

	if (a.file)
		return cli_enqueue_file(cli, a.file, a.json);
	struct db_conn *conn = cli_connect(cli);
	if (!conn) {
		free(a.after);
		return 1;
	}
	if (a.json) {
		rc = enqueue_json(conn, &a);
		free(a.after);
		return rc;
	}
	struct db_rows *res = cli_exec(conn, "enqueue", ENQUEUE_SQL, 13, a.p);
	if (res) {
		printf("%s\n", db_rows_text(res, 0, 0));
		warn_unserved(conn, a.p[2], db_rows_text(res, 0, 0));
	}
	rc = res ? 0 : CLI_EXIT_FAILED;
	db_rows_free(res);
	db_close(conn);
	free(a.after);
	return rc;
}

static const struct {
	const char *name;
	int (*run)(struct cli *, int, char **);
	int needs_config; /* 0: config optional */
} commands[] = {
	{"migrate", cmd_migrate, 0},	   {"enqueue", cmd_enqueue, 0},
	{"status", cli_status_run, 0},	   {"jobs", cli_jobs_list, 0},
	{"show", cli_jobs_show, 0},	   {"retry", cli_state_retry, 0},
	{"cancel", cli_state_cancel, 0},   {"prune", cli_prune_run, 0},
	{"top", cli_top_run, 0},	   {"pause", cli_pause_run, 0},
	{"resume", cli_pause_resume, 0},   {"limits", cli_limits_run, 0},
	{"workflow", cli_workflow_run, 0}, {"doctor", cli_doctor_run, 0},
	{"schedules", cli_schedule_ls, 0}, {"schedule", cli_schedule_run, 0},
	{"web", cli_web_run, 0},	   {"stats", cli_stats_run, 0},
};

/*
 * pgjob COMMAND --help: the lines of the usage that are about COMMAND (a
 * line "  COMMAND ..." and the deeper-indented lines that go on from it),
 * then where the rest is.
 */
static void
usage_command(FILE *f, const char *cmd)
{
	char *text = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&text, &len);
	if (!m) {
		usage(f);
		return;
	}
	usage(m);
	fclose(m);
	size_t n = strlen(cmd);
	int in = 0;
	fputs("usage: pgjob [-c FILE] [--database CONNINFO] ...\n\n", f);
	for (char *line = text, *end; line && *line; line = end) {
		end = strchr(line, '\n');
		if (end)
			*end++ = '\0';
		if (strncmp(line, "  ", 2) == 0 && line[2] != ' ')
			in = strncmp(line + 2, cmd, n) == 0 &&
			     (line[2 + n] == ' ' || line[2 + n] == '\0');
		else if (strncmp(line, "   ", 3) != 0)
			in = 0;
		if (in)
			fprintf(f, "%s\n", line);
	}
	fputs("\nThe whole usage: pgjob --help; each command: docs/cli.md.\n",
	      f);
	free(text);
}

/* 1 when the arguments of a command ask for help (before any "--"). */
static int
wants_help(int argc, char **argv)
{
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
		if (strcmp(argv[i], "--help") == 0 ||
		    strcmp(argv[i], "-h") == 0)
			return 1;
	return 0;
}

static int
load_config(struct cli *cli)
{
	struct config_errors errs = {0};

	if (!cli->config_path)
		cli->config_path = getenv("PGJOBD_CONFIG");
	if (!cli->config_path || !*cli->config_path)
		return 0;
	config_set_conninfo_check(db_conninfo_valid);
	/* Not the sections: their secrets are the handlers'. */
	cli->cfg = config_load_settings(cli->config_path, &errs);
	if (cli->cfg)
		return 0;
	for (size_t i = 0; i < errs.n; i++)
		fprintf(stderr, "%s\n", errs.msg[i]);
	config_errors_free(&errs);
	return EXIT_CONFIG;
}

static void
print_version(void)
{
	printf("pgjob %s (schema version %d)\n", PGJOBD_VERSION,
	       migrate_latest());
}

/*
 * version [--json]: {"version": "0.1.0", "schema_version": 11}, the schema
 * version this pgjob is built for.  -V stays text only, as for every
 * program: scripts use `pgjob version --json`.
 */
static int
cmd_version(int argc, char **argv)
{
	int json = 0;
	int rc = cli_parse_json_only("version", argc, argv, &json);
	if (rc)
		return rc;
	if (optind < argc)
		return cli_fail(CLI_EXIT_USAGE,
				"version: unexpected argument \"%s\"",
				argv[optind]);
	if (!json) {
		print_version();
		return 0;
	}
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "version", PGJOBD_VERSION);
	cJSON_AddNumberToObject(o, "schema_version", migrate_latest());
	cli_json_print(o);
	return 0;
}

/*
 * With databases: in the config, --database NAME picks one of them (its
 * conninfo replaces the name); a conninfo ("key=value ...", or a URI) is
 * used as without them, and anything else is a name that is not there.  Without
 * --database, a config of one database uses it, status shows every one
 * (cli_status.c), and other commands need a pick. Returns 0 or the exit code
 * after saying why.
 */
static int
resolve_database(struct cli *cli, const char *command)
{
	const struct config *c = cli->cfg;

	if (!c || c->ndatabases == 0)
		return 0;
	if (cli->database) {
		const struct database_conf *d =
			config_database(c, cli->database);
		if (d) {
			free(cli->database);
			cli->database = xstrdup(d->conninfo);
			return 0;
		}
		/* A conninfo has a '=' ("dbname=x") or is a URI; anything
		 * else meant a name, mistyped. */
		if (strchr(cli->database, '=') || strstr(cli->database, "://"))
			return 0;
		goto unknown;
	}
	if (c->ndatabases == 1) {
		cli->database = xstrdup(c->databases[0].conninfo);
		return 0;
	}
	if (strcmp(command, "status") == 0)
		return 0;
unknown:;
	struct buf names = {0};
	for (size_t i = 0; i < c->ndatabases; i++)
		buf_appendf(&names, "%s%s", i ? ", " : "",
			    c->databases[i].name);
	if (cli->database)
		cli_fail(CLI_EXIT_USAGE, "no database %s in %s (names: %s)",
			 cli->database, cli->config_path, names.data);
	else
		cli_fail(CLI_EXIT_USAGE,
			 "%s: %s names several databases (%s): pick one "
			 "with --database NAME",
			 command, cli->config_path, names.data);
	buf_free(&names);
	return CLI_EXIT_USAGE;
}

/* Runs the command argv[0]; returns the exit code. */
static int
dispatch(struct cli *cli, int argc, char **argv)
{
	int rc;

	if (strcmp(argv[0], "version") == 0) {
		if (wants_help(argc, argv)) {
			usage_command(stdout, argv[0]);
			return 0;
		}
		return cmd_version(argc, argv);
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		if (strcmp(argv[0], commands[i].name) != 0)
			continue;
		if (wants_help(argc, argv)) {
			usage_command(stdout, argv[0]);
			return 0;
		}
		if ((rc = load_config(cli)) != 0)
			return rc;
		if ((rc = resolve_database(cli, argv[0])) == 0)
			rc = commands[i].run(cli, argc, argv);
		config_free(cli->cfg);
		return rc;
	}
	cli_fail(CLI_EXIT_USAGE, "unknown command \"%s\"", argv[0]);
	usage(stderr);
	return CLI_EXIT_USAGE;
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"config", required_argument, NULL, 'c'},
		{"database", required_argument, NULL, 'd'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	struct cli cli = {0};
	char *database = NULL;
	int c, rc;

	log_init("pgjob", LOG_WARN, 0);
	failpoint_init();
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+c:d:hV", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			cli.config_path = optarg;
			break;
		case 'd':
			/* Only the last one counts: hide the ones before. */
			conninfo_scrub(database);
			database = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			print_version();
			return 0;
		default:
			cli_fail(CLI_EXIT_USAGE, "unknown option \"%s\"",
				 argv[optind - 1]);
			usage(stderr);
			return CLI_EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return CLI_EXIT_USAGE;
	}
	/*
	 * ps shows argv to every local user while a command runs (top runs
	 * for hours): keep a copy of --database and overwrite its secrets in
	 * argv (docs/security.md).
	 */
	cli.database = xstrdup(database);
	conninfo_scrub(database);
	rc = dispatch(&cli, argc - optind, argv + optind);
	free(cli.database);
	return rc;
}
