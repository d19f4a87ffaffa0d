/*
 * db: the database layer's own types, and the synchronous connection that
 * pgjob, migrations and a worker's session setup use.  Nothing above
 * src/db/ sees libpq: a connection is a struct db_conn, a result a struct
 * db_rows (copied out of libpq), an outcome a struct db_status.  The
 * worker's asynchronous connection on libev is dbev.h; the statements are
 * in the modules of their subjects (claim.c, finish.c, renew.c, lease.c,
 * session.c, schedule.c, prune.c, migrate.c...; docs/architecture.md).
 */
#ifndef PGJOBD_DB_H
#define PGJOBD_DB_H

/* Why a database call failed, which decides what the caller does next. */
enum db_error {
	DB_OK,
	DB_TRANSIENT, /* retry the statement (serialization, deadlock) */
	DB_PERMANENT, /* the statement is wrong for this data */
	DB_LOST,      /* the connection is gone or unusable: reconnect */
};

/*
 * How a statement ended.  sqlstate is "" and text "" when it succeeded or
 * no server error came (a lost connection: text then says what libpq
 * said).  Both strings are borrowed for the duration of the callback or
 * call that hands the status over.
 */
struct db_status {
	enum db_error error;
	int answered; /* 0: the connection was lost before any answer */
	const char *sqlstate;
	const char *text; /* "SQLSTATE: message", one line */
};

/* The column types that the CLI prints differently. */
enum db_type {
	DB_TYPE_TEXT,
	DB_TYPE_BOOL,
	DB_TYPE_NUMBER, /* integers, floats, numeric, oid */
	DB_TYPE_JSON,	/* json and jsonb */
	DB_TYPE_TIMESTAMPTZ,
	DB_TYPE_TIMESTAMP,
};

struct db_conn;
struct db_rows;

/*
 * Connects synchronously.  conninfo NULL or "" means libpq's PG* defaults.
 * Returns the connection (close with db_close()), or NULL with *err set to
 * a message that names the target without its secrets (caller frees).
 */
struct db_conn *db_connect(const char *conninfo, const char *appname,
			   char **err);
/*
 * The same without waiting: starts a connection (PQconnectStartParams())
 * and returns it under way, or NULL with *err set.  Drive it with
 * db_connect_poll() until that says 1 or -1; close it with db_close()
 * either way once it is not wanted.
 */
struct db_conn *db_connect_start(const char *conninfo, const char *appname,
				 char **err);
/*
 * One step of a connection under way, the conninfo it was started with
 * naming the target in errors: 1 connected; 0 not yet, call again once *fd
 * is writable (*want_write 1) or readable (0), the socket may change from
 * one step to the next; -1 failed, *err set as db_connect()'s.
 */
int db_connect_poll(struct db_conn *c, const char *conninfo, int *fd,
		    int *want_write, char **err);
/* Closes the connection; NULL is allowed. */
void db_close(struct db_conn *c);
/* 1 while the connection is up. */
int db_connected(const struct db_conn *c);

/*
 * Runs sql (one or more statements, no parameters, no rows wanted).
 * Returns 0, or -1 with *err set to "SQLSTATE: message" (caller frees; err
 * may be NULL).
 */
int db_exec(struct db_conn *c, const char *sql, char **err);
/*
 * Runs one statement with text parameters and copies its rows out.  Returns
 * them (free with db_rows_free()), or NULL with *err set as db_exec() does.
 * A statement that returns no rows gives an empty result whose
 * db_rows_affected() counts what it changed.
 */
struct db_rows *db_query(struct db_conn *c, const char *sql, int nparams,
			 const char *const *params, char **err);
/*
 * The hint (HINT) of the error of the last db_exec() or db_query() on c,
 * or NULL when it succeeded or its error had none.  Borrowed until the
 * next statement on c.
 */
const char *db_error_hint(const struct db_conn *c);
/* Rolls back an open or failed transaction, if any. */
void db_rollback(struct db_conn *c);

int db_rows_count(const struct db_rows *r);
int db_rows_columns(const struct db_rows *r);
/* Row row's column col as text, borrowed from r; NULL for SQL null. */
const char *db_rows_value(const struct db_rows *r, int row, int col);
/* The same, "" for SQL null. */
const char *db_rows_text(const struct db_rows *r, int row, int col);
const char *db_rows_name(const struct db_rows *r, int col);
enum db_type db_rows_type(const struct db_rows *r, int col);
/* Rows an INSERT, UPDATE or DELETE changed. */
long long db_rows_affected(const struct db_rows *r);
void db_rows_free(struct db_rows *r);

/* 1 when libpq can parse conninfo (NULL and "" included). */
int db_conninfo_valid(const char *conninfo);

/*
 * conninfo as keyword=value pairs without any option libpq marks secret,
 * for log lines.  Returns a new string; caller frees.  Never returns the
 * input verbatim.
 */
char *db_conninfo_redacted(const char *conninfo);

#endif
