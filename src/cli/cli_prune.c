/*
 * cli_prune: `pgjob prune [--older-than DURATION]` deletes finished jobs
 * (done, dead, cancelled) whose finished_at is older than DURATION: the
 * option, else the config's retention, else 7d.
 *
 * It deletes in batches, each its own transaction, oldest first along
 * jobs_finished_idx, so that no transaction holds many locks or holds back
 * vacuum for long, and workers keep claiming meanwhile.  The cutoff is fixed
 * once at the start, so the loop ends however fast jobs finish.  Rows locked
 * by someone else are skipped, not waited for.
 */
#include "cli/cli.h"

#include <inttypes.h>
#include <stdlib.h>

#include "db/db.h"
#include "common/util.h"

#define PRUNE_BATCH	 10000
#define PRUNE_DEFAULT_MS ((int64_t)7 * 86400 * 1000)
#define PRUNE_MAX_MS	 ((int64_t)36500 * 86400 * 1000)

/* $1: the cutoff, $2: the batch size.  The subquery's predicate is the index's,
 * word for word, so the planner can read jobs_finished_idx in finished_at
 * order. */
static const char BATCH_SQL[] =
	"delete from pgjob.jobs where id in ("
	"  select id from pgjob.jobs"
	"   where state in ('done', 'dead', 'cancelled')"
	"    and finished_at < $1"
	"   order by finished_at limit $2"
	"   for update skip locked)";

static int
parse(struct cli *cli, int argc, char **argv, int64_t *ms)
{
	static const struct option opts[] = {
		{"older-than", required_argument, NULL, 'o'},
		{NULL, 0, NULL, 0},
	};
	const char *why;
	int c;

	*ms = cli->cfg ? cli->cfg->retention_ms : PRUNE_DEFAULT_MS;
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
		if (c != 'o')
			return cli_bad_option("prune", c, argv);
		if (config_parse_duration(optarg, ms, &why) < 0)
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

/* Deletes batch after batch until one comes back short; 0 or -1. */
static int
delete_batches(PGconn *conn, const char *cutoff, long long *total)
{
	char batch[16];
	snprintf(batch, sizeof(batch), "%d", PRUNE_BATCH);
	const char *p[] = {cutoff, batch};
	for (;;) {
		PGresult *res = PQexecParams(conn, BATCH_SQL, 2, NULL, p, NULL,
					     NULL, 0);
		if (PQresultStatus(res) != PGRES_COMMAND_OK) {
			char *text = db_error_text(conn, res);
			cli_fail(CLI_EXIT_FAILED,
				 "prune: %s (after pruning %lld jobs)", text,
				 *total);
			free(text);
			PQclear(res);
			return -1;
		}
		long long n = atoll(PQcmdTuples(res));
		PQclear(res);
		*total += n;
		if (n < PRUNE_BATCH)
			return 0;
	}
}

int
cli_prune_run(struct cli *cli, int argc, char **argv)
{
	char ms_text[24], cutoff[64], when[64];
	PGconn *conn;
	int64_t ms;
	long long total = 0;
	int rc;

	if ((rc = parse(cli, argc, argv, &ms)) != 0)
		return rc;
	if ((rc = cli_open(cli, &conn)) != 0)
		return rc;
	snprintf(ms_text, sizeof(ms_text), "%" PRId64, ms);
	const char *p[] = {ms_text};
	PGresult *res = cli_exec(conn, "prune",
				 "select now() - $1::bigint"
				 " * interval '1 millisecond'",
				 1, p);
	if (!res)
		return cli_abort(conn);
	snprintf(cutoff, sizeof(cutoff), "%s", PQgetvalue(res, 0, 0));
	PQclear(res);

	if (delete_batches(conn, cutoff, &total) < 0)
		return cli_abort(conn);
	PQfinish(conn);
	printf("pruned %lld job%s finished before %s\n", total,
	       total == 1 ? "" : "s",
	       cli_format_time(cutoff, when, sizeof(when)));
	return 0;
}
