/*
 * cli: connecting, messages, JSON and tables for the commands of pgjob.
 */
#include "cli/cli.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "db/db.h"
#include "db/migrate.h"
#include "db/rowjson.h"
#include "common/text.h"
#include "common/util.h"

int
cli_fail(int code, const char *fmt, ...)
{
	va_list ap;
	char *msg;

	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		abort(); /* out of memory, as in xmalloc() */
	va_end(ap);
	/* Messages quote arguments, keys and server errors: one line, and
	 * nothing in it that a terminal would act on. */
	char *line = cli_one_line(msg, SIZE_MAX);
	fprintf(stderr, "pgjob: %s\n", line);
	free(line);
	free(msg);
	return code;
}

struct db_conn *
cli_connect(struct cli *cli)
{
	const char *conninfo = cli->database;
	char *err;

	if (!conninfo && cli->cfg)
		conninfo = cli->cfg->conninfo;
	struct db_conn *conn = db_connect(conninfo, "pgjob", &err);
	if (!conn) {
		cli_fail(CLI_EXIT_FAILED, "%s", err);
		free(err);
	}
	return conn;
}

int
cli_open(struct cli *cli, struct db_conn **conn)
{
	char *err;
	int version = -1;

	*conn = cli_connect(cli);
	if (!*conn)
		return CLI_EXIT_FAILED;
	/* Every timestamp in one format (rowjson.c's), and no JIT: the
	 * planner's cost of status's and top's statements (a few small index
	 * scans per queue) passes jit_above_cost, and compiling them took a
	 * second of the 1.2 s that status's queues took with two million
	 * jobs; nothing pgjob runs is long enough to win it back (the
	 * console's session says the same, web/api.c). */
	struct db_rows *res =
		cli_exec(*conn, "connect",
			 "select set_config('datestyle', 'ISO, YMD', false),"
			 " set_config('jit', 'off', false)",
			 0, NULL);
	if (!res) {
		db_close(*conn);
		return CLI_EXIT_FAILED;
	}
	db_rows_free(res);
	if (migrate_check(*conn, &version, &err) < 0) {
		/* No version at all means that reading it failed: a
		 * database error, not a schema we cannot use. */
		int code = version >= 0 ? EXIT_CONFIG : CLI_EXIT_FAILED;
		cli_fail(code, "%s", err);
		free(err);
		db_close(*conn);
		return code;
	}
	return 0;
}

/*
 * text is "SQLSTATE: message".  The schema's own messages start with
 * "pgjob: " (they are read in psql and in logs too): after our own prefix
 * that would say it twice.
 */
static void
fail_server(const char *what, const char *text)
{
	const char *sep = strstr(text, ": ");
	int head = sep ? (int)(sep - text) + 2 : 0;
	if (sep && strncmp(text + head, "pgjob: ", 7) == 0)
		cli_fail(CLI_EXIT_FAILED, "%s: %.*s%s", what, head, text,
			 text + head + 7);
	else
		cli_fail(CLI_EXIT_FAILED, "%s: %s", what, text);
}

struct db_rows *
cli_exec(struct db_conn *conn, const char *what, const char *sql, int nparams,
	 const char *const *params)
{
	char *text;
	struct db_rows *res = db_query(conn, sql, nparams, params, &text);
	if (res)
		return res;
	fail_server(what, text);
	free(text);
	/* The hint says what to do instead ("Known queues: ..."). */
	const char *hint = db_error_hint(conn);
	if (hint)
		cli_fail(CLI_EXIT_FAILED, "hint: %s", hint);
	return NULL;
}

int
cli_abort(struct db_conn *conn)
{
	db_rollback(conn);
	db_close(conn);
	return CLI_EXIT_FAILED;
}

int
cli_bad_option(const char *cmd, int c, char **argv)
{
	const char *arg = argv[optind - 1];
	if (c == ':')
		return cli_fail(CLI_EXIT_USAGE,
				"%s: option \"%s\" needs a value", cmd, arg);
	if (optopt && arg[0] == '-' && arg[1] != '-')
		return cli_fail(CLI_EXIT_USAGE, "%s: unknown option \"-%c\"",
				cmd, optopt);
	return cli_fail(CLI_EXIT_USAGE, "%s: unknown option \"%s\"", cmd, arg);
}

int
cli_parse_json_only(const char *cmd, int argc, char **argv, int *json)
{
	static const struct option opts[] = {
		{"json", no_argument, NULL, 'j'},
		{NULL, 0, NULL, 0},
	};
	int c;

	optind = 0;
	opterr = 0;
	/* "-" (stdin for workflow submit) is an argument to getopt. */
	while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
		if (c != 'j')
			return cli_bad_option(cmd, c, argv);
		*json = 1;
	}
	return 0;
}

int
cli_parse_int(const char *s, long lo, long hi, long *out)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (!*s || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

int
cli_parse_id(const char *cmd, const char *s, char *buf, size_t len)
{
	char *end;
	long long v = strtoll(s, &end, 10);
	if (!isdigit((unsigned char)*s) || *end || v <= 0)
		return cli_fail(CLI_EXIT_USAGE,
				"%s: bad job id \"%s\" (a positive integer)",
				cmd, s);
	snprintf(buf, len, "%lld", v);
	return 0;
}

/* The row-to-JSON helpers live in src/db/rowjson.c, which the web
 * console's API shares; these names stay for the commands. */
cJSON *
cli_json_string(const char *v)
{
	return rowjson_string(v);
}

cJSON *
cli_json_value(const struct db_rows *res, int row, int col)
{
	return rowjson_value(res, row, col);
}

void
cli_json_add_columns(cJSON *obj, const struct db_rows *res, int row, int from,
		     int to)
{
	rowjson_add_columns(obj, res, row, from, to);
}

void
cli_json_print(cJSON *item)
{
	char *text = cJSON_PrintUnformatted(item);
	puts(text);
	cJSON_free(text);
	cJSON_Delete(item);
}

void
cli_table_init(struct cli_table *t, int ncols, const char *const *head,
	       const char *align)
{
	memset(t, 0, sizeof(*t));
	t->ncols = ncols;
	t->head = head;
	t->align = align;
}

void
cli_table_add(struct cli_table *t, const char *const *row)
{
	if (t->nrows == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 16;
		t->cell = xrealloc(t->cell,
				   t->cap * (size_t)t->ncols * sizeof(char *));
	}
	char **cell = t->cell + t->nrows * (size_t)t->ncols;
	for (int c = 0; c < t->ncols; c++)
		cell[c] = cli_one_line(row[c] ? row[c] : "-", SIZE_MAX);
	t->nrows++;
}

/* Width on a terminal: UTF-8 code points, not bytes. */
static size_t
width(const char *s)
{
	size_t n = 0;
	for (; *s; s++)
		if (((unsigned char)*s & 0xc0) != 0x80)
			n++;
	return n;
}

static void
print_row(const struct cli_table *t, FILE *f, const char *indent,
	  const char *const *row, const size_t *w)
{
	fputs(indent, f);
	for (int c = 0; c < t->ncols; c++) {
		int last = c == t->ncols - 1;
		size_t pad = w[c] - width(row[c]);
		if (t->align[c] == 'r')
			fprintf(f, "%*s%s", (int)pad, "", row[c]);
		else
			fprintf(f, "%s%*s", row[c], last ? 0 : (int)pad, "");
		fputs(last ? "\n" : "  ", f);
	}
}

void
cli_table_print(struct cli_table *t, FILE *f, const char *indent)
{
	size_t *w = xcalloc((size_t)t->ncols, sizeof(size_t));
	for (int c = 0; c < t->ncols; c++)
		w[c] = width(t->head[c]);
	for (size_t r = 0; r < t->nrows; r++)
		for (int c = 0; c < t->ncols; c++) {
			size_t n = width(t->cell[r * (size_t)t->ncols + c]);
			if (n > w[c])
				w[c] = n;
		}
	print_row(t, f, indent, t->head, w);
	for (size_t r = 0; r < t->nrows; r++)
		print_row(t, f, indent,
			  (const char *const *)t->cell + r * (size_t)t->ncols,
			  w);
	for (size_t i = 0; i < t->nrows * (size_t)t->ncols; i++)
		free(t->cell[i]);
	free(t->cell);
	free(w);
	t->cell = NULL;
	t->nrows = t->cap = 0;
}

const char *
cli_format_age(double seconds, char *buf, size_t len)
{
	long long s = seconds > 0 ? (long long)seconds : 0;
	if (s < 60)
		snprintf(buf, len, "%llds", s);
	else if (s < 3600)
		snprintf(buf, len, "%lldm%02llds", s / 60, s % 60);
	else if (s < 86400)
		snprintf(buf, len, "%lldh%02lldm", s / 3600, s % 3600 / 60);
	else
		snprintf(buf, len, "%lldd%02lldh", s / 86400, s % 86400 / 3600);
	return buf;
}

char *
cli_one_line(const char *s, size_t max)
{
	char *safe = text_safe(s, NULL, "\n\r\t");
	size_t total = width(safe), chars = 0, i;

	if (max < 4)
		max = 4;
	if (total <= max)
		return safe;
	/* Cut before the character that would pass max - 3. */
	for (i = 0; safe[i]; i++) {
		int start = ((unsigned char)safe[i] & 0xc0) != 0x80;
		if (start && chars++ == max - 3)
			break;
	}
	memcpy(safe + i, "...", 4);
	return safe;
}

char *
cli_text(const char *s)
{
	return text_safe(s, "\n\t", NULL);
}

const char *
cli_format_time(const char *ts, char *buf, size_t len)
{
	const char *dot = strchr(ts, '.');
	if (!dot) {
		snprintf(buf, len, "%s", ts);
		return buf;
	}
	const char *rest = dot + 1;
	while (isdigit((unsigned char)*rest))
		rest++;
	snprintf(buf, len, "%.*s%s", (int)(dot - ts), ts, rest);
	return buf;
}
