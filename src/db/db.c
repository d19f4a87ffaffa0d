/*
 * db: connecting, error classification and conninfo redaction.
 */
#include "db/db.h"

#include <stdlib.h>
#include <string.h>

#include "common/util.h"

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

PGconn *
db_connect(const char *conninfo, const char *appname, char **err)
{
	const char *keys[] = {"dbname", "application_name", NULL};
	const char *vals[] = {conninfo ? conninfo : "", appname, NULL};
	PGconn *conn;

	*err = NULL;
	if (!db_conninfo_valid(conninfo)) {
		/* libpq's message may quote part of a password. */
		*err = xstrdup("cannot connect to database: the connection "
			       "string is malformed (not shown: it may hold a "
			       "password)");
		return NULL;
	}
	/* expand_dbname: dbname may be a whole conninfo or URI. */
	conn = PQconnectdbParams(keys, vals, 1);
	if (conn && PQstatus(conn) == CONNECTION_OK)
		return conn;
	char *target = db_conninfo_redacted(conninfo);
	const char *why = conn ? PQerrorMessage(conn) : "out of memory";
	size_t n = strlen(why);
	while (n > 0 && (why[n - 1] == '\n' || why[n - 1] == ' '))
		n--;
	char *trimmed = xstrndup(why, n);
	for (char *p = trimmed; *p; p++)
		if (*p == '\n')
			*p = ' ';
	*err = xasprintf("cannot connect to database (%s): %s",
			 *target ? target : "PG* environment defaults",
			 trimmed);
	free(trimmed);
	free(target);
	PQfinish(conn);
	return NULL;
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
	if (strncmp(state, "08", 2) == 0 || strncmp(state, "57P0", 4) == 0 ||
	    strcmp(state, "25006") == 0)
		return DB_LOST;
	if (strcmp(state, "40001") == 0 || strcmp(state, "40P01") == 0 ||
	    strcmp(state, "55P03") == 0 || strcmp(state, "53300") == 0 ||
	    strncmp(state, "53", 2) == 0)
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
