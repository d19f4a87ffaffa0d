/*
 * pgjob: the operator's command line.
 *
 *   pgjob [-c FILE] [--database CONNINFO] COMMAND [ARGS]
 *
 * The database comes from --database, else the config file's
 * database.conninfo, else libpq's PG* environment.  Exit codes: 0 done,
 * 1 the command failed (unknown id, wrong state, database error), 2 usage,
 * 78 config or schema.
 * migrate lives here; the other commands in cli_*.c (cli.h).
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
	      "cancel|run|wait]]\n"
	      "          [--traceparent TP] [--json]\n"
	      "                         enqueue a job and print its id\n"
	      "  enqueue --file FILE [--json]\n"
	      "                         enqueue the jobs of FILE (- for "
	      "stdin), one JSON\n"
	      "                         object per line, all or none; "
	      "print their ids\n"
	      "  status [--json] [--exact]\n"
	      "                         workers, queues, jobs no live worker "
	      "serves\n"
	      "                         (kind and queue), leases; --exact: "
	      "every job counted\n"
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

static const struct {
	const char *name;
	int (*run)(struct cli *, int, char **);
	int needs_config; /* 0: config optional */
} commands[] = {
	{"migrate", cmd_migrate, 0},	   {"enqueue", cli_enqueue_run, 0},
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
