/*
 * cli_prune: `pgjob prune [--older-than DURATION]` deletes finished jobs
 * (done, dead, cancelled) whose finished_at is older than DURATION: the
 * option, else the config's retention, else 7d.
 *
 * It deletes in batches with the statement of the pruning duty
 * (src/db/prune.c), each its own transaction, oldest first, so that no
 * transaction holds many locks or holds back vacuum for long, and workers
 * keep claiming meanwhile.  The cutoff is fixed once at the start, so the
 * loop ends however fast jobs finish.  Rows locked by someone else are
 * skipped, not waited for.  --json prints {"pruned": N, "finished_before":
 * TIME}.
 */
#include "cli/cli.h"

#include <inttypes.h>
#include <stdlib.h>

#include "db/db.h"
#include "db/prune.h"
#include "common/util.h"
#include "common/duration.h"

#define PRUNE_BATCH	 10000
#define PRUNE_DEFAULT_MS ((int64_t)7 * 86400 * 1000)
#define PRUNE_MAX_MS	 ((int64_t)36500 * 86400 * 1000)

static int
parse(struct cli *cli, int argc, char **argv, int64_t *ms, int *json)
{
	static const struct option opts[] = {
		{"older-than", required_argument, NULL, 'o'},
		{"json", no_argument, NULL, 'j'},
		{NULL, 0, NULL, 0},
	};
	const char *why;
	int c;

	*ms = cli->cfg ? cli->cfg->retention_ms : PRUNE_DEFAULT_MS;
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
		if (c == 'j') {
			*json = 1;
			continue;
		}
		if (c != 'o')
			return cli_bad_option("prune", c, argv);
		if (duration_parse(optarg, ms, &why) < 0)
			return cli_fail(CLI_EXIT_USAGE,
					"prune: bad --older-than \"%s\" (%s; "
					"use 30s, 5m, 2h, 7d)",
					optarg, why);
		if (*ms > PRUNE_MAX_MS)
			return cli_fail(CLI_EXIT_USAGE,
					"prune: bad --older-than \"%s\" (at "
					"most 36500d)",
					optarg);
	}
	if (optind < argc)
		return cli_fail(CLI_EXIT_USAGE,
				"prune: unexpected argument \"%s\"",
				argv[optind]);
	return 0;
}

typedef long long prune_now_fn(struct db_conn *c, const char *cutoff, int batch,
			       char **err);

/* Calls prune(conn, cutoff, PRUNE_BATCH) until a call prunes fewer than
 * least; 0 or -1. */
static int
prune_until(struct db_conn *conn, const char *cutoff, prune_now_fn *prune,
	    long long least, long long *total)
{
	for (;;) {
		char *err;
		long long n = prune(conn, cutoff, PRUNE_BATCH, &err);
		if (n < 0) {
			cli_fail(CLI_EXIT_FAILED,
				 "prune: %s (after pruning %lld jobs)", err,
				 *total);
			free(err);
			return -1;
		}
		*total += n;
		if (n < least)
			return 0;
	}
}

/* Deletes batch after batch (prune_jobs_now()) until one comes back
 * short; then the plain jobs done kept in pgjob.jobs_done
 * (sql/upgrade/019_jobs_done.sql): its rings all before the cutoff emptied, the
 * rest deleted in batches, until a call finds nothing left before it.
 * 0 or -1. */
static int
delete_batches(struct db_conn *conn, const char *cutoff, long long *total)
{
	if (prune_until(conn, cutoff, prune_jobs_now, PRUNE_BATCH, total) < 0)
		return -1;
	return prune_until(conn, cutoff, prune_done_now, 1, total);
}

int
cli_prune_run(struct cli *cli, int argc, char **argv)
{
	char ms_text[24], cutoff[64], when[64];
	struct db_conn *conn;
	int64_t ms;
	long long total = 0;
	int json = 0, rc;

	if ((rc = parse(cli, argc, argv, &ms, &json)) != 0)
		return rc;
	if ((rc = cli_open(cli, &conn)) != 0)
		return rc;
	snprintf(ms_text, sizeof(ms_text), "%" PRId64, ms);
	const char *p[] = {ms_text};
	struct db_rows *res = cli_exec(conn, "prune",
				       "select now() - $1::bigint"
				       " * interval '1 millisecond'",
				       1, p);
	if (!res)
		return cli_abort(conn);
	snprintf(cutoff, sizeof(cutoff), "%s", db_rows_text(res, 0, 0));
	cJSON *before = cli_json_value(res, 0, 0);
	db_rows_free(res);

	if (delete_batches(conn, cutoff, &total) < 0) {
		cJSON_Delete(before);
		return cli_abort(conn);
	}
	db_close(conn);
	if (json) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddNumberToObject(o, "pruned", (double)total);
		cJSON_AddItemToObject(o, "finished_before", before);
		cli_json_print(o);
		return 0;
	}
	cJSON_Delete(before);
	printf("pruned %lld job%s finished before %s\n", total,
	       total == 1 ? "" : "s",
	       cli_format_time(cutoff, when, sizeof(when)));
	return 0;
}
