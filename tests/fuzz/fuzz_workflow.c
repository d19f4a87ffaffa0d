/*
 * fuzz_workflow: pgjob.enqueue_workflow() (sql/schema/functions/) on
 * arbitrary documents, in a real PostgreSQL: the checks of a workflow are
 * SQL, and pgjob only hands the file over (src/cli/cli_workflow.c).  The
 * database is PGJOBD_FUZZ_DB (a conninfo; a database `pgjob migrate` made),
 * which nothing else should use while this runs: each input is one
 * transaction, rolled back.
 *
 * The input is the document, as `pgjob workflow submit` sends it (text up
 * to a NUL, which libpq cannot send).  It either makes a workflow, whose
 * rows must then be what the document asked (every step a job, every
 * step's parents_left the number of its edges), or is refused with an
 * error of the classes docs/workflows.md promises ("What is refused"):
 * 22023 (a bad document or step, a cycle), 23503 (after names no step),
 * 54000 (over the limits, a payload over max_payload_bytes), 22003 and
 * 22008 (a step that pgjob.enqueue() refuses: priority, run_at), each with
 * a message of the schema ("pgjob.enqueue..."), or what the jsonb cast
 * says of a text that is not JSON (22P02, 22P05, 22021; 54001 for nesting
 * past the stack).  Any other error, a statement over 10 s or a server
 * that goes away aborts.  PGJOBD_FUZZ_VERBOSE=1 prints each refusal.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/db.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct db_conn *db;

static void
setup(void)
{
	const char *ci = getenv("PGJOBD_FUZZ_DB");
	char *err = NULL;

	if (!ci || !*ci) {
		fprintf(stderr, "fuzz_workflow: set PGJOBD_FUZZ_DB to the "
				"conninfo of a migrated database\n");
		exit(2);
	}
	if (!(db = db_connect(ci, "fuzz_workflow", &err)) ||
	    db_exec(db, "set statement_timeout = '10s'", &err) < 0) {
		fprintf(stderr, "fuzz_workflow: %s\n", err);
		exit(2);
	}
}

/* The SQLSTATEs a refused document may end with (see the top): NULL for
 * another, else what names its outcome for count_outcome(). */
static const char *
allowed(const char *err)
{
	static const char *const schema[] = {"22023", "23503", "54000", "22003",
					     "22008"};
	/* The jsonb cast's, each with the words it uses: the same codes
	 * from a cast inside the function would be a step's bad value
	 * that slipped past its checks. */
	static const char *const cast[][2] = {
		{"22P02", ": invalid input syntax for type json"},
		{"22P05", ": unsupported Unicode escape sequence"},
		{"22021", ": invalid byte sequence for encoding"},
		{"22003", ": value overflows numeric format"},
		{"54001", ": stack depth limit exceeded"},
	};
	for (size_t i = 0; i < sizeof(cast) / sizeof(cast[0]); i++)
		if (strncmp(err, cast[i][0], 5) == 0 &&
		    strncmp(err + 5, cast[i][1], strlen(cast[i][1])) == 0)
			return cast[i][1]; /* not the bytes it quotes */
	for (size_t i = 0; i < sizeof(schema) / sizeof(schema[0]); i++)
		if (strncmp(err, schema[i], 5) == 0)
			return strncmp(err + 5, ": pgjob.enqueue", 15) == 0
				       ? err
				       : NULL;
	return NULL;
}

/*
 * What libFuzzer's coverage cannot see: the checks are PL/pgSQL, in the
 * server.  Each outcome (an error's SQLSTATE and message with its quoted
 * names and numbers left out; a workflow's shape) counts in a counter of
 * its own among libFuzzer's extra counters, so that an input that reaches
 * a new refusal, or a new shape of workflow, is new coverage and kept.
 * In the plain runner the section is an array like any other.
 */
#define OUTCOMES 4096
__attribute__((section(
	"__libfuzzer_extra_counters"))) static uint8_t outcomes[OUTCOMES];

static void
count_outcome(const char *text)
{
	uint32_t h = 2166136261u; /* FNV-1a */
	int quoted = 0;
	for (const char *p = text; *p; p++) {
		if (*p == '"')
			quoted = !quoted;
		if (quoted || (*p >= '0' && *p <= '9'))
			continue;
		h = (h ^ (uint8_t)*p) * 16777619u;
	}
	outcomes[h % OUTCOMES]++;
}

/* A workflow's shape, for count_outcome(): its steps and edges, on a
 * logarithmic scale (as letters: the digits are left out), and which
 * policies and optional keys it used. */
static const char SHAPE_SQL[] =
	"select chr(97 + length(count(*)::text))"
	" || chr(97 + length(coalesce(sum(parents_left), 0)::text))"
	" || coalesce(string_agg(distinct on_parent_failure, ''), '-')"
	" || bool_or(run_at > now())::text || bool_or(priority <> 0)::text"
	" || bool_or(cost <> 1)::text || bool_or(queue <> 'default')::text"
	" from pgjob.jobs where workflow_id = $1::bigint";

/* The workflow's rows are the document's: as many jobs as steps, and each
 * job waits for as many parents as it has edges. */
static const char CHECK_SQL[] =
	"select (select count(*) from pgjob.jobs where workflow_id = w.id)"
	"  = jsonb_array_length($2::jsonb -> 'steps')"
	" and w.steps = jsonb_array_length($2::jsonb -> 'steps')"
	" and not exists (select from pgjob.jobs j where j.workflow_id = w.id"
	"  and coalesce(j.parents_left, 0) <> (select count(*)"
	"   from pgjob.job_deps d where d.child = j.id))"
	" from pgjob.workflows w where w.id = $1::bigint";

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *err = NULL;

	if (!db)
		setup();
	char *doc = malloc(size + 1);
	if (!doc)
		abort();
	memcpy(doc, data, size);
	doc[size] = '\0';
	if (db_exec(db, "begin", &err) < 0) {
		fprintf(stderr, "fuzz_workflow: begin: %s\n", err);
		abort();
	}
	const char *p[] = {doc, NULL};
	struct db_rows *r = db_query(
		db, "select pgjob.enqueue_workflow($1::jsonb)", 1, p, &err);
	if (!r) {
		const char *outcome = db_connected(db) ? allowed(err) : NULL;
		if (!outcome) {
			fprintf(stderr,
				"fuzz_workflow: not a promised error: "
				"%s\n",
				err);
			abort();
		}
		if (getenv("PGJOBD_FUZZ_VERBOSE"))
			fprintf(stderr, "  %s\n", err);
		count_outcome(outcome);
		free(err);
	} else {
		p[0] = db_rows_text(r, 0, 0);
		p[1] = doc;
		struct db_rows *c = db_query(db, CHECK_SQL, 2, p, &err);
		if (!c || strcmp(db_rows_text(c, 0, 0), "t") != 0) {
			fprintf(stderr, "fuzz_workflow: workflow %s: %s\n",
				p[0],
				c ? "its rows are not the document's" : err);
			abort();
		}
		db_rows_free(c);
		struct db_rows *shape = db_query(db, SHAPE_SQL, 1, p, &err);
		if (!shape) {
			fprintf(stderr, "fuzz_workflow: %s\n", err);
			abort();
		}
		count_outcome(db_rows_text(shape, 0, 0));
		db_rows_free(shape);
		db_rows_free(r);
	}
	db_rollback(db);
	if (!db_connected(db)) {
		fprintf(stderr, "fuzz_workflow: the connection was lost\n");
		abort();
	}
	free(doc);
	return 0;
}
