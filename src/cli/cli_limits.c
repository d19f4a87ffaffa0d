/*
 * cli_limits: `pgjob limits [QUEUE] [--json]` shows the rows of
 * pgjob.queue_limits (sql/upgrade/010_flow_control.sql): which queues are
 * paused or limited, by what, and where they stand now.  With a QUEUE, it
 * changes them:
 *
 *   --set KEY=VALUE ...   pgjob.set_limits(): VALUE none removes a limit
 *   --reset               pgjob.reset_limits(): the configs' limits again
 *   --weight KEY=N ...    pgjob.set_key_weight(), for fair claims
 *
 * The changes run in one transaction.  The schema's functions check the
 * keys and values and say what is wrong; this file only builds the JSON
 * object that set_limits() takes, typing each value by its spelling.
 * With --json, a change prints the queue's limits and key weights after
 * it (print_change_json()).
 */
#include "cli/cli.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "db/jobctl.h"

/* Column numbers of SHOW_SQL. */
enum {
	L_QUEUE,
	L_PAUSED,
	L_PAUSED_KINDS,
	L_GLOBAL, /* the limits, named as the config's keys, from here ... */
	L_PER_KEY,
	L_RATE,
	L_BURST,
	L_RATE_PER_KEY,
	L_BURST_PER_KEY,
	L_FAIR, /* ... to here */
	L_SOURCE,
	L_RUNNING,
	L_TOKENS,
	L_THROTTLED,
	L_KINDS_TEXT, /* human output only */
};

/* $1: one queue, or null for all. */
static const char SHOW_SQL[] =
	"select queue, paused, array_to_json(paused_kinds) as paused_kinds,"
	"  global_concurrency, per_key_concurrency, rate, burst,"
	"  rate_per_key, burst_per_key, fair, source, running,"
	"  round(tokens::numeric, 3) as tokens, throttled_until,"
	"  array_to_string(paused_kinds, ', ')"
	" from pgjob.queue_limits"
	" where $1::text is null or queue = $1 order by queue";

struct limits_args {
	const char *queue;
	int json, reset;
	const char **set, **weight; /* argv's, n of each */
	int nset, nweight;
};

/* Refuses a --set argument that is not KEY=VALUE; 0 when it is. */
static int
bad_set(const char *arg)
{
	const char *eq = strchr(arg, '=');
	if (eq && eq > arg)
		return 0;
	return cli_fail(CLI_EXIT_USAGE,
			"limits: bad --set \"%s\" (KEY=VALUE, such as "
			"rate=10/s, or rate=none to remove it)",
			arg);
}

/* Refuses a --weight argument that is not KEY=N; 0 when it is.  The key
 * may hold "=" (keys are the application's): N follows the last one. */
static int
bad_weight(const char *arg)
{
	const char *eq = strrchr(arg, '=');
	long n;
	if (eq && cli_parse_int(eq + 1, 1, 1000, &n) == 0)
		return 0;
	return cli_fail(CLI_EXIT_USAGE,
			"limits: bad --weight \"%s\" (KEY=N, N from 1 to "
			"1000; 1 is the default)",
			arg);
}

static int
parse(int argc, char **argv, struct limits_args *a)
{
	static const struct option opts[] = {
		{"json", no_argument, NULL, 'j'},
		{"set", required_argument, NULL, 's'},
		{"reset", no_argument, NULL, 'r'},
		{"weight", required_argument, NULL, 'w'},
		{NULL, 0, NULL, 0},
	};
	int c;

	a->set = xcalloc((size_t)argc, sizeof(char *));
	a->weight = xcalloc((size_t)argc, sizeof(char *));
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			a->json = 1;
			break;
		case 'r':
			a->reset = 1;
			break;
		case 's':
			if (bad_set(optarg))
				return CLI_EXIT_USAGE;
			a->set[a->nset++] = optarg;
			break;
		case 'w':
			if (bad_weight(optarg))
				return CLI_EXIT_USAGE;
			a->weight[a->nweight++] = optarg;
			break;
		default:
			return cli_bad_option("limits", c, argv);
		}
	}
	if (optind < argc)
		a->queue = argv[optind++];
	if (optind < argc)
		return cli_fail(CLI_EXIT_USAGE,
				"limits: unexpected argument \"%s\"",
				argv[optind]);
	int change = a->nset || a->reset || a->nweight;
	if (change && !a->queue)
		return cli_fail(CLI_EXIT_USAGE,
				"limits: --set, --reset and --weight need a "
				"QUEUE");
	if (a->nset && a->reset)
		return cli_fail(CLI_EXIT_USAGE,
				"limits: --set and --reset exclude each other");
	return 0;
}

/* 1 when s is a whole number that a double holds exactly. */
static int
integer(const char *s)
{
	size_t n = strspn(s + (*s == '-'), "0123456789");
	return n > 0 && n <= 15 && s[n + (*s == '-')] == '\0';
}

/*
 * VALUE as JSON: none is null (the limit goes), true and false booleans,
 * a whole number a number, anything else a string ("10/s").  A value of
 * the wrong type for its key is then refused by pgjob.set_limits(), with
 * the key and what it takes.
 */
static cJSON *
json_value(const char *v)
{
	if (strcmp(v, "none") == 0)
		return cJSON_CreateNull();
	if (strcmp(v, "true") == 0 || strcmp(v, "false") == 0)
		return cJSON_CreateBool(v[0] == 't');
	if (integer(v))
		return cJSON_CreateNumber(strtod(v, NULL));
	return cJSON_CreateString(v);
}

/* The --set arguments as one object, the last of a key winning; caller
 * frees. */
static char *
limits_json(const struct limits_args *a)
{
	cJSON *o = cJSON_CreateObject();
	for (int i = 0; i < a->nset; i++) {
		const char *eq = strchr(a->set[i], '=');
		char *key = xstrndup(a->set[i], (size_t)(eq - a->set[i]));
		cJSON_DeleteItemFromObjectCaseSensitive(o, key);
		cJSON_AddItemToObject(o, key, json_value(eq + 1));
		free(key);
	}
	char *text = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	char *copy = xstrdup(text);
	cJSON_free(text);
	return copy;
}

/* Row row's limits in the config's syntax: "global_concurrency=5
 * rate=10/s burst=10", or NULL for none; caller frees. */
static char *
limits_text(const struct db_rows *res, int row)
{
	struct buf b = {0};
	for (int c = L_GLOBAL; c <= L_FAIR; c++) {
		const char *v = db_rows_value(res, row, c);
		int flag = db_rows_type(res, c) == DB_TYPE_BOOL;
		/* fair=false is no limit. */
		if (!v || (flag && v[0] == 'f'))
			continue;
		buf_appendf(&b, "%s%s=%s", b.len ? " " : "",
			    db_rows_name(res, c), flag ? "true" : v);
	}
	return b.data;
}

/* The PAUSED cell: yes, the kinds paused, or no. */
static const char *
paused_text(const struct db_rows *res, int row, char **kinds)
{
	*kinds = NULL;
	if (db_rows_text(res, row, L_PAUSED)[0] == 't')
		return "yes";
	const char *k = db_rows_text(res, row, L_KINDS_TEXT);
	if (!*k)
		return "no";
	*kinds = xasprintf("kinds %s", k);
	return *kinds;
}

static void
print_table(const struct db_rows *res)
{
	static const char *const head[] = {
		"QUEUE",   "PAUSED", "LIMITS",	       "SOURCE",
		"RUNNING", "TOKENS", "THROTTLED UNTIL"};
	struct cli_table t;

	cli_table_init(&t, 7, head, "llllrrl");
	for (int i = 0; i < db_rows_count(res); i++) {
		char *kinds, tokens[32], until[64];
		char *lim = limits_text(res, i);
		const char *tok = db_rows_value(res, i, L_TOKENS);
		const char *thr = db_rows_value(res, i, L_THROTTLED);
		if (tok)
			snprintf(tokens, sizeof(tokens), "%.1f",
				 strtod(tok, NULL));
		const char *row[] = {
			db_rows_text(res, i, L_QUEUE),
			paused_text(res, i, &kinds),
			lim,
			lim ? db_rows_text(res, i, L_SOURCE) : NULL,
			db_rows_text(res, i, L_RUNNING),
			tok ? tokens : NULL,
			thr ? cli_format_time(thr, until, sizeof(until))
			    : NULL};
		cli_table_add(&t, row);
		free(lim);
		free(kinds);
	}
	cli_table_print(&t, stdout, "");
}

static void
print_json(const struct db_rows *res)
{
	cJSON *a = cJSON_CreateArray();
	for (int i = 0; i < db_rows_count(res); i++) {
		cJSON *o = cJSON_CreateObject();
		cli_json_add_columns(o, res, i, 0, L_KINDS_TEXT);
		cJSON_AddItemToArray(a, o);
	}
	cli_json_print(a);
}

/* Prints the limits of a->queue, or of every queue that has a row. */
static int
show(struct db_conn *conn, const struct limits_args *a)
{
	const char *p[] = {a->queue};
	struct db_rows *res;
	if (a->queue) {
		/* A typo gets the known queues, not "no limits". */
		res = cli_exec(conn, "limits", "select pgjob.check_queue($1)",
			       1, p);
		if (!res)
			return CLI_EXIT_FAILED;
		db_rows_free(res);
	}
	if (!(res = cli_exec(conn, "limits", SHOW_SQL, 1, p)))
		return CLI_EXIT_FAILED;
	if (a->json) {
		print_json(res);
	} else if (db_rows_count(res) > 0) {
		print_table(res);
	} else if (a->queue) {
		char *q = cli_one_line(a->queue, SIZE_MAX);
		printf("queue %s has no limits and is not paused\n", q);
		free(q);
	} else {
		puts("no queue has limits or is paused");
	}
	db_rows_free(res);
	return 0;
}

/* Runs one statement of a change; 0, or -1 after printing why. */
static int
step(struct db_conn *conn, const char *sql, int n, const char *const *p)
{
	struct db_rows *res = cli_exec(conn, "limits", sql, n, p);
	db_rows_free(res);
	return res ? 0 : -1;
}

static int
set_limits(struct db_conn *conn, const struct limits_args *a)
{
	char *json = limits_json(a);
	const char *p[] = {a->queue, json};
	int rc = step(conn, jobctl_set_limits_sql, 2, p);
	free(json);
	return rc;
}

static int
set_weights(struct db_conn *conn, const struct limits_args *a)
{
	for (int i = 0; i < a->nweight; i++) {
		const char *eq = strrchr(a->weight[i], '=');
		char *key = xstrndup(a->weight[i], (size_t)(eq - a->weight[i]));
		const char *p[] = {a->queue, key, eq + 1};
		int rc = step(conn,
			      "select pgjob.set_key_weight(queue => $1,"
			      " key => $2, weight => $3::int)",
			      3, p);
		free(key);
		if (rc < 0)
			return -1;
	}
	return 0;
}

/* "limits of queue Q: ...", as they are now. */
static int
print_limits(struct db_conn *conn, const char *queue, const char *q)
{
	const char *p[] = {queue};
	struct db_rows *res = cli_exec(conn, "limits", SHOW_SQL, 1, p);
	if (!res)
		return -1;
	char *lim = db_rows_count(res) ? limits_text(res, 0) : NULL;
	char *safe = lim ? cli_one_line(lim, SIZE_MAX) : NULL;
	printf("limits of queue %s: %s\n", q, safe ? safe : "none");
	free(safe);
	free(lim);
	db_rows_free(res);
	return 0;
}

/* The key weights of queue $1 that are not the default 1. */
static const char WEIGHTS_SQL[] =
	"select coalesce(jsonb_object_agg(key, weight), '{}')"
	" from pgjob.limit_weights where queue = $1";

/*
 * --json after a change: {"queue": Q, "limits": the row `limits Q --json`
 * prints, or null when the queue has no limits and is not paused,
 * "weights": {"KEY": N, ...}}.
 */
static int
print_change_json(struct db_conn *conn, const char *queue)
{
	const char *p[] = {queue};
	struct db_rows *res = cli_exec(conn, "limits", SHOW_SQL, 1, p);
	struct db_rows *w =
		res ? cli_exec(conn, "limits", WEIGHTS_SQL, 1, p) : NULL;
	if (!w) {
		db_rows_free(res);
		return -1;
	}
	cJSON *o = cJSON_CreateObject(), *lim = cJSON_CreateNull();
	cJSON_AddItemToObject(o, "queue", cli_json_string(queue));
	if (db_rows_count(res) > 0) {
		cJSON_Delete(lim);
		lim = cJSON_CreateObject();
		cli_json_add_columns(lim, res, 0, 0, L_KINDS_TEXT);
	}
	cJSON_AddItemToObject(o, "limits", lim);
	cJSON_AddItemToObject(o, "weights", cli_json_value(w, 0, 0));
	cli_json_print(o);
	db_rows_free(w);
	db_rows_free(res);
	return 0;
}

/* Says what change() did, queue and keys fit for a terminal. */
static int
print_change(struct db_conn *conn, const struct limits_args *a)
{
	if (a->json)
		return print_change_json(conn, a->queue);
	char *q = cli_one_line(a->queue, SIZE_MAX);
	int rc = 0;
	if (a->reset)
		printf("reset the limits of queue %s: the configs' limits "
		       "apply again\n",
		       q);
	if (a->nset)
		rc = print_limits(conn, a->queue, q);
	for (int i = 0; i < a->nweight && rc == 0; i++) {
		char *w = cli_one_line(a->weight[i], SIZE_MAX);
		char *eq = strrchr(w, '=');
		*eq = '\0';
		printf("weight of key %s in queue %s: %s\n", w, q, eq + 1);
		free(w);
	}
	free(q);
	return rc;
}

/* Applies --reset, --set and --weight in one transaction. */
static int
change(struct db_conn *conn, const struct limits_args *a)
{
	const char *p[] = {a->queue};
	if (step(conn, "begin", 0, NULL) < 0 ||
	    (a->reset && step(conn, jobctl_reset_limits_sql, 1, p) < 0) ||
	    (a->nset && set_limits(conn, a) < 0) || set_weights(conn, a) < 0 ||
	    step(conn, "commit", 0, NULL) < 0 || print_change(conn, a) < 0)
		return CLI_EXIT_FAILED;
	return 0;
}

int
cli_limits_run(struct cli *cli, int argc, char **argv)
{
	struct limits_args a = {0};
	struct db_conn *conn;
	int rc = parse(argc, argv, &a);

	if (rc == 0 && (rc = cli_open(cli, &conn)) == 0) {
		if (a.nset || a.reset || a.nweight)
			rc = change(conn, &a);
		else
			rc = show(conn, &a);
		if (rc)
			cli_abort(conn);
		else
			db_close(conn);
	}
	free(a.set);
	free(a.weight);
	return rc;
}
