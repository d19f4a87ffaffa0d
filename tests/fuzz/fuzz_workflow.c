/*
 * fuzz_workflow: pgjob.enqueue_workflow() (sql/schema/functions/) on
 * arbitrary documents, in a real PostgreSQL: the checks of a workflow are
 * SQL, and pgjob only hands the file over (src/cli/cli_workflow.c).  The
 * database is PGJOBD_FUZZ_DB (a conninfo; a database `pgjob migrate` made),
 * which nothing else should use while this runs: each input is one
 * transaction, rolled back.
 *
 * The input is the document, as `pgjob workflow submit` sends it (text up
 * to a NUL, which libpq cannot send), or, after a first byte 0x01, the
 * choices of a document that this program builds (build(), below), in
 * a transaction whose payload limit may be 8 bytes.  It either
 * makes a workflow, whose rows must then be what the document asked (every step
 * a job, every step's parents_left the number of its edges), or is refused with
 * an error of the classes docs/workflows.md promises ("What is refused"): 22023
 * (a bad document or step, a cycle), 23503 (after names no step), 54000 (over
 * the limits, a payload over max_payload_bytes), 22003 and 22008 (a step that
 * pgjob.enqueue() refuses: priority, run_at), each with a message of the schema
 * ("pgjob.enqueue..."), or what the jsonb cast says of a text that is not JSON
 * (22P02, 22P05, 22021; 54001 for nesting past the stack).  Any other error, a
 * statement over 10 s or a server that goes away aborts.  PGJOBD_FUZZ_VERBOSE=1
 * prints each refusal.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

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
 * names and its numbers left out; a workflow's shape) counts in a counter of
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
	/* What the document chose is between the first '"' and the last
	 * (names, keys: which may hold quotes of their own) and in the
	 * digits: left out. */
	const char *open = strchr(text, '"'), *close = strrchr(text, '"');
	uint32_t h = 2166136261u; /* FNV-1a */
	for (const char *p = text; *p; p++) {
		if ((open && p >= open && p <= close) ||
		    (*p >= '0' && *p <= '9'))
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

/*
 * Built documents: an input whose first byte is 0x01 is not the document
 * but the choices of one, a byte each (zeros once the input runs out):
 * how many steps, and of each step its name (or a name already taken),
 * kind, parents (or a name of none), policy, and values of every key at
 * and past their limits.  Mutating raw JSON seldom gets past its syntax
 * and the top-level keys; these reach every check, and workflows that are
 * made, whose rows the check above holds to the document.
 */
struct choices {
	const uint8_t *p, *end;
};

static unsigned
pick(struct choices *c, unsigned n)
{
	return (c->p < c->end ? *c->p++ : 0) % n;
}

/* One of vals (JSON texts; NULL: the key left out) as key of o. */
static void
add_choice(cJSON *o, const char *key, struct choices *c,
	   const char *const *vals, unsigned n)
{
	const char *v = vals[pick(c, n)];
	if (v)
		cJSON_AddItemToObject(o, key, cJSON_Parse(v));
}

#define ADD(o, key, c, ...)                                                    \
	do {                                                                   \
		static const char *const vals_[] = {__VA_ARGS__};              \
		add_choice(o, key, c, vals_,                                   \
			   sizeof(vals_) / sizeof(vals_[0]));                  \
	} while (0)

static char *
build(const uint8_t *data, size_t size, int *small)
{
	struct choices c = {data, data + size};
	unsigned n = 1 + pick(&c, 16);
	char name[16];
	cJSON *doc = cJSON_CreateObject(), *steps = cJSON_CreateArray();

	ADD(doc, "name", &c, NULL, "\"wf\"", "null", "7");
	cJSON_AddItemToObject(doc, "steps", steps);
	for (unsigned i = 0; i < n; i++) {
		cJSON *st = cJSON_CreateObject();
		unsigned how = pick(&c, 16);
		/* Mostly its own name (0, as the bytes after the input's
		 * end); sometimes another's, none, or "". */
		if (how == 1)
			snprintf(name, sizeof(name), "s%u", pick(&c, n));
		else
			snprintf(name, sizeof(name), "s%u", i);
		if (how != 2)
			cJSON_AddStringToObject(st, "name",
						how == 3 ? "" : name);
		ADD(st, "kind", &c, "\"k\"", "\"k\"", "\"k\"", NULL, "\"\"",
		    "1");
		unsigned np = pick(&c, 5);
		if (np == 4) {
			ADD(st, "after", &c, "\"s0\"", "[]", "null", "[1]");
		} else if (np) {
			cJSON *after = cJSON_AddArrayToObject(st, "after");
			for (unsigned k = 0; k < np; k++) {
				/* n: a name of no step. */
				unsigned par = pick(&c, n + 1);
				snprintf(name, sizeof(name),
					 par == n ? "zz" : "s%u", par);
				cJSON_AddItemToArray(after,
						     cJSON_CreateString(name));
			}
		}
		ADD(st, "on_parent_failure", &c, NULL, NULL, "\"cancel\"",
		    "\"run\"", "\"wait\"", "\"retry\"", "null");
		ADD(st, "payload", &c, NULL, NULL, "{}", "{\"a\":[1]}",
		    "{\"pgjob\":1}", "[]", "\"x\"", "null");
		ADD(st, "priority", &c, NULL, NULL, "0", "32767", "-32768",
		    "32768", "-32769", "1.5", "\"9\"", "\"x\"", "1e10");
		ADD(st, "max_attempts", &c, NULL, NULL, "1", "0", "-1", "\"3\"",
		    "2147483648");
		ADD(st, "cost", &c, NULL, NULL, "0", "1000000", "1000001", "-1",
		    "\"2\"");
		ADD(st, "run_at", &c, NULL, NULL, "\"2026-01-31T14:00:00Z\"",
		    "\"2099-01-01\"", "\"infinity\"", "\"-infinity\"",
		    "\"soon\"", "5", "\"epoch\"");
		ADD(st, "queue", &c, NULL, NULL, "\"q\"", "\"\"", "1");
		ADD(st, "ordering_key", &c, NULL, NULL, "\"o\"", "2");
		ADD(st, "limit_key", &c, NULL, NULL, "\"l\"", "[]");
		ADD(st, "colour", &c, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
		    "\"red\"");
		cJSON_AddItemToArray(steps, st);
	}
	/* Last, so that the choices before keep their meaning: the
	 * payload limit (pgjob.settings) at 8 bytes for this input. */
	*small = pick(&c, 2);
	char *json = cJSON_PrintUnformatted(doc), *text;
	cJSON_Delete(doc);
	/* The caller frees it with free(), as the other kind of input. */
	if (!json || !(text = strdup(json)))
		abort();
	cJSON_free(json);
	return text;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *err = NULL;

	if (!db)
		setup();
	char *doc;
	int small = 0;
	if (size && data[0] == 1) {
		doc = build(data + 1, size - 1, &small);
	} else {
		if (!(doc = malloc(size + 1)))
			abort();
		memcpy(doc, data, size);
		doc[size] = '\0';
	}
	if (getenv("PGJOBD_FUZZ_VERBOSE"))
		fprintf(stderr, "  %s\n", doc);
	if (db_exec(db, "begin", &err) < 0 ||
	    (small &&
	     db_exec(db, "update pgjob.settings set max_payload_bytes = 8",
		     &err) < 0)) {
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
