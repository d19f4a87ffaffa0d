/*
 * pgjob enqueue KIND [JSON] [options]: one job through pgjob.enqueue(),
 * its options as the function's named parameters (docs/cli.md, "enqueue");
 * --file hands over to cli_enqueue_file.c.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "common/duration.h"
#include "common/trace.h"
#include "common/util.h"
#include "db/db.h"

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
	OPT_FILE,
	OPT_TRACEPARENT
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
	{"traceparent", required_argument, NULL, OPT_TRACEPARENT},
	{NULL, 0, NULL, 0},
};

/* The parameters of one enqueue, as text ($1..$14). */
struct enqueue_args {
	const char *p[14]; /* kind payload queue run_at in_ms priority
			      max_attempts unique_key ordering_key limit_key
			      cost depends_on on_parent_failure traceparent */
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
		case OPT_TRACEPARENT:
			/* Checked as pgjob.enqueue() checks it, but refused:
			 * the function drops a bad one with a warning, so as
			 * not to fail an application's transaction over a
			 * header its caller sent; here an operator typed it,
			 * and a job quietly outside its trace helps nobody. */
			if (!trace_valid(optarg))
				return cli_fail(
					CLI_EXIT_USAGE,
					"enqueue: bad --traceparent \"%s\" (a "
					"W3C trace context of version 00: "
					"00-<32 lowercase hex>-<16 lowercase "
					"hex>-<2 hex>, ids not all zeros)",
					optarg);
			a->p[13] = optarg;
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
		for (int i = 2; i < 14; i++)
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
	" depends_on => $12::bigint[], on_parent_failure => $13,"              \
	" traceparent => $14) as id"

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
		if (!(res = cli_exec(conn, "enqueue", ENQUEUE_SQL, 14, a->p)))
			return cli_abort(conn);
		o = cJSON_CreateObject();
		cli_json_add_columns(o, res, 0, 0, 1);
		cJSON_AddFalseToObject(o, "existing");
		goto print;
	}
	if (!(res = cli_exec(conn, "enqueue", "begin", 0, NULL)))
		return cli_abort(conn);
	db_rows_free(res);
	if (!(res = cli_exec(conn, "enqueue", ENQUEUE_CHECK_SQL, 14, a->p)))
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

int
cli_enqueue_run(struct cli *cli, int argc, char **argv)
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
	struct db_rows *res = cli_exec(conn, "enqueue", ENQUEUE_SQL, 14, a.p);
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
