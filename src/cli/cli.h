/*
 * cli: what the commands of pgjob share (connecting, messages, option
 * errors, JSON from result rows, aligned tables, ages), and the entry points
 * of the commands that live in cli_*.c.  pgjob.c parses the global options
 * and dispatches; migrate and enqueue stay there.
 *
 * Exit codes, which scripts rely on: 0 done, CLI_EXIT_FAILED (1) the command
 * failed (unknown id, wrong state, database error), CLI_EXIT_USAGE (2),
 * EXIT_CONFIG (78) a config that does not validate or a schema this pgjob
 * cannot work with.  Every failure is one line "pgjob: ..." on stderr (and
 * a line "pgjob: hint: ..." after it when the database gave a hint).
 */
#ifndef PGJOBD_CLI_H
#define PGJOBD_CLI_H

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "common/config.h"
#include "db/db.h"

#define CLI_EXIT_FAILED 1
#define CLI_EXIT_USAGE	2

/* What every command gets from the global options. */
struct cli {
	const char *config_path;
	/* A copy of --database (owned; argv's is scrubbed), else NULL for
	 * cfg->conninfo, else PG*. */
	char *database;
	struct config *cfg; /* NULL when no config file was given */
};

/* Prints "pgjob: ..." as one line on stderr; returns code. */
int cli_fail(int code, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Connects per --database / config / PG*; prints the error on failure. */
struct db_conn *cli_connect(struct cli *cli);
/*
 * cli_connect(), then sets DateStyle ISO (every timestamp printed has one
 * format) and checks the schema version.  Returns 0 with *conn set, or the
 * exit code after printing why (78 for a schema this pgjob cannot use).
 */
int cli_open(struct cli *cli, struct db_conn **conn);

/*
 * Runs sql with text parameters.  Returns the result (caller clears), or
 * NULL after printing "pgjob: what: SQLSTATE: message", and a second line
 * "pgjob: hint: ..." when the error came with a hint.
 */
struct db_rows *cli_exec(struct db_conn *conn, const char *what,
			 const char *sql, int nparams,
			 const char *const *params);
/* Rolls back and finishes conn; returns CLI_EXIT_FAILED. */
int cli_abort(struct db_conn *conn);

/*
 * For getopt_long()'s return c (with optstring ":"...) that no case took:
 * prints the unknown option or missing value for cmd; returns
 * CLI_EXIT_USAGE.
 */
int cli_bad_option(const char *cmd, int c, char **argv);
/*
 * The options of a command that takes --json and nothing else: sets *json
 * and leaves optind at the first argument.  Returns 0, or CLI_EXIT_USAGE
 * (printed) for any other option.
 */
int cli_parse_json_only(const char *cmd, int argc, char **argv, int *json);
/* Parses a decimal integer in [lo, hi]; returns 0 or -1. */
int cli_parse_int(const char *s, long lo, long hi, long *out);
/*
 * Parses a job id (a positive integer) into buf as canonical text.  Returns
 * 0, or CLI_EXIT_USAGE after printing why.
 */
int cli_parse_id(const char *cmd, const char *s, char *buf, size_t len);

/*
 * --json: stdout has one JSON value per line and nothing else (top without
 * --once: one per refresh); errors go to stderr as without it, and exit
 * codes stay the same.  Every string is valid UTF-8: a byte that is not
 * (a SQL_ASCII database keeps any) becomes U+FFFD.
 *
 * Column col of row as JSON: numbers and json/jsonb verbatim (exact, as
 * PostgreSQL printed them), booleans, timestamps as RFC 3339 strings, SQL
 * null as null, anything else as a string.  Returns a new item.  These
 * three are db/rowjson.h's, which the web console shares.
 */
cJSON *cli_json_value(const struct db_rows *res, int row, int col);
/* s as a JSON string, made valid UTF-8 (see above).  Returns a new item. */
cJSON *cli_json_string(const char *s);
/* Adds columns [from, to) of row to obj, named as the columns. */
void cli_json_add_columns(cJSON *obj, const struct db_rows *res, int row,
			  int from, int to);
/* Prints item as JSON on one line on stdout, then frees it. */
void cli_json_print(cJSON *item);

/* An aligned text table; cells are copied. */
struct cli_table {
	int ncols;
	const char *const *head; /* borrowed: ncols titles */
	const char *align;	 /* borrowed: 'l' or 'r' per column */
	char **cell;		 /* nrows * ncols */
	size_t nrows, cap;
};

void cli_table_init(struct cli_table *t, int ncols, const char *const *head,
		    const char *align);
/* Adds a row of t->ncols strings (NULL prints as "-"), each made one line
 * by cli_one_line(). */
void cli_table_add(struct cli_table *t, const char *const *row);
/* Prints the table, every line prefixed with indent, then frees it. */
void cli_table_print(struct cli_table *t, FILE *f, const char *indent);

/* seconds as "42s", "3m07s", "5h02m" or "2d03h" (negative counts as 0). */
const char *cli_format_age(double seconds, char *buf, size_t len);
/*
 * s on one line for a terminal, at most max characters (UTF-8 code points;
 * SIZE_MAX for no limit): line breaks and tabs become spaces, every other
 * control character (ESC, CR, BEL, DEL, C1) and every byte that is not
 * UTF-8 a visible escape (\x1b, \u009b: text.h), and a longer text ends in
 * "...".  Returns a new string; caller frees.
 */
char *cli_one_line(const char *s, size_t max);
/*
 * s for a terminal over several lines: as cli_one_line(), but line breaks
 * and tabs stay, and no limit.  Returns a new string; caller frees.
 */
char *cli_text(const char *s);
/* A timestamp as PostgreSQL prints it, without fractional seconds. */
const char *cli_format_time(const char *ts, char *buf, size_t len);

/* The commands: argv[0] is the command's name.  Each returns its exit code. */
int cli_status_run(struct cli *cli, int argc, char **argv);
/*
 * The queues section of status, which top shows too.  cli_status_queues()
 * returns its result (caller clears) or NULL after printing the error;
 * exact: every job counted, else no count past a thousand (status
 * --exact).
 */
struct db_rows *cli_status_queues(struct db_conn *conn, int exact);
void cli_status_print_queues(const struct db_rows *res, FILE *f);
/* The queues section as status --json has it: an array (new item). */
cJSON *cli_status_queues_json(const struct db_rows *res);
int cli_jobs_list(struct cli *cli, int argc, char **argv);
int cli_jobs_show(struct cli *cli, int argc, char **argv);
int cli_state_retry(struct cli *cli, int argc, char **argv);
int cli_state_cancel(struct cli *cli, int argc, char **argv);
/* pgjob enqueue (cli_enqueue.c). */
int cli_enqueue_run(struct cli *cli, int argc, char **argv);

/*
 * pgjob enqueue --file FILE|- [--json] (cli_enqueue_file.c): the jobs of a
 * JSON Lines file, all in one transaction.
 */
int cli_enqueue_file(struct cli *cli, const char *path, int json);
/* pgjob workflow submit|show|cancel (cli_workflow.c). */
int cli_workflow_run(struct cli *cli, int argc, char **argv);
int cli_prune_run(struct cli *cli, int argc, char **argv);
int cli_top_run(struct cli *cli, int argc, char **argv);
int cli_stats_run(struct cli *cli, int argc, char **argv);
int cli_pause_run(struct cli *cli, int argc, char **argv);
int cli_pause_resume(struct cli *cli, int argc, char **argv);
int cli_limits_run(struct cli *cli, int argc, char **argv);
/* pgjob web [--listen ADDR] | web --hash-password (cli_web.c). */
int cli_web_run(struct cli *cli, int argc, char **argv);
/* pgjob doctor (cli_doctor.c): exits 0 all OK, 1 a warning, 2 a failure. */
int cli_doctor_run(struct cli *cli, int argc, char **argv);
/* pgjob schedules, pgjob schedule run|enable|disable (cli_schedule.c). */
int cli_schedule_ls(struct cli *cli, int argc, char **argv);
int cli_schedule_run(struct cli *cli, int argc, char **argv);

#endif
