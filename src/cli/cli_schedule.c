/*
 * cli_schedule: `pgjob schedules [--json]` lists every schedule that a
 * worker defines, with its state; `pgjob schedule run|enable|disable NAME
 * [--json]` steers one, as the web console does (docs/schedules.md,
 * "Steering a schedule").
 *
 * The definitions come from the workers' rows (pgjob.workers.schedules),
 * the state from pgjob.schedules, both through the view
 * pgjob.schedule_list (sql/upgrade/014_console_state.sql).  The next tick is
 * worked out here, by the cron code the scheduler uses: the first tick after
 * the last one enqueued (or, before the first, after now).  A next tick in the
 * past is a tick due that no scheduler has enqueued yet: no worker holds
 * the scheduler lease, or its round is about to.
 *
 * The controls are SQL functions (pgjob.schedule_run(),
 * pgjob.schedule_enable()) that refuse a name no worker defines, and make
 * the schedule's row if it has not ticked yet.  The scheduler lease's
 * holder acts on them at its next round (a second apart): a run asked for
 * is enqueued once across the cluster, fenced by its lease token.
 */
#include "cli/cli.h"

#include <stdlib.h>
#include <string.h>

#include "common/cron.h"
#include "common/util.h"

/* Column numbers of LIST_SQL. */
enum {
	L_NAME,
	L_CRON,
	L_KIND,
	L_QUEUE,
	L_TIMEZONE,
	L_ENABLED,
	L_LAST_TICK,
	L_RUN_REQUESTED,
	L_NOW,
	L_DEFINER
};

static const char LIST_SQL[] =
	"select name, cron, kind, queue, timezone, enabled,"
	"  extract(epoch from last_tick)::bigint, run_requested_at,"
	"  floor(extract(epoch from now()))::bigint, definer"
	" from pgjob.schedule_list order by name";

static const char RUN_SQL[] = "select pgjob.schedule_run($1)";
static const char ENABLE_SQL[] = "select pgjob.schedule_enable($1, $2)";

/*
 * The next tick of row r of LIST_SQL into *next (Unix seconds): 0, or -1
 * when it has none (disabled, no worker defines it, no tick within the
 * cron horizon, a time zone this host lacks).
 */
static int
next_tick(const struct db_rows *res, int r, int64_t *next)
{
	const char *cron = db_rows_value(res, r, L_CRON);
	const char *last = db_rows_value(res, r, L_LAST_TICK);
	char *err = NULL;

	if (!cron || strcmp(db_rows_text(res, r, L_ENABLED), "t") != 0)
		return -1;
	struct cron *c = cron_parse(cron, &err);
	free(err);
	if (!c)
		return -1;
	int64_t from = atoll(last ? last : db_rows_text(res, r, L_NOW));
	int rc = cron_next(c, db_rows_value(res, r, L_TIMEZONE), from, next);
	cron_free(c);
	return rc;
}

/* A tick as RFC 3339 UTC ("2026-12-01T10:00:00Z") into buf; NULL for
 * none. */
static const char *
format_tick(int has, int64_t t, char buf[CRON_TIME_LEN])
{
	if (!has)
		return NULL;
	cron_format_utc(t, buf);
	return buf;
}

/* Column col of row r as a JSON string, or null. */
static cJSON *
json_text(const struct db_rows *res, int r, int col)
{
	const char *v = db_rows_value(res, r, col);
	return v ? cli_json_string(v) : cJSON_CreateNull();
}

/*
 * --json: {"schedules": [{"name", "cron", "kind", "queue", "timezone",
 * "enabled", "last_tick", "next_tick", "run_requested_at", "definer"}]},
 * as the console's /api/schedules has them.
 */
static void
print_json(const struct db_rows *res)
{
	cJSON *o = cJSON_CreateObject();
	cJSON *a = cJSON_AddArrayToObject(o, "schedules");
	char last[CRON_TIME_LEN], next[CRON_TIME_LEN];
	for (int r = 0; r < db_rows_count(res); r++) {
		cJSON *s = cJSON_CreateObject();
		int64_t n;
		const char *lt = db_rows_value(res, r, L_LAST_TICK);
		const char *l =
			format_tick(lt != NULL, lt ? atoll(lt) : 0, last);
		int has_next = next_tick(res, r, &n) == 0;
		const char *x = format_tick(has_next, n, next);
		cJSON_AddItemToObject(s, "name", json_text(res, r, L_NAME));
		cJSON_AddItemToObject(s, "cron", json_text(res, r, L_CRON));
		cJSON_AddItemToObject(s, "kind", json_text(res, r, L_KIND));
		cJSON_AddItemToObject(s, "queue", json_text(res, r, L_QUEUE));
		cJSON_AddItemToObject(s, "timezone",
				      json_text(res, r, L_TIMEZONE));
		cJSON_AddItemToObject(s, "enabled",
				      cli_json_value(res, r, L_ENABLED));
		cJSON_AddItemToObject(s, "last_tick",
				      l ? cJSON_CreateString(l)
					: cJSON_CreateNull());
		cJSON_AddItemToObject(s, "next_tick",
				      x ? cJSON_CreateString(x)
					: cJSON_CreateNull());
		cJSON_AddItemToObject(s, "run_requested_at",
				      cli_json_value(res, r, L_RUN_REQUESTED));
		cJSON_AddItemToObject(s, "definer",
				      json_text(res, r, L_DEFINER));
		cJSON_AddItemToArray(a, s);
	}
	cli_json_print(o);
}

static void
print_table(const struct db_rows *res)
{
	static const char *const head[] = {"NAME",     "CRON",	  "KIND",
					   "QUEUE",    "ENABLED", "LAST TICK",
					   "NEXT TICK"};
	struct cli_table t;
	char last[CRON_TIME_LEN], next[CRON_TIME_LEN];

	if (db_rows_count(res) == 0) {
		printf("no schedules: no worker's config defines one\n");
		return;
	}
	cli_table_init(&t, 7, head, "lllllll");
	for (int r = 0; r < db_rows_count(res); r++) {
		int64_t n;
		const char *lt = db_rows_value(res, r, L_LAST_TICK);
		const char *tz = db_rows_value(res, r, L_TIMEZONE);
		const char *cron = db_rows_value(res, r, L_CRON);
		int enabled = strcmp(db_rows_text(res, r, L_ENABLED), "t") == 0;
		int has_next = next_tick(res, r, &n) == 0;
		char *c = cron && tz ? xasprintf("%s (%s)", cron, tz)
				     : xstrdup(cron ? cron : "not defined");
		const char *row[] = {
			db_rows_text(res, r, L_NAME),
			c,
			db_rows_value(res, r, L_KIND),
			db_rows_value(res, r, L_QUEUE),
			!enabled ? "no"
			: db_rows_value(res, r, L_RUN_REQUESTED)
				? "yes, run asked for"
				: "yes",
			format_tick(lt != NULL, lt ? atoll(lt) : 0, last),
			format_tick(has_next, n, next),
		};
		cli_table_add(&t, row);
		free(c);
	}
	cli_table_print(&t, stdout, "");
}

int
cli_schedule_ls(struct cli *cli, int argc, char **argv)
{
	struct db_conn *conn;
	int json = 0;
	int rc = cli_parse_json_only("schedules", argc, argv, &json);

	if (rc != 0)
		return rc;
	if (optind < argc) {
		char *a = cli_one_line(argv[optind], 40);
		rc = cli_fail(CLI_EXIT_USAGE,
			      "schedules: unexpected argument \"%s\"", a);
		free(a);
		return rc;
	}
	if ((rc = cli_open(cli, &conn)) != 0)
		return rc;
	struct db_rows *res = cli_exec(conn, "schedules", LIST_SQL, 0, NULL);
	if (!res)
		return cli_abort(conn);
	if (json)
		print_json(res);
	else
		print_table(res);
	db_rows_free(res);
	db_close(conn);
	return 0;
}

/* schedule run NAME: the request's time, as the database has it. */
static int
run_now(struct db_conn *conn, const char *name, int json)
{
	const char *p[] = {name};
	struct db_rows *res = cli_exec(conn, "schedule run", RUN_SQL, 1, p);
	if (!res)
		return cli_abort(conn);
	if (json) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddItemToObject(o, "schedule", cli_json_string(name));
		cJSON_AddItemToObject(o, "run_requested_at",
				      cli_json_value(res, 0, 0));
		cli_json_print(o);
	} else {
		char *n = cli_one_line(name, SIZE_MAX), ts[64];
		printf("schedule %s: run asked for at %s; the scheduler "
		       "enqueues one job of it at its next round\n",
		       n,
		       cli_format_time(db_rows_text(res, 0, 0), ts,
				       sizeof(ts)));
		free(n);
	}
	db_rows_free(res);
	db_close(conn);
	return 0;
}

/* schedule enable|disable NAME. */
static int
set_enabled(struct db_conn *conn, const char *name, int enabled, int json)
{
	const char *p[] = {name, enabled ? "true" : "false"};
	const char *what = enabled ? "schedule enable" : "schedule disable";
	struct db_rows *res = cli_exec(conn, what, ENABLE_SQL, 2, p);
	if (!res)
		return cli_abort(conn);
	int was = strcmp(db_rows_text(res, 0, 0), "t") == 0;
	if (json) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddItemToObject(o, "schedule", cli_json_string(name));
		cJSON_AddBoolToObject(o, "enabled", enabled);
		cJSON_AddBoolToObject(o, "was_enabled", was);
		cli_json_print(o);
	} else {
		char *n = cli_one_line(name, SIZE_MAX);
		if (was == enabled)
			printf("schedule %s was already %s\n", n,
			       enabled ? "enabled" : "disabled");
		else if (enabled)
			printf("schedule %s enabled: it ticks again from its "
			       "next tick on\n",
			       n);
		else
			printf("schedule %s disabled: its ticks are skipped "
			       "until it is enabled\n",
			       n);
		free(n);
	}
	db_rows_free(res);
	db_close(conn);
	return 0;
}

int
cli_schedule_run(struct cli *cli, int argc, char **argv)
{
	static const char *const subs[] = {"run", "enable", "disable"};
	struct db_conn *conn;
	int json = 0, rc, sub = -1;

	if (argc < 2)
		return cli_fail(CLI_EXIT_USAGE, "%s",
				"schedule: run NAME, enable NAME or disable "
				"NAME");
	for (int i = 0; i < 3; i++)
		if (strcmp(argv[1], subs[i]) == 0)
			sub = i;
	if (sub < 0) {
		char *s = cli_one_line(argv[1], 40);
		rc = cli_fail(CLI_EXIT_USAGE,
			      "schedule: unknown subcommand \"%s\" (run, "
			      "enable, disable)",
			      s);
		free(s);
		return rc;
	}
	char *cmd = xasprintf("schedule %s", subs[sub]);
	rc = cli_parse_json_only(cmd, argc - 1, argv + 1, &json);
	if (rc == 0 && optind != argc - 2)
		rc = cli_fail(CLI_EXIT_USAGE, "%s: one schedule NAME", cmd);
	free(cmd);
	if (rc != 0)
		return rc;
	if ((rc = cli_open(cli, &conn)) != 0)
		return rc;
	const char *name = argv[1 + optind];
	if (sub == 0)
		return run_now(conn, name, json);
	return set_enabled(conn, name, sub == 1, json);
}
