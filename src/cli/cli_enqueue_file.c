/*
 * cli_enqueue_file: `pgjob enqueue --file FILE|-` (docs/cli.md, "enqueue").
 *
 * FILE has JSON Lines: one job object per line, with the keys of
 * pgjob.enqueue_many() (kind, payload, queue, run_at, ...); blank lines are
 * skipped.  The lines go to pgjob.enqueue_many() in batches of BATCH_ROWS
 * (or BATCH_BYTES of text), all in one transaction: the file goes in whole
 * or not at all, and the ids, one per job line in the order of the lines,
 * are printed only after the commit.
 *
 * Each line is checked here for what the server could not place (JSON
 * syntax, an object, its length), and by the server for everything else;
 * either way the error names the line, "FILE:LINE: reason", the server's
 * from the element index its message carries ("jobs[N]: ").  An error
 * without one (JSON that PostgreSQL refuses, such as \u0000 in a string)
 * names the lines of the batch, "FILE:FIRST-LAST: ...".  A line may be
 * at most the database's payload limit plus LINE_SLACK bytes long, so the
 * reader's memory is bounded whatever the file holds.
 */
#include "cli/cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

/* 1,000 jobs a call went as fast as 10,000, with less memory a call
 * (docs/performance.md, "Enqueue"). */
#define BATCH_ROWS  1000
#define BATCH_BYTES (8 * 1024 * 1024)
/* What a line may have beside its payload: the other keys. */
#define LINE_SLACK (64 * 1024)
/* The payload limit when this role may not read pgjob.settings. */
#define DEFAULT_PAYLOAD_LIMIT 1048576

static const char MANY_SQL[] = "select pgjob.enqueue_many($1::jsonb)";
static const char LIMIT_SQL[] =
	"select has_table_privilege('pgjob.settings', 'select')";
static const char LIMIT_READ_SQL[] =
	"select max_payload_bytes from pgjob.settings";

/* One run: the file, the batch being built, and the ids to print. */
struct file_run {
	const char *name; /* FILE, or "stdin" */
	FILE *f;
	struct db_conn *conn;
	size_t max_line;
	long lineno;
	struct buf line;  /* the current line */
	struct buf batch; /* "[line,line,...]" being built */
	long *lines;	  /* the line number of each element of batch */
	int n;		  /* elements in batch */
	struct buf out;	  /* what to print after the commit */
	long jobs;
	int json;
};

/*
 * Reads the next line into r->line (without its newline).  Returns 1, 0 at
 * the end of the file, or -1 after printing why (too long, a read error).
 */
static int
read_line(struct file_run *r)
{
	int c;

	buf_reset(&r->line);
	r->lineno++;
	while ((c = getc_unlocked(r->f)) != EOF && c != '\n') {
		if (r->line.len >= r->max_line) {
			cli_fail(CLI_EXIT_FAILED,
				 "%s:%ld: the line is longer than %zu bytes "
				 "(the payload limit and %d for the other "
				 "keys)",
				 r->name, r->lineno, r->max_line, LINE_SLACK);
			return -1;
		}
		char ch = (char)c;
		buf_append(&r->line, &ch, 1);
	}
	if (ferror(r->f)) {
		cli_fail(CLI_EXIT_FAILED, "%s: cannot read: %s", r->name,
			 strerror(errno));
		return -1;
	}
	return c == EOF && r->line.len == 0 ? 0 : 1;
}

/* 1 for a space, a tab or the CR of a CRLF (not a NUL byte). */
static int
is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

/* 1 for a line of blanks only. */
static int
blank(const struct buf *b)
{
	for (size_t i = 0; i < b->len; i++)
		if (!is_blank(b->data[i]))
			return 0;
	return 1;
}

/* What follows "SQLSTATE" in a message that names an element. */
#define ELEMENT_PREFIX ": pgjob.enqueue_many: jobs["

/*
 * A server error "SQLSTATE: pgjob.enqueue_many: jobs[N]: reason" as
 * "FILE:LINE: reason"; any other as "FILE:A-B: error" (the lines of the
 * batch).  Prints it and the hint; returns CLI_EXIT_FAILED.
 */
static int
fail_batch(struct file_run *r, const char *text)
{
	size_t plen = strlen(ELEMENT_PREFIX);
	const char *at = NULL;
	if (strlen(text) > 5 + plen &&
	    strncmp(text + 5, ELEMENT_PREFIX, plen) == 0)
		at = text + 5 + plen;
	char *end = NULL;
	long i = at ? strtol(at, &end, 10) : -1;
	if (at && end && strncmp(end, "]: ", 3) == 0 && i >= 0 && i < r->n)
		cli_fail(CLI_EXIT_FAILED, "%s:%ld: %s", r->name, r->lines[i],
			 end + 3);
	else if (r->n == 1)
		cli_fail(CLI_EXIT_FAILED, "%s:%ld: %s", r->name, r->lines[0],
			 text);
	else
		cli_fail(CLI_EXIT_FAILED, "%s:%ld-%ld: %s", r->name,
			 r->lines[0], r->lines[r->n - 1], text);
	const char *hint = db_error_hint(r->conn);
	if (hint)
		cli_fail(CLI_EXIT_FAILED, "hint: %s", hint);
	return CLI_EXIT_FAILED;
}

/* Sends the batch; its ids go to r->out.  Returns 0 or the exit code. */
static int
flush(struct file_run *r)
{
	char *err = NULL;

	if (r->n == 0)
		return 0;
	buf_append(&r->batch, "]", 1);
	const char *p[] = {r->batch.data};
	struct db_rows *res = db_query(r->conn, MANY_SQL, 1, p, &err);
	if (!res) {
		int rc = fail_batch(r, err);
		free(err);
		return rc;
	}
	for (int i = 0; i < db_rows_count(res); i++) {
		if (r->json)
			buf_appendf(&r->out, "{\"line\":%ld,\"id\":%s}\n",
				    r->lines[i], db_rows_text(res, i, 0));
		else
			buf_appendf(&r->out, "%s\n", db_rows_text(res, i, 0));
	}
	r->jobs += db_rows_count(res);
	db_rows_free(res);
	buf_reset(&r->batch);
	r->n = 0;
	return 0;
}

/* Checks the line and adds it to the batch.  Returns 0 or the exit code. */
static int
add_line(struct file_run *r)
{
	const char *end = NULL;
	cJSON *doc =
		cJSON_ParseWithLengthOpts(r->line.data, r->line.len, &end, 0);
	int object = cJSON_IsObject(doc);
	cJSON_Delete(doc);
	/* cJSON stops at the end of the value: only blanks may follow. */
	if (doc && end)
		for (; end < r->line.data + r->line.len; end++)
			if (!is_blank(*end)) {
				doc = NULL;
				break;
			}
	if (!doc)
		return cli_fail(CLI_EXIT_FAILED, "%s:%ld: not valid JSON",
				r->name, r->lineno);
	if (!object)
		return cli_fail(CLI_EXIT_FAILED,
				"%s:%ld: a job must be a JSON object", r->name,
				r->lineno);
	buf_append(&r->batch, r->n ? "," : "[", 1);
	buf_append(&r->batch, r->line.data, r->line.len);
	r->lines[r->n++] = r->lineno;
	if (r->n == BATCH_ROWS || r->batch.len >= BATCH_BYTES)
		return flush(r);
	return 0;
}

/* The longest line read: the payload limit that applies, and the slack. */
static int
line_limit(struct file_run *r)
{
	long limit = DEFAULT_PAYLOAD_LIMIT;
	struct db_rows *res = cli_exec(r->conn, "enqueue", LIMIT_SQL, 0, NULL);
	if (!res)
		return -1;
	int readable = db_rows_text(res, 0, 0)[0] == 't';
	db_rows_free(res);
	if (readable) {
		if (!(res = cli_exec(r->conn, "enqueue", LIMIT_READ_SQL, 0,
				     NULL)))
			return -1;
		if (db_rows_count(res) == 1)
			limit = atol(db_rows_text(res, 0, 0));
		db_rows_free(res);
	}
	r->max_line = (size_t)limit + LINE_SLACK;
	return 0;
}

/* Reads every line and enqueues them in one transaction. */
static int
run(struct file_run *r)
{
	struct db_rows *res;
	int rc, got;

	if (line_limit(r) < 0)
		return CLI_EXIT_FAILED;
	if (!(res = cli_exec(r->conn, "enqueue", "begin", 0, NULL)))
		return CLI_EXIT_FAILED;
	db_rows_free(res);
	while ((got = read_line(r)) > 0)
		if (!blank(&r->line) && (rc = add_line(r)))
			return rc;
	if (got < 0 || (rc = flush(r)))
		return CLI_EXIT_FAILED;
	if (!(res = cli_exec(r->conn, "enqueue", "commit", 0, NULL)))
		return CLI_EXIT_FAILED;
	db_rows_free(res);
	/* An empty file printed nothing, and has no buffer to print. */
	if (r->out.len)
		fwrite(r->out.data, 1, r->out.len, stdout);
	return 0;
}

int
cli_enqueue_file(struct cli *cli, const char *path, int json)
{
	struct file_run r = {.name = path, .json = json};
	int rc;

	if (strcmp(path, "-") == 0) {
		r.name = "stdin";
		r.f = stdin;
	} else if (!(r.f = fopen(path, "r"))) {
		return cli_fail(CLI_EXIT_FAILED, "enqueue: cannot open %s: %s",
				path, strerror(errno));
	}
	/* cli_connect(), not cli_open(): the enqueue-only role may not read
	 * the schema version, as with pgjob enqueue. */
	if (!(r.conn = cli_connect(cli))) {
		rc = CLI_EXIT_FAILED;
		goto out;
	}
	r.lines = xmalloc(BATCH_ROWS * sizeof(*r.lines));
	rc = run(&r);
	if (rc)
		db_rollback(r.conn);
	db_close(r.conn);
out:
	if (r.f != stdin)
		fclose(r.f);
	free(r.lines);
	buf_free(&r.line);
	buf_free(&r.batch);
	buf_free(&r.out);
	return rc;
}
