/*
 * pgjob stats: the history per queue and kind (pgjob.history_summary():
 * sql/schema/functions/history_summary.sql) over the last hour, day, week
 * or 30 days, as a table or --json.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "db/db.h"

/* The ranges pgjob stats and the console's history offer. */
static const struct {
	const char *name, *interval;
} ranges[] = {
	{"1h", "1 hour"},
	{"24h", "24 hours"},
	{"7d", "7 days"},
	{"30d", "30 days"},
};

/* Columns of pgjob.history_summary(). */
enum { S_QUEUE, S_KIND, S_DONE, S_FAILED, S_RETRIED, S_W50, S_NCOLS = 11 };

static int
parse(int argc, char **argv, const char **range, const char **queue, int *json)
{
	static const struct option opts[] = {
		{"range", required_argument, NULL, 'r'},
		{"queue", required_argument, NULL, 'q'},
		{"json", no_argument, NULL, 'j'},
		{NULL, 0, NULL, 0},
	};
	int c;

	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
		if (c == 'j')
			*json = 1;
		else if (c == 'q')
			*queue = optarg;
		else if (c == 'r')
			*range = NULL;
		else
			return cli_bad_option("stats", c, argv);
		if (c != 'r')
			continue;
		for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++)
			if (strcmp(optarg, ranges[i].name) == 0)
				*range = ranges[i].interval;
		if (!*range)
			return cli_fail(CLI_EXIT_USAGE,
					"stats: bad --range \"%s\" (1h, 24h, "
					"7d or 30d)",
					optarg);
	}
	if (optind < argc)
		return cli_fail(CLI_EXIT_USAGE,
				"stats: unexpected argument \"%s\"",
				argv[optind]);
	return 0;
}

/* A percentile in ms as "≤250ms" or "≤2.8s"; NULL: none. */
static const char *
pct(const char *v, char *buf, size_t len)
{
	if (!v)
		return NULL;
	double ms = atof(v);
	if (ms < 1000)
		snprintf(buf, len, "%.0fms", ms);
	else if (ms < 120000)
		snprintf(buf, len, "%.1fs", ms / 1000);
	else
		snprintf(buf, len, "%.0fm", ms / 60000);
	return buf;
}

static void
print_table(const struct db_rows *res, const char *range)
{
	static const char *const head[] = {
		"QUEUE",   "KIND",     "DONE",	   "FAILED",
		"RETRIED", "WAIT P50", "WAIT P95", "WAIT P99",
		"RUN P50", "RUN P95",  "RUN P99",
	};
	int n = db_rows_count(res);
	if (n == 0) {
		printf("nothing ended in the last %s\n", range);
		return;
	}
	struct cli_table t;
	cli_table_init(&t, S_NCOLS, head, "llrrrrrrrrr");
	for (int i = 0; i < n; i++) {
		char b[6][32];
		const char *row[S_NCOLS];
		for (int c = 0; c < S_W50; c++)
			row[c] = db_rows_value(res, i, c);
		for (int c = S_W50; c < S_NCOLS; c++)
			row[c] = pct(db_rows_value(res, i, c), b[c - S_W50],
				     sizeof(b[0]));
		cli_table_add(&t, row);
	}
	printf("the last %s; times are the upper bounds of their buckets "
	       "(within a factor of 1.41)\n",
	       range);
	cli_table_print(&t, stdout, "");
}

int
cli_stats_run(struct cli *cli, int argc, char **argv)
{
	const char *range = "1 hour", *queue = NULL;
	struct db_conn *conn;
	int json = 0, rc;

	if ((rc = parse(argc, argv, &range, &queue, &json)) != 0)
		return rc;
	if ((rc = cli_open(cli, &conn)) != 0)
		return rc;
	const char *p[] = {range, queue};
	struct db_rows *res = cli_exec(
		conn, "stats",
		"select * from pgjob.history_summary($1::interval, $2)", 2, p);
	if (!res)
		return cli_abort(conn);
	if (json) {
		cJSON *a = cJSON_CreateArray();
		for (int i = 0; i < db_rows_count(res); i++) {
			cJSON *o = cJSON_CreateObject();
			cli_json_add_columns(o, res, i, 0, S_NCOLS);
			cJSON_AddItemToArray(a, o);
		}
		cli_json_print(a);
	} else {
		print_table(res, range);
	}
	db_rows_free(res);
	db_close(conn);
	return 0;
}
