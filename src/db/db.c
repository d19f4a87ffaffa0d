/*
 * db: connecting, results copied out of libpq, error classification and
 * conninfo redaction.
 */
#include "db/db.h"

#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "db/internal.h"
#include "db/sqlstate.h"

/* A synchronous connection: libpq's, wrapped so that nothing above the
 * database layer needs libpq's header. */
struct db_conn {
	PGconn *pg;
	char *hint; /* of the last statement, if it failed with one */
};

/* A result, copied: cells[row * ncols + col], NULL for SQL null. */
struct db_rows {
	int nrows, ncols;
	char **names;
	enum db_type *types;
	char **cells;
	long long affected;
};

/* Type OIDs of the columns printed differently (PostgreSQL's pg_type.dat). */
#define OID_BOOL	16
#define OID_INT8	20
#define OID_INT2	21
#define OID_INT4	23
#define OID_OID		26
#define OID_JSON	114
#define OID_FLOAT4	700
#define OID_FLOAT8	701
#define OID_TIMESTAMP	1114
#define OID_TIMESTAMPTZ 1184
#define OID_NUMERIC	1700
#define OID_JSONB	3802

int
db_conninfo_valid(const char *conninfo)
{
	char *errmsg = NULL;
	PQconninfoOption *opts;
	if (!conninfo || !*conninfo)
		return 1;
	opts = PQconninfoParse(conninfo, &errmsg);
	PQfreemem(errmsg);
	PQconninfoFree(opts);
	return opts != NULL;
}

/* Why conn (NULL: out of memory) did not connect to conninfo, one line,
 * naming the target without its secrets. */
static char *
connect_error(const char *conninfo, const PGconn *conn)
{
	char *target = db_conninfo_redacted(conninfo);
	const char *why = conn ? PQerrorMessage(conn) : "out of memory";
	size_t n = strlen(why);
	while (n > 0 && (why[n - 1] == '\n' || why[n - 1] == ' '))
		n--;
	char *trimmed = xstrndup(why, n);
	for (char *p = trimmed; *p; p++)
		if (*p == '\n')
			*p = ' ';
	char *err = xasprintf("cannot connect to database (%s): %s",
			      *target ? target : "PG* environment defaults",
			      trimmed);
	free(trimmed);
	free(target);
	return err;
}

/*
 * A connection to conninfo, made (wait) or started (PQconnectStartParams(),
 * for db_connect_poll()), or NULL with *err set.  expand_dbname: dbname may
 * be a whole conninfo or URI; appname comes after it and wins over one that
 * conninfo names.
 */
static struct db_conn *
connect_conn(const char *conninfo, const char *appname, int wait, char **err)
{
	const char *keys[] = {"dbname", "application_name", NULL};
	const char *vals[] = {conninfo ? conninfo : "", appname, NULL};
	*err = NULL;
	if (!db_conninfo_valid(conninfo)) {
		/* libpq's message may quote part of a password. */
		*err = xstrdup("cannot connect to database: the connection "
			       "string is malformed (not shown: it may hold a "
			       "password)");
		return NULL;
	}
	PGconn *pg = wait ? PQconnectdbParams(keys, vals, 1)
			  : PQconnectStartParams(keys, vals, 1);
	/* Made: CONNECTION_OK; started: anything but CONNECTION_BAD. */
	if (!pg || PQstatus(pg) == CONNECTION_BAD) {
		*err = connect_error(conninfo, pg);
		PQfinish(pg);
		return NULL;
	}
	struct db_conn *c = xcalloc(1, sizeof(*c));
	c->pg = pg;
	return c;
}

struct db_conn *
db_connect(const char *conninfo, const char *appname, char **err)
{
	return connect_conn(conninfo, appname, 1, err);
}

struct db_conn *
db_connect_start(const char *conninfo, const char *appname, char **err)
{
	return connect_conn(conninfo, appname, 0, err);
}

int
db_connect_poll(struct db_conn *c, const char *conninfo, int *fd,
		int *want_write, char **err)
{
	*err = NULL;
	switch (PQconnectPoll(c->pg)) {
	case PGRES_POLLING_OK:
		return 1;
	case PGRES_POLLING_READING:
		*want_write = 0;
		break;
	case PGRES_POLLING_WRITING:
		*want_write = 1;
		break;
	default:
		*err = connect_error(conninfo, c->pg);
		return -1;
	}
	/* It changes when libpq tries the next host or address. */
	*fd = PQsocket(c->pg);
	return 0;
}

void
db_close(struct db_conn *c)
{
	if (!c)
		return;
	PQfinish(c->pg);
	free(c->hint);
	free(c);
}

int
db_connected(const struct db_conn *c)
{
	return c && PQstatus(c->pg) == CONNECTION_OK;
}

PGconn *
db_pgconn(struct db_conn *c)
{
	return c->pg;
}

PGconn *
db_release(struct db_conn *c)
{
	PGconn *pg = c->pg;
	free(c->hint);
	free(c);
	return pg;
}

/*
 * 0 when res succeeded; else -1 with *err set (err may be NULL) and c's
 * hint kept.
 */
static int
failed(struct db_conn *c, PGresult *res, char **err)
{
	ExecStatusType st = PQresultStatus(res);
	free(c->hint);
	c->hint = NULL;
	if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
		return 0;
	if (err)
		*err = db_error_text(c->pg, res);
	const char *hint =
		res ? PQresultErrorField(res, PG_DIAG_MESSAGE_HINT) : NULL;
	c->hint = xstrdup(hint);
	return -1;
}

int
db_exec(struct db_conn *c, const char *sql, char **err)
{
	PGresult *res = PQexec(c->pg, sql);
	int rc = failed(c, res, err);
	PQclear(res);
	return rc;
}

static enum db_type
type_of(Oid oid)
{
	switch (oid) {
	case OID_BOOL:
		return DB_TYPE_BOOL;
	case OID_INT2:
	case OID_INT4:
	case OID_INT8:
	case OID_OID:
	case OID_FLOAT4:
	case OID_FLOAT8:
	case OID_NUMERIC:
		return DB_TYPE_NUMBER;
	case OID_JSON:
	case OID_JSONB:
		return DB_TYPE_JSON;
	case OID_TIMESTAMPTZ:
		return DB_TYPE_TIMESTAMPTZ;
	case OID_TIMESTAMP:
		return DB_TYPE_TIMESTAMP;
	default:
		return DB_TYPE_TEXT;
	}
}

struct db_rows *
db_query(struct db_conn *c, const char *sql, int nparams,
	 const char *const *params, char **err)
{
	PGresult *res =
		PQexecParams(c->pg, sql, nparams, NULL, params, NULL, NULL, 0);
	if (failed(c, res, err) < 0) {
		PQclear(res);
		return NULL;
	}
	struct db_rows *r = xcalloc(1, sizeof(*r));
	r->nrows = PQntuples(res);
	r->ncols = PQnfields(res);
	r->affected = atoll(PQcmdTuples(res));
	r->names = xcalloc((size_t)r->ncols + 1, sizeof(char *));
	r->types = xcalloc((size_t)r->ncols + 1, sizeof(enum db_type));
	for (int j = 0; j < r->ncols; j++) {
		r->names[j] = xstrdup(PQfname(res, j));
		r->types[j] = type_of(PQftype(res, j));
	}
	r->cells = xcalloc((size_t)r->nrows * (size_t)r->ncols + 1,
			   sizeof(char *));
	for (int i = 0; i < r->nrows; i++)
		for (int j = 0; j < r->ncols; j++)
			if (!PQgetisnull(res, i, j))
				r->cells[(size_t)i * (size_t)r->ncols +
					 (size_t)j] =
					xstrndup(
						PQgetvalue(res, i, j),
						(size_t)PQgetlength(res, i, j));
	PQclear(res);
	return r;
}

const char *
db_error_hint(const struct db_conn *c)
{
	return c->hint;
}

void
db_rollback(struct db_conn *c)
{
	if (PQtransactionStatus(c->pg) != PQTRANS_IDLE)
		PQclear(PQexec(c->pg, "rollback"));
}

int
db_rows_count(const struct db_rows *r)
{
	return r->nrows;
}

int
db_rows_columns(const struct db_rows *r)
{
	return r->ncols;
}

const char *
db_rows_value(const struct db_rows *r, int row, int col)
{
	return r->cells[(size_t)row * (size_t)r->ncols + (size_t)col];
}

const char *
db_rows_text(const struct db_rows *r, int row, int col)
{
	const char *v = db_rows_value(r, row, col);
	return v ? v : "";
}

const char *
db_rows_name(const struct db_rows *r, int col)
{
	return r->names[col];
}

enum db_type
db_rows_type(const struct db_rows *r, int col)
{
	return r->types[col];
}

long long
db_rows_affected(const struct db_rows *r)
{
	return r->affected;
}

void
db_rows_free(struct db_rows *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < (size_t)r->nrows * (size_t)r->ncols; i++)
		free(r->cells[i]);
	for (int j = 0; j < r->ncols; j++)
		free(r->names[j]);
	free(r->cells);
	free(r->names);
	free(r->types);
	free(r);
}

struct db_status
db_status_of(const PGresult *res, char **text)
{
	struct db_status st = {db_classify(NULL, res), res != NULL, "", ""};
	*text = NULL;
	if (st.error == DB_OK)
		return st;
	const char *state =
		res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	st.sqlstate = state ? state : "";
	*text = res ? db_error_text(NULL, res)
		    : xstrdup("the connection was lost");
	st.text = *text;
	return st;
}

int
db_tuples_ok(const PGresult *res)
{
	return res && PQresultStatus(res) == PGRES_TUPLES_OK;
}

enum db_error
db_classify(PGconn *conn, const PGresult *res)
{
	if (conn && PQstatus(conn) != CONNECTION_OK)
		return DB_LOST;
	if (!res)
		return DB_LOST;
	switch (PQresultStatus(res)) {
	case PGRES_COMMAND_OK:
	case PGRES_TUPLES_OK:
	case PGRES_SINGLE_TUPLE:
	case PGRES_PIPELINE_SYNC:
		return DB_OK;
	case PGRES_FATAL_ERROR:
	case PGRES_NONFATAL_ERROR:
	case PGRES_PIPELINE_ABORTED:
		break;
	default:
		return DB_LOST;
	}
	const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	if (!state)
		return DB_LOST; /* libpq's own error: the connection broke */
	if (sqlstate_is(state, SQLSTATE_CLASS_CONNECTION) ||
	    sqlstate_is(state, SQLSTATE_PREFIX_SHUTDOWN) ||
	    sqlstate_is(state, SQLSTATE_READ_ONLY_TRANSACTION))
		return DB_LOST;
	/* The whole class 53 (SQLSTATE_TOO_MANY_CONNECTIONS among them). */
	if (sqlstate_is(state, SQLSTATE_SERIALIZATION_FAILURE) ||
	    sqlstate_is(state, SQLSTATE_DEADLOCK_DETECTED) ||
	    sqlstate_is(state, SQLSTATE_LOCK_NOT_AVAILABLE) ||
	    sqlstate_is(state, SQLSTATE_CLASS_RESOURCES))
		return DB_TRANSIENT;
	return DB_PERMANENT;
}

char *
db_error_text(PGconn *conn, const PGresult *res)
{
	const char *state =
		res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	const char *msg =
		res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
	if (!msg)
		msg = conn ? PQerrorMessage(conn) : "no connection";
	if (!*msg && res)
		msg = PQresultErrorMessage(res);
	size_t n = strlen(msg);
	while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
		n--;
	char *text = xasprintf("%s%s%.*s", state ? state : "",
			       state ? ": " : "", (int)n, msg);
	for (char *p = text; *p; p++)
		if (*p == '\n')
			*p = ' ';
	return text;
}

/*
 * libpq marks the options it would not show in a dialog with dispchar "*"
 * (password and sslpassword in libpq 15): every one of them is left out,
 * including any a later libpq adds.  The names are checked too, in case a
 * libpq does not mark them.
 */
static int
secret(const PQconninfoOption *o)
{
	return (o->dispchar && strchr(o->dispchar, '*')) ||
	       strcmp(o->keyword, "password") == 0 ||
	       strcmp(o->keyword, "sslpassword") == 0;
}

char *
db_conninfo_redacted(const char *conninfo)
{
	struct buf b = {0};
	char *errmsg = NULL;
	PQconninfoOption *opts;

	if (!conninfo || !*conninfo)
		return xstrdup("");
	opts = PQconninfoParse(conninfo, &errmsg);
	if (!opts) {
		PQfreemem(errmsg);
		return xstrdup("(unparsable conninfo)");
	}
	for (PQconninfoOption *o = opts; o->keyword; o++) {
		if (!o->val || secret(o))
			continue;
		buf_appendf(&b, "%s%s=%s", b.len ? " " : "", o->keyword,
			    o->val);
	}
	PQconninfoFree(opts);
	if (!b.data)
		return xstrdup("");
	return b.data;
}

int
db_cmp_int64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

char *
db_text_array(const char *const *v, size_t n)
{
	struct buf b = {0};
	buf_append(&b, "{", 1);
	for (size_t i = 0; i < n; i++) {
		if (i)
			buf_append(&b, ",", 1);
		if (!v[i]) {
			buf_append(&b, "NULL", 4);
			continue;
		}
		buf_append(&b, "\"", 1);
		/* Each run without a quote or a backslash at once, then the
		 * character that ended it, escaped. */
		for (const char *s = v[i]; *s;) {
			size_t k = strcspn(s, "\"\\");
			buf_append(&b, s, k);
			s += k;
			if (*s) {
				buf_append(&b, "\\", 1);
				buf_append(&b, s++, 1);
			}
		}
		buf_append(&b, "\"", 1);
	}
	buf_append(&b, "}", 1);
	return b.data;
}

char *
db_int_array(const int64_t *v, size_t n)
{
	struct buf b = {0};
	buf_append(&b, "{", 1);
	for (size_t i = 0; i < n; i++) {
		if (i)
			buf_append(&b, ",", 1);
		buf_append_int(&b, (long long)v[i]);
	}
	buf_append(&b, "}", 1);
	return b.data;
}
