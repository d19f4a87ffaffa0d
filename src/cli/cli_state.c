/*
 * cli_state: the commands that move jobs between states by hand.
 *
 *   retry ID               dead, cancelled, done, or failed and waiting for
 *                          its next attempt -> available now, attempts 0 (a
 *                          job cancelled while it waited for its parents:
 *                          waiting again, or available if none is left)
 *   retry --dead [--kind]  every dead job (of one kind)
 *   cancel ID              waiting, available or running -> cancelled
 *
 * With --json, each prints one object: the job's id, its state now and
 * before, or for retry --dead the ids that came back and the count left.
 *
 * Each is one call of the schema's function for it, which the web console
 * calls too (sql/upgrade/033_job_actions.sql holds the rules: which states each
 * takes, the unique key of a retried job, who may act on a job), in one
 * statement and so one transaction; a retry notifies channel pgjob in it,
 * so idle workers wake when it commits.  This file only words the answer.
 */
#include "cli/cli.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

/* Column numbers of RETRY_SQL: the job's state before (null: no such
 * job), now (null: not retried), and the job that holds its unique_key
 * (null: none, or it was retried), with the key. */
enum { R_WAS, R_STATE, R_HOLDER, R_KEY };

static const char RETRY_SQL[] = "select was, state, holder, unique_key"
				" from pgjob.retry_jobs(array[$1::bigint])";

/*
 * Every dead job (of kind $1) retried in one call (along jobs_dead_idx):
 * of several with one unique_key, the newest comes back, and none whose
 * key another job holds.  Returns how many came back, how many were dead,
 * and the ids that came back as a JSON array (for --json).
 */
static const char RETRY_DEAD_SQL[] =
	"select count(*) filter (where r.state is not null) as retried,"
	"  count(*) as dead,"
	"  coalesce(json_agg(r.id order by r.id)"
	"   filter (where r.state is not null), '[]') as ids"
	" from pgjob.retry_jobs(array(select id from pgjob.jobs"
	"  where dead and ($1::text is null or kind = $1))) r";

/* Column numbers of CANCEL_SQL, as RETRY_SQL's. */
enum { C_WAS, C_STATE };

/* pgjob cancel names one job: a running one is stopped too. */
static const char CANCEL_SQL[] =
	"select was, state from pgjob.cancel_jobs(array[$1::bigint], true)";

/* {"id": 5, "state": "available", "was": "dead"} on stdout. */
static void
print_moved_json(const char *id, const char *state, const char *was)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddItemToObject(o, "id", cJSON_CreateRaw(id));
	cJSON_AddStringToObject(o, "state", state);
	cJSON_AddItemToObject(o, "was", cli_json_string(was));
	cli_json_print(o);
}

/* Says why job id was not retried (exit 1). */
static int
retry_refused(const struct db_rows *job, const char *id)
{
	const char *was = db_rows_value(job, 0, R_WAS);

	if (!was)
		return cli_fail(CLI_EXIT_FAILED, "no job %s", id);
	if (db_rows_value(job, 0, R_HOLDER))
		return cli_fail(CLI_EXIT_FAILED,
				"job %s cannot be retried: job %s holds its "
				"unique_key \"%s\"",
				id, db_rows_text(job, 0, R_HOLDER),
				db_rows_text(job, 0, R_KEY));
	if (strcmp(was, "available") == 0)
		return cli_fail(CLI_EXIT_FAILED,
				"job %s has not failed: it waits for its first "
				"attempt",
				id);
	return cli_fail(CLI_EXIT_FAILED,
			"job %s is %s: only dead, cancelled, done or failed "
			"jobs can be retried",
			id, was);
}

static int
retry_one(struct db_conn *conn, const char *id, int json)
{
	const char *p[] = {id};
	struct db_rows *job = cli_exec(conn, "retry", RETRY_SQL, 1, p);
	if (!job)
		return cli_abort(conn);
	const char *state = db_rows_value(job, 0, R_STATE);
	const char *was = db_rows_value(job, 0, R_WAS);
	int rc = 0;
	if (!state)
		rc = retry_refused(job, id);
	else if (json)
		print_moved_json(id, state, was);
	else if (strcmp(state, "waiting") == 0)
		printf("retried job %s (was %s): waiting for its parents\n", id,
		       was);
	else
		printf("retried job %s (was %s)\n", id, was);
	db_rows_free(job);
	db_close(conn);
	return rc;
}

/*
 * retry --dead --json: {"retried": 2, "ids": [44, 45], "left_dead": 0,
 * "kind": null}; left_dead counts those whose unique_key another job
 * holds.
 */
static void
print_dead_json(const struct db_rows *res, const char *kind, long long left)
{
	cJSON *o = cJSON_CreateObject();
	cli_json_add_columns(o, res, 0, 0, 1);
	cJSON_AddItemToObject(o, "ids", cli_json_value(res, 0, 2));
	cJSON_AddNumberToObject(o, "left_dead", (double)left);
	cJSON_AddItemToObject(
		o, "kind", kind ? cli_json_string(kind) : cJSON_CreateNull());
	cli_json_print(o);
}

static int
retry_dead(struct db_conn *conn, const char *kind, int json)
{
	const char *p[] = {kind};
	struct db_rows *res = cli_exec(conn, "retry", RETRY_DEAD_SQL, 1, p);
	if (!res)
		return cli_abort(conn);
	long long n = atoll(db_rows_text(res, 0, 0));
	long long dead = atoll(db_rows_text(res, 0, 1));
	if (json) {
		print_dead_json(res, kind, dead - n);
		db_rows_free(res);
		db_close(conn);
		return 0;
	}
	db_rows_free(res);
	char *k = kind ? cli_one_line(kind, SIZE_MAX) : NULL;
	printf("retried %lld dead job%s%s%s", n, n == 1 ? "" : "s",
	       k ? " of kind " : "", k ? k : "");
	free(k);
	if (dead > n)
		printf("; %lld left dead: another job holds their unique_key",
		       dead - n);
	putchar('\n');
	db_close(conn);
	return 0;
}

struct retry_args {
	int dead, json;
	const char *kind;
	char id[24];
};

static int
retry_parse(int argc, char **argv, struct retry_args *a)
{
	static const struct option opts[] = {
		{"dead", no_argument, NULL, 'D'},
		{"kind", required_argument, NULL, 'k'},
		{"json", no_argument, NULL, 'j'},
		{NULL, 0, NULL, 0},
	};
	int c;

	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
		if (c == 'D')
			a->dead = 1;
		else if (c == 'j')
			a->json = 1;
		else if (c == 'k')
			a->kind = optarg;
		else
			return cli_bad_option("retry", c, argv);
	}
	if (optind + 1 < argc)
		return cli_fail(CLI_EXIT_USAGE,
				"retry: unexpected argument \"%s\"",
				argv[optind + 1]);
	if (a->dead && optind < argc)
		return cli_fail(CLI_EXIT_USAGE,
				"retry: give a job ID or --dead, not both");
	if (a->kind && !a->dead)
		return cli_fail(CLI_EXIT_USAGE,
				"retry: --kind goes with --dead");
	if (a->dead)
		return 0;
	if (optind >= argc)
		return cli_fail(CLI_EXIT_USAGE,
				"retry: missing job ID (or --dead)");
	return cli_parse_id("retry", argv[optind], a->id, sizeof(a->id));
}

int
cli_state_retry(struct cli *cli, int argc, char **argv)
{
	struct retry_args a = {0};
	struct db_conn *conn;
	int rc;

	if ((rc = retry_parse(argc, argv, &a)) != 0)
		return rc;
	if ((rc = cli_open(cli, &conn)) != 0)
		return rc;
	return a.dead ? retry_dead(conn, a.kind, a.json)
		      : retry_one(conn, a.id, a.json);
}

/* Says why job id was not cancelled (exit 1). */
static int
cancel_refused(const struct db_rows *job, const char *id)
{
	const char *was = db_rows_value(job, 0, C_WAS);

	if (!was)
		return cli_fail(CLI_EXIT_FAILED, "no job %s", id);
	if (strcmp(was, "cancelled") == 0)
		return cli_fail(CLI_EXIT_FAILED, "job %s is already cancelled",
				id);
	return cli_fail(CLI_EXIT_FAILED,
			"job %s is %s: only waiting, available or running "
			"jobs can be cancelled",
			id, was);
}

static int
cancel_parse(int argc, char **argv, char *id, size_t len, int *json)
{
	int rc = cli_parse_json_only("cancel", argc, argv, json);

	if (rc != 0)
		return rc;
	if (optind >= argc)
		return cli_fail(CLI_EXIT_USAGE, "cancel: missing job ID");
	if (optind + 1 < argc)
		return cli_fail(CLI_EXIT_USAGE,
				"cancel: unexpected argument \"%s\"",
				argv[optind + 1]);
	return cli_parse_id("cancel", argv[optind], id, len);
}

int
cli_state_cancel(struct cli *cli, int argc, char **argv)
{
	char id[24];
	struct db_conn *conn;
	int json = 0, rc;

	if ((rc = cancel_parse(argc, argv, id, sizeof(id), &json)) != 0)
		return rc;
	if ((rc = cli_open(cli, &conn)) != 0)
		return rc;

	const char *p[] = {id};
	struct db_rows *job = cli_exec(conn, "cancel", CANCEL_SQL, 1, p);
	if (!job)
		return cli_abort(conn);
	if (!db_rows_value(job, 0, C_STATE)) {
		rc = cancel_refused(job, id);
		db_rows_free(job);
		db_close(conn);
		return rc;
	}
	/* A running job keeps its lease token: its worker sees the state at
	 * its next renewal, stops the handler and writes nothing more. */
	int running = strcmp(db_rows_text(job, 0, C_WAS), "running") == 0;
	if (json)
		print_moved_json(id, "cancelled", db_rows_text(job, 0, C_WAS));
	else
		printf("cancelled job %s%s\n", id,
		       running ? " (running: its worker stops it at its next "
				 "lease renewal)"
			       : "");
	db_rows_free(job);
	db_close(conn);
	return 0;
}
