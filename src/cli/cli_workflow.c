/*
 * cli_workflow: `pgjob workflow submit FILE`, `pgjob workflow show ID
 * [--json]` and `pgjob workflow cancel ID` (docs/workflows.md).
 *
 * submit hands the file to pgjob.enqueue_workflow(), which checks it
 * (names, references, cycles, limits) and inserts it whole or not at all.
 * show draws the DAG as an indented list: each step indented by its
 * depth, its parents named.  A workflow's steps are inserted
 * parents first, so id order is an order in which every parent comes
 * before its children, and a step's depth is one more than its deepest
 * parent's.  cancel cancels every step that has not started; running
 * steps finish, and what depends on a cancelled step follows its policy.
 *
 * Each takes --json: submit prints the workflow's id and its steps' job
 * ids, cancel how many steps it cancelled.
 */
#include "cli/cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

/* The largest workflow file read (the database caps steps and edges). */
#define WORKFLOW_MAX_BYTES (64 * 1024 * 1024)

static const char SUBMIT_SQL[] =
	"select pgjob.enqueue_workflow($1::jsonb) as id";

/* The steps of workflow $1 and their jobs, for submit --json. */
static const char SUBMITTED_SQL[] =
	"select step, id from pgjob.jobs where workflow_id = $1 order by id";

/* Column numbers of HEAD_SQL. */
enum {
	H_NAME,
	H_STATE,
	H_STEPS,
	H_WAITING,
	H_AVAILABLE,
	H_RUNNING,
	H_DONE,
	H_DEAD,
	H_CANCELLED,
	H_CREATED
};

static const char HEAD_SQL[] = "select name, state, steps as step_count, "
			       "waiting, available, running, done, dead,"
			       "  cancelled, created_at"
			       " from pgjob.workflow_state where id = $1";

/* Column numbers of STEPS_SQL. */
enum {
	S_ID,
	S_STEP,
	S_KIND,
	S_STATE,
	S_ATTEMPTS,
	S_POLICY,
	S_AFTER_IDS,
	S_ERROR
};

static const char STEPS_SQL[] =
	"select j.id, j.step, j.kind, j.state, j.attempts,"
	"  coalesce(j.on_parent_failure, 'cancel') as on_parent_failure,"
	"  array(select d.parent from pgjob.job_deps d where d.child = j.id"
	"   order by d.parent)::text,"
	"  j.last_error"
	" from pgjob.jobs j where j.workflow_id = $1 order by j.id";

static const char CANCEL_SQL[] =
	"with c as (update pgjob.jobs set state = 'cancelled',"
	"  finished_at = now(), last_error = 'workflow cancelled',"
	"  locked_by = null, locked_until = null"
	" where workflow_id = $1 and state in ('waiting', 'available')"
	" returning 1)"
	" select (select count(*) from c),"
	"  (select count(*) from pgjob.workflows where id = $1)";

/* The whole of f, at most WORKFLOW_MAX_BYTES; NULL after printing why. */
static char *
read_all(FILE *f, const char *name)
{
	struct buf b = {0};
	char chunk[65536];
	size_t n;
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
		if (b.len + n > WORKFLOW_MAX_BYTES) {
			buf_free(&b);
			cli_fail(CLI_EXIT_FAILED,
				 "workflow submit: %s is over %d MiB", name,
				 WORKFLOW_MAX_BYTES / (1024 * 1024));
			return NULL;
		}
		buf_append(&b, chunk, n);
	}
	if (ferror(f)) {
		buf_free(&b);
		cli_fail(CLI_EXIT_FAILED, "workflow submit: cannot read %s: %s",
			 name, strerror(errno));
		return NULL;
	}
	if (!b.data)
		buf_append(&b, "", 0);
	return b.data;
}

/*
 * The options of submit and cancel: --json only.  Returns 0 with *json set
 * and optind at the one argument, or CLI_EXIT_USAGE after printing why
 * (what names the command and its argument).
 */
static int
parse_json_opt(const char *cmd, const char *what, int argc, char **argv,
	       int *json)
{
	int rc = cli_parse_json_only(cmd, argc, argv, json);

	if (rc != 0)
		return rc;
	if (optind != argc - 1)
		return cli_fail(CLI_EXIT_USAGE, "%s: %s", cmd, what);
	return 0;
}

/*
 * submit --json: {"id": 7, "steps": [{"step": "fetch", "id": 12}, ...]},
 * the steps in id order (parents before their children).
 */
/*
 * submit --json: the workflow's id and its steps' jobs.  The submit and the
 * read of its steps run in one transaction: a failure of either enqueues
 * nothing, so that a failed command never leaves a workflow behind.
 * Closes conn.
 */
static int
submit_json(struct db_conn *conn, const char *text)
{
	const char *p[] = {text};
	struct db_rows *res, *steps = NULL, *done;

	if (!(res = cli_exec(conn, "workflow submit", "begin", 0, NULL)))
		return cli_abort(conn);
	db_rows_free(res);
	if (!(res = cli_exec(conn, "workflow submit", SUBMIT_SQL, 1, p)))
		return cli_abort(conn);
	p[0] = db_rows_text(res, 0, 0);
	if (!(steps = cli_exec(conn, "workflow submit", SUBMITTED_SQL, 1, p)) ||
	    !(done = cli_exec(conn, "workflow submit", "commit", 0, NULL))) {
		db_rows_free(steps);
		db_rows_free(res);
		return cli_abort(conn);
	}
	db_rows_free(done);
	cJSON *o = cJSON_CreateObject();
	cli_json_add_columns(o, res, 0, 0, 1);
	cJSON *arr = cJSON_AddArrayToObject(o, "steps");
	for (int i = 0; i < db_rows_count(steps); i++) {
		cJSON *s = cJSON_CreateObject();
		cli_json_add_columns(s, steps, i, 0, 2);
		cJSON_AddItemToArray(arr, s);
	}
	cli_json_print(o);
	db_rows_free(steps);
	db_rows_free(res);
	db_close(conn);
	return 0;
}

static int
cmd_submit(struct cli *cli, int argc, char **argv)
{
	int json = 0;
	int rc = parse_json_opt("workflow submit",
				"one FILE (or - for standard input)", argc,
				argv, &json);
	if (rc)
		return rc;
	const char *path = argv[optind];
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
	if (!f)
		return cli_fail(CLI_EXIT_FAILED,
				"workflow submit: cannot open %s: %s", path,
				strerror(errno));
	char *text = read_all(f, path);
	if (f != stdin)
		fclose(f);
	if (!text)
		return CLI_EXIT_FAILED;
	cJSON *doc = cJSON_Parse(text);
	int object = cJSON_IsObject(doc);
	cJSON_Delete(doc);
	if (!object) {
		free(text);
		return cli_fail(CLI_EXIT_USAGE,
				"workflow submit: %s is not a JSON object",
				path);
	}
	/* cli_connect(), not cli_open(): the enqueue-only role, which may
	 * call pgjob.enqueue_workflow(), may not read the schema version
	 * (as with pgjob enqueue). */
	struct db_conn *conn = cli_connect(cli);
	if (!conn) {
		free(text);
		return CLI_EXIT_FAILED;
	}
	if (json) {
		rc = submit_json(conn, text);
		free(text);
		return rc;
	}
	const char *p[] = {text};
	struct db_rows *res =
		cli_exec(conn, "workflow submit", SUBMIT_SQL, 1, p);
	if (res)
		printf("%s\n", db_rows_text(res, 0, 0));
	else
		rc = CLI_EXIT_FAILED;
	db_rows_free(res);
	db_close(conn);
	free(text);
	return rc;
}

/* The parents' ids of "{1,2}" (an int8[] as text); returns their count. */
static int
parse_ids(const char *s, int64_t **out)
{
	int n = 0, cap = 0;
	*out = NULL;
	for (const char *p = s; *p;) {
		if (*p < '0' || *p > '9') {
			p++;
			continue;
		}
		char *end;
		long long v = strtoll(p, &end, 10);
		if (n == cap) {
			cap = cap ? cap * 2 : 4;
			*out = xrealloc(*out, (size_t)cap * sizeof(**out));
		}
		(*out)[n++] = v;
		p = end;
	}
	return n;
}

/* Row index of job id among rows sorted by id, or -1. */
static int
row_of(const struct db_rows *res, int64_t id)
{
	int lo = 0, hi = db_rows_count(res) - 1;
	while (lo <= hi) {
		int mid = lo + (hi - lo) / 2;
		long long v = atoll(db_rows_text(res, mid, S_ID));
		if (v == id)
			return mid;
		if (v < id)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return -1;
}

static void
print_tree(const struct db_rows *head, const struct db_rows *steps,
	   const char *id)
{
	int n = db_rows_count(steps);
	char since[64];
	const char *nm = db_rows_value(head, 0, H_NAME);
	char *name = nm ? cli_one_line(nm, 80) : NULL;
	printf("workflow %s%s%s%s: %s, %s steps (%s done, %s running, %s "
	       "due, %s waiting, %s dead, %s cancelled), since %s\n",
	       id, name ? " \"" : "", name ? name : "", name ? "\"" : "",
	       db_rows_text(head, 0, H_STATE), db_rows_text(head, 0, H_STEPS),
	       db_rows_text(head, 0, H_DONE), db_rows_text(head, 0, H_RUNNING),
	       db_rows_text(head, 0, H_AVAILABLE),
	       db_rows_text(head, 0, H_WAITING), db_rows_text(head, 0, H_DEAD),
	       db_rows_text(head, 0, H_CANCELLED),
	       cli_format_time(db_rows_text(head, 0, H_CREATED), since,
			       sizeof(since)));
	free(name);

	/* Depths, parents before children (id order). */
	int *depth = xcalloc((size_t)n + 1, sizeof(int));
	for (int i = 0; i < n; i++) {
		int64_t *ids;
		int np = parse_ids(db_rows_text(steps, i, S_AFTER_IDS), &ids);
		for (int k = 0; k < np; k++) {
			int r = row_of(steps, ids[k]);
			if (r >= 0 && r < i && depth[r] + 1 > depth[i])
				depth[i] = depth[r] + 1;
		}
		free(ids);
	}
	const char *const cols[] = {"STEP",	"JOB",	 "KIND", "STATE",
				    "ATTEMPTS", "AFTER", "ERROR"};
	struct cli_table t;
	cli_table_init(&t, 7, cols, "lrllrll");
	for (int i = 0; i < n; i++) {
		struct buf step = {0}, after = {0};
		for (int d = 0; d < depth[i]; d++)
			buf_append(&step, "  ", 2);
		char *s = cli_one_line(db_rows_text(steps, i, S_STEP), 60);
		buf_appendf(&step, "%s", s);
		free(s);
		int64_t *ids;
		int np = parse_ids(db_rows_text(steps, i, S_AFTER_IDS), &ids);
		for (int k = 0; k < np; k++) {
			int r = row_of(steps, ids[k]);
			char *pn =
				r >= 0 ? cli_one_line(
						 db_rows_text(steps, r, S_STEP),
						 40)
				       : xasprintf("%lld", (long long)ids[k]);
			buf_appendf(&after, "%s%s", k ? ", " : "", pn);
			free(pn);
		}
		free(ids);
		if (np && strcmp(db_rows_text(steps, i, S_POLICY), "cancel"))
			buf_appendf(&after, " (on failure: %s)",
				    db_rows_text(steps, i, S_POLICY));
		const char *row[] = {step.data,
				     db_rows_text(steps, i, S_ID),
				     db_rows_text(steps, i, S_KIND),
				     db_rows_text(steps, i, S_STATE),
				     db_rows_text(steps, i, S_ATTEMPTS),
				     after.data,
				     db_rows_value(steps, i, S_ERROR)};
		cli_table_add(&t, row);
		buf_free(&step);
		buf_free(&after);
	}
	cli_table_print(&t, stdout, "  ");
	free(depth);
}

static void
print_json(const struct db_rows *head, const struct db_rows *steps,
	   const char *id)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "id", atof(id));
	cli_json_add_columns(o, head, 0, 0, db_rows_columns(head));
	cJSON *arr = cJSON_AddArrayToObject(o, "steps");
	for (int i = 0; i < db_rows_count(steps); i++) {
		cJSON *s = cJSON_CreateObject();
		cli_json_add_columns(s, steps, i, 0, S_AFTER_IDS);
		int64_t *ids;
		int np = parse_ids(db_rows_text(steps, i, S_AFTER_IDS), &ids);
		cJSON *after = cJSON_AddArrayToObject(s, "after");
		for (int k = 0; k < np; k++) {
			int r = row_of(steps, ids[k]);
			cJSON_AddItemToArray(
				after,
				r >= 0 ? cli_json_value(steps, r, S_STEP)
				       : cJSON_CreateNumber((double)ids[k]));
		}
		free(ids);
		cli_json_add_columns(s, steps, i, S_ERROR, S_ERROR + 1);
		cJSON_AddItemToArray(arr, s);
	}
	cli_json_print(o);
}

static int
cmd_show(struct cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{"json", no_argument, NULL, 'j'},
		{NULL, 0, NULL, 0},
	};
	int json = 0, c;
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
		if (c == 'j')
			json = 1;
		else
			return cli_bad_option("workflow show", c, argv);
	}
	if (optind != argc - 1)
		return cli_fail(CLI_EXIT_USAGE, "%s",
				"workflow show: one workflow ID");
	char id[24];
	int rc = cli_parse_id("workflow show", argv[optind], id, sizeof(id));
	if (rc)
		return rc;
	struct db_conn *conn = NULL;
	if ((rc = cli_open(cli, &conn)))
		return rc;
	const char *p[] = {id};
	struct db_rows *head = cli_exec(conn, "workflow show", HEAD_SQL, 1, p);
	struct db_rows *steps =
		head ? cli_exec(conn, "workflow show", STEPS_SQL, 1, p) : NULL;
	if (!head || !steps)
		rc = CLI_EXIT_FAILED;
	else if (db_rows_count(head) == 0)
		rc = cli_fail(CLI_EXIT_FAILED, "workflow show: no workflow %s",
			      id);
	else if (json)
		print_json(head, steps, id);
	else
		print_tree(head, steps, id);
	db_rows_free(head);
	db_rows_free(steps);
	db_close(conn);
	return rc;
}

/* cancel --json: {"id": 7, "cancelled": 3}. */
static void
print_cancelled_json(const char *id, const struct db_rows *res)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddItemToObject(o, "id", cJSON_CreateRaw(id));
	cJSON_AddItemToObject(o, "cancelled", cli_json_value(res, 0, 0));
	cli_json_print(o);
}

static int
cmd_cancel(struct cli *cli, int argc, char **argv)
{
	int json = 0;
	int rc = parse_json_opt("workflow cancel", "one workflow ID", argc,
				argv, &json);
	if (rc)
		return rc;
	char id[24];
	rc = cli_parse_id("workflow cancel", argv[optind], id, sizeof(id));
	if (rc)
		return rc;
	struct db_conn *conn = NULL;
	if ((rc = cli_open(cli, &conn)))
		return rc;
	const char *p[] = {id};
	struct db_rows *res =
		cli_exec(conn, "workflow cancel", CANCEL_SQL, 1, p);
	if (!res)
		rc = CLI_EXIT_FAILED;
	else if (strcmp(db_rows_text(res, 0, 1), "0") == 0)
		rc = cli_fail(CLI_EXIT_FAILED,
			      "workflow cancel: no workflow %s", id);
	else if (json)
		print_cancelled_json(id, res);
	else
		printf("cancelled %s step(s) that had not started\n",
		       db_rows_text(res, 0, 0));
	db_rows_free(res);
	db_close(conn);
	return rc;
}

int
cli_workflow_run(struct cli *cli, int argc, char **argv)
{
	if (argc < 2)
		return cli_fail(CLI_EXIT_USAGE, "%s",
				"workflow: submit FILE, show ID or cancel ID");
	if (strcmp(argv[1], "submit") == 0)
		return cmd_submit(cli, argc - 1, argv + 1);
	if (strcmp(argv[1], "show") == 0)
		return cmd_show(cli, argc - 1, argv + 1);
	if (strcmp(argv[1], "cancel") == 0)
		return cmd_cancel(cli, argc - 1, argv + 1);
	char *w = cli_one_line(argv[1], 40);
	int rc = cli_fail(CLI_EXIT_USAGE,
			  "workflow: unknown subcommand \"%s\" (submit, show, "
			  "cancel)",
			  w);
	free(w);
	return rc;
}
