/*
 * cli_state: the commands that move jobs between states by hand.
 *
 *   retry ID               dead, cancelled, or failed and waiting for its
 *                          next attempt -> available now, attempts 0 (a
 *                          job cancelled while it waited for its parents:
 *                          waiting again, or available if none is left)
 *   retry --dead [--kind]  every dead job (of one kind)
 *   cancel ID              waiting, available or running -> cancelled
 *
 * With --json, each prints one object: the job's id, its state now and
 * before, or for retry --dead the ids that came back and the count left.
 *
 * Each runs in one transaction that locks the job rows first (FOR UPDATE),
 * so a worker's claim (FOR UPDATE SKIP LOCKED) cannot take a job while we
 * decide about it.  last_error and lease_token stay: the error is the
 * operator's evidence, and the token never goes back (docs/daemon.md,
 * "Leases": every write after a claim is compare-and-set on it).  A retry
 * notifies channel pgjob in the same transaction, so idle workers wake when it
 * commits.
 */
#include "cli/cli.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "db/jobctl.h"

/* Column numbers of LOCK_SQL. */
enum { S_STATE, S_ATTEMPTS, S_FAILED, S_UNIQUE_KEY };

/* A plain job done is in pgjob.jobs_done (sql/019_jobs_done.sql), where
 * nothing changes it: read, not locked, and refused as done. */
static const char LOCK_SQL[] =
	"with j as (select state, attempts, last_error is not null, unique_key"
	"  from pgjob.jobs where id = $1 for update)"
	" select * from j union all"
	" select state, attempts, last_error is not null, unique_key"
	"  from pgjob.jobs_done where id = $1 and not exists (select 1 from j)";

/*
 * The retry itself is jobctl_retry_sql (src/db/jobctl.c), which the web
 * console runs too: a job that was cancelled while it waited for its
 * parents (parents_left > 0: it was never released) goes back to waiting
 * for those whose end it has not counted (edges not resolved), as
 * pgjob.attach() would have it; when none is left it is released as
 * pgjob.parent_ended() releases, its parents' results merged into its
 * payload.  Edges that a parent's end resolved while the job was cancelled
 * stay resolved (the worker role may not write pgjob.job_deps): such a
 * failed parent shows under "failed" in the payload, whatever the job's
 * on_parent_failure.
 */

/* The job that holds unique key $1 now, other than job $2. */
static const char HOLDER_SQL[] =
	"select id from pgjob.jobs where unique_key = $1"
	"  and finished_at is null and coalesce(parents_left, 0) = 0"
	"  and id <> $2 limit 1";

/*
 * Every dead job (of kind $1), except where another job holds its
 * unique_key: of several dead jobs with one key, the newest comes back.
 * Returns how many came back, how many were dead, and the ids that came
 * back as a JSON array (for --json).
 */
static const char RETRY_DEAD_SQL[] =
	"with dead as ("
	"  select id, unique_key from pgjob.jobs"
	"   where dead and ($1::text is null or kind = $1)"
	"   for update),"
	" pick as ("
	"  select id from dead where unique_key is null"
	"  union all"
	"  select max(d.id) from dead d where d.unique_key is not null"
	"   and not exists (select 1 from pgjob.jobs o"
	"    where o.unique_key = d.unique_key"
	"     and o.finished_at is null"
	"     and coalesce(o.parents_left, 0) = 0)"
	"   group by d.unique_key),"
	" upd as ("
	"  update pgjob.jobs j set state = 'available', run_at = now(),"
	"   attempts = 0, lost_attempts = 0, snoozes = 0, finished_at = null,"
	"   locked_by = null,"
	"   locked_until = null"
	"  from pick where j.id = pick.id returning j.id)"
	" select (select count(*) from upd) as retried,"
	"  (select count(*) from dead) as dead,"
	"  (select coalesce(json_agg(id order by id), '[]') from upd) as ids";

/* Runs sql in the open transaction; 0, or -1 after printing the error. */
static int
run(struct db_conn *conn, const char *what, const char *sql, int n,
    const char *const *p)
{
	struct db_rows *res = cli_exec(conn, what, sql, n, p);
	db_rows_free(res);
	return res ? 0 : -1;
}

/*
 * Begins a transaction.  A worker's sql handler keeps its job's row locked
 * while it runs: wait that long for a row lock at most, then fail rather
 * than hang.
 */
static int
begin(struct db_conn *conn, const char *what)
{
	if (run(conn, what, "begin", 0, NULL) < 0)
		return -1;
	return run(conn, what, "set local lock_timeout = '10s'", 0, NULL);
}

/*
 * Begins a transaction and locks job id.  Returns its LOCK_SQL row (caller
 * clears), or NULL after printing why (the transaction is then rolled back
 * by cli_abort()).
 */
static struct db_rows *
lock_job(struct db_conn *conn, const char *what, const char *id)
{
	const char *p[] = {id};
	if (begin(conn, what) < 0)
		return NULL;
	struct db_rows *res = cli_exec(conn, what, LOCK_SQL, 1, p);
	if (res && db_rows_count(res) == 0) {
		cli_fail(CLI_EXIT_FAILED, "no job %s", id);
		db_rows_free(res);
		return NULL;
	}
	return res;
}

static int
commit(struct db_conn *conn, const char *what)
{
	return run(conn, what, "commit", 0, NULL);
}

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

/* Refuses a retry of a job in the wrong state: 0 when it may go ahead. */
static int
retry_refused(const struct db_rows *job, const char *id)
{
	const char *state = db_rows_text(job, 0, S_STATE);
	int failed = atoi(db_rows_text(job, 0, S_ATTEMPTS)) > 0 ||
		     db_rows_text(job, 0, S_FAILED)[0] == 't';

	if (strcmp(state, "dead") == 0 || strcmp(state, "cancelled") == 0 ||
	    (strcmp(state, "available") == 0 && failed))
		return 0;
	if (strcmp(state, "available") == 0)
		cli_fail(CLI_EXIT_FAILED,
			 "job %s has not failed: it waits for its first "
			 "attempt",
			 id);
	else
		cli_fail(CLI_EXIT_FAILED,
			 "job %s is %s: only dead, cancelled or failed jobs "
			 "can be retried",
			 id, state);
	return -1;
}

/* Refuses a retry that would give a unique_key a second unfinished job. */
static int
key_taken(struct db_conn *conn, const struct db_rows *job, const char *id)
{
	if ((db_rows_value(job, 0, S_UNIQUE_KEY) == NULL))
		return 0;
	const char *key = db_rows_text(job, 0, S_UNIQUE_KEY);
	const char *p[] = {key, id};
	struct db_rows *res = cli_exec(conn, "retry", HOLDER_SQL, 2, p);
	if (!res)
		return -1;
	int taken = db_rows_count(res) > 0;
	if (taken)
		cli_fail(CLI_EXIT_FAILED,
			 "job %s cannot be retried: job %s holds its "
			 "unique_key \"%s\"",
			 id, db_rows_text(res, 0, 0), key);
	db_rows_free(res);
	return taken ? -1 : 0;
}

static int
retry_one(struct db_conn *conn, const char *id, int json)
{
	char ids[32];
	snprintf(ids, sizeof(ids), "{%s}", id);
	const char *p[] = {ids};
	struct db_rows *job = lock_job(conn, "retry", id);
	if (!job)
		return cli_abort(conn);
	struct db_rows *now = NULL;
	if (retry_refused(job, id) < 0 || key_taken(conn, job, id) < 0 ||
	    !(now = cli_exec(conn, "retry", jobctl_retry_sql, 1, p)) ||
	    run(conn, "retry", "select pg_notify('pgjob', '')", 0, NULL) < 0 ||
	    commit(conn, "retry") < 0) {
		db_rows_free(now);
		db_rows_free(job);
		return cli_abort(conn);
	}
	const char *state = db_rows_text(now, 0, 0);
	if (json)
		print_moved_json(id, state, db_rows_text(job, 0, S_STATE));
	else if (strcmp(state, "waiting") == 0)
		printf("retried job %s (was %s): waiting for its parents\n", id,
		       db_rows_text(job, 0, S_STATE));
	else
		printf("retried job %s (was %s)\n", id,
		       db_rows_text(job, 0, S_STATE));
	db_rows_free(now);
	db_rows_free(job);
	db_close(conn);
	return 0;
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
	if (begin(conn, "retry") < 0)
		return cli_abort(conn);
	struct db_rows *res = cli_exec(conn, "retry", RETRY_DEAD_SQL, 1, p);
	if (!res)
		return cli_abort(conn);
	long long n = atoll(db_rows_text(res, 0, 0));
	long long dead = atoll(db_rows_text(res, 0, 1));
	if ((n > 0 && run(conn, "retry", "select pg_notify('pgjob', '')", 0,
			  NULL) < 0) ||
	    commit(conn, "retry") < 0) {
		db_rows_free(res);
		return cli_abort(conn);
	}
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

/* Refuses to cancel a job that has ended: 0 when it may go ahead. */
static int
cancel_refused(const struct db_rows *job, const char *id)
{
	const char *state = db_rows_text(job, 0, S_STATE);

	/* A running job keeps its lease token: its worker sees the state
	 * at its next renewal, stops the handler and writes nothing more
	 * (every write of a worker requires state = 'running'). */
	if (strcmp(state, "waiting") == 0 || strcmp(state, "available") == 0 ||
	    strcmp(state, "running") == 0)
		return 0;
	if (strcmp(state, "cancelled") == 0)
		cli_fail(CLI_EXIT_FAILED, "job %s is already cancelled", id);
	else
		cli_fail(CLI_EXIT_FAILED,
			 "job %s is %s: only waiting, available or running "
			 "jobs can be cancelled",
			 id, state);
	return -1;
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

	char ids[32];
	snprintf(ids, sizeof(ids), "{%s}", id);
	const char *p[] = {ids, "{waiting,available,running}"};
	struct db_rows *job = lock_job(conn, "cancel", id);
	if (!job)
		return cli_abort(conn);
	if (cancel_refused(job, id) < 0 ||
	    run(conn, "cancel", jobctl_cancel_sql, 2, p) < 0 ||
	    commit(conn, "cancel") < 0) {
		db_rows_free(job);
		return cli_abort(conn);
	}
	int running = strcmp(db_rows_text(job, 0, S_STATE), "running") == 0;
	if (json)
		print_moved_json(id, "cancelled",
				 db_rows_text(job, 0, S_STATE));
	db_rows_free(job);
	db_close(conn);
	if (!json)
		printf("cancelled job %s%s\n", id,
		       running ? " (running: its worker stops it at its next "
				 "lease "
				 "renewal)"
			       : "");
	return 0;
}
