/*
 * cli_pause: `pgjob pause QUEUE [--kind K] [--wait [--timeout DURATION]]`
 * and `pgjob resume QUEUE [--kind K]`, through pgjob.pause() and
 * pgjob.resume() (sql/upgrade/010_flow_control.sql), which refuse a queue that
 * no config defines and no job uses, with the known ones as a hint.
 *
 * pause --wait is the drain before a deploy: once the pause has committed,
 * no claim starts a job of the queue (or kind), and it waits until none is
 * running any more.  A running job counts while its lease holds
 * (locked_until >= now()): a job whose worker died is not running, and
 * nothing waits for it.
 *
 * --json prints one object, the queue's state after the command (with
 * --wait, after the wait, which then says nothing on the way).
 */
#include "cli/cli.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/duration.h"
#include "common/util.h"
#include "db/jobctl.h"

/* How often --wait counts, and how often it says how many are left. */
#define DRAIN_POLL_MS  250
#define DRAIN_PRINT_MS 1000

/* The running jobs of queue $1 (of kind $2, unless null). */
static const char RUNNING_SQL[] =
	"select count(*) from pgjob.jobs"
	" where queue = $1 and finished_at is null"
	"  and coalesce(parents_left, 0) = 0"
	"  and state = 'running' and locked_until >= now()"
	"  and ($2::text is null or kind = $2)";

/* The state of queue $1 in pgjob.limits (no row: not paused). */
static const char STATE_SQL[] =
	"select coalesce(l.paused, false) as paused,"
	"  coalesce(array_to_json(l.paused_kinds), '[]') as paused_kinds"
	" from (select) x left join pgjob.limits l on l.queue = $1";

struct pause_args {
	const char *queue, *kind;
	int wait, json;
	int64_t timeout_ms; /* -1: no timeout */
};

static const struct option pause_opts[] = {
	{"kind", required_argument, NULL, 'k'},
	{"wait", no_argument, NULL, 'w'},
	{"timeout", required_argument, NULL, 't'},
	{"json", no_argument, NULL, 'j'},
	{NULL, 0, NULL, 0},
};
static const struct option resume_opts[] = {
	{"kind", required_argument, NULL, 'k'},
	{"json", no_argument, NULL, 'j'},
	{NULL, 0, NULL, 0},
};

static int
parse(const char *cmd, int argc, char **argv, struct pause_args *a)
{
	const struct option *opts =
		strcmp(cmd, "pause") == 0 ? pause_opts : resume_opts;
	const char *why;
	int c;

	a->timeout_ms = -1;
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
		if (c == 'k') {
			a->kind = optarg;
		} else if (c == 'w') {
			a->wait = 1;
		} else if (c == 'j') {
			a->json = 1;
		} else if (c == 't') {
			if (duration_parse(optarg, &a->timeout_ms, &why) < 0)
				return cli_fail(CLI_EXIT_USAGE,
						"pause: bad --timeout \"%s\" "
						"(%s; use 30s, 5m, 2h)",
						optarg, why);
		} else {
			return cli_bad_option(cmd, c, argv);
		}
	}
	if (optind >= argc)
		return cli_fail(CLI_EXIT_USAGE, "%s: missing QUEUE", cmd);
	a->queue = argv[optind++];
	if (optind < argc)
		return cli_fail(CLI_EXIT_USAGE,
				"%s: unexpected argument \"%s\"", cmd,
				argv[optind]);
	if (a->timeout_ms >= 0 && !a->wait)
		return cli_fail(CLI_EXIT_USAGE,
				"pause: --timeout goes with --wait");
	return 0;
}

/* "queue Q" or "kind K of queue Q", fit for a terminal; caller frees. */
static char *
describe(const struct pause_args *a)
{
	char *q = cli_one_line(a->queue, SIZE_MAX);
	char *k = a->kind ? cli_one_line(a->kind, SIZE_MAX) : NULL;
	char *s = k ? xasprintf("kind %s of queue %s", k, q)
		    : xasprintf("queue %s", q);
	free(k);
	free(q);
	return s;
}

static void
sleep_ms(int64_t ms)
{
	struct timespec ts = {ms / 1000, ms % 1000 * 1000000};
	nanosleep(&ts, NULL);
}

/* The running jobs (RUNNING_SQL) into *n; 0, or -1 after printing why. */
static int
count_running(struct db_conn *conn, const struct pause_args *a, long long *n)
{
	const char *p[] = {a->queue, a->kind};
	struct db_rows *res = cli_exec(conn, "pause", RUNNING_SQL, 2, p);
	if (!res)
		return -1;
	*n = atoll(db_rows_text(res, 0, 0));
	db_rows_free(res);
	return 0;
}

/*
 * Waits until no job of what a names is running, saying how many are left
 * every second.  A claim that began just before the pause committed does
 * not see it and may still start a job; such a statement ends within
 * moments, so none running must hold at two counts a poll apart.  Returns
 * the exit code.
 */
static int
drain(struct db_conn *conn, const struct pause_args *a, const char *what)
{
	int64_t start = util_now_ms(), printed = start - DRAIN_PRINT_MS;
	int idle = 0;

	for (;;) {
		long long n;
		if (count_running(conn, a, &n) < 0)
			return CLI_EXIT_FAILED;
		int64_t now = util_now_ms();
		if (n == 0 && idle++) {
			if (!a->json)
				printf("no job of %s is running\n", what);
			return 0;
		}
		if (n > 0) {
			idle = 0;
			if (!a->json && now - printed >= DRAIN_PRINT_MS) {
				printf("%lld job%s of %s still running\n", n,
				       n == 1 ? "" : "s", what);
				fflush(stdout);
				printed = now;
			}
		}
		if (n > 0 && a->timeout_ms >= 0 &&
		    now - start >= a->timeout_ms) {
			char d[DURATION_LEN];
			return cli_fail(
				CLI_EXIT_FAILED,
				"pause: %lld job%s of %s still running "
				"after %s (it stays paused: `pgjob "
				"resume` undoes that)",
				n, n == 1 ? "" : "s", what,
				duration_format(a->timeout_ms, d, sizeof(d)));
		}
		sleep_ms(DRAIN_POLL_MS);
	}
}

/*
 * --json: {"queue": Q, "kind": K or null, "paused": true, "paused_kinds":
 * [...], "running": N}, read back after the change.  0, or -1 after
 * printing why.
 */
static int
print_json(struct db_conn *conn, const struct pause_args *a, const char *cmd)
{
	const char *p[] = {a->queue};
	long long running;
	struct db_rows *res = cli_exec(conn, cmd, STATE_SQL, 1, p);
	if (!res)
		return -1;
	if (count_running(conn, a, &running) < 0) {
		db_rows_free(res);
		return -1;
	}
	cJSON *o = cJSON_CreateObject();
	cJSON_AddItemToObject(o, "queue", cli_json_string(a->queue));
	cJSON_AddItemToObject(o, "kind",
			      a->kind ? cli_json_string(a->kind)
				      : cJSON_CreateNull());
	cli_json_add_columns(o, res, 0, 0, 2);
	cJSON_AddNumberToObject(o, "running", (double)running);
	cli_json_print(o);
	db_rows_free(res);
	return 0;
}

static int
run(struct cli *cli, int argc, char **argv, const char *sql, const char *done)
{
	struct pause_args a = {0};
	struct db_conn *conn;
	int rc;

	if ((rc = parse(argv[0], argc, argv, &a)) != 0)
		return rc;
	if ((rc = cli_open(cli, &conn)) != 0)
		return rc;
	const char *p[] = {a.queue, a.kind};
	struct db_rows *res = cli_exec(conn, argv[0], sql, 2, p);
	if (!res)
		return cli_abort(conn);
	db_rows_free(res);
	char *what = describe(&a);
	if (!a.json)
		printf("%s %s\n", done, what);
	if (a.wait) {
		fflush(stdout);
		rc = drain(conn, &a, what);
	}
	if (rc == 0 && a.json && print_json(conn, &a, argv[0]) < 0)
		rc = CLI_EXIT_FAILED;
	free(what);
	db_close(conn);
	return rc;
}

int
cli_pause_run(struct cli *cli, int argc, char **argv)
{
	return run(cli, argc, argv, jobctl_pause_sql, "paused");
}

int
cli_pause_resume(struct cli *cli, int argc, char **argv)
{
	return run(cli, argc, argv, jobctl_resume_sql, "resumed");
}
