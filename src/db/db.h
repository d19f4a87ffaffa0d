/*
 * db: the libpq boundary shared by the daemon and the CLI: connecting,
 * classifying errors by SQLSTATE, and printing a conninfo without its
 * secrets.  The worker's asynchronous connection on libev lives in dbev.c.
 */
#ifndef PGJOBD_DB_H
#define PGJOBD_DB_H

#include <libpq-fe.h>

/* Why a database call failed, which decides what the caller does next. */
enum db_error {
	DB_OK,
	DB_TRANSIENT, /* retry the statement (serialization, deadlock) */
	DB_PERMANENT, /* the statement is wrong for this data */
	DB_LOST,      /* the connection is gone or unusable: reconnect */
};

/*
 * Connects synchronously.  conninfo NULL or "" means libpq's PG* defaults.
 * Returns the connection, or NULL with *err set to a message that names the
 * (redacted) target (caller frees *err).
 */
PGconn *db_connect(const char *conninfo, const char *appname, char **err);

/*
 * Classifies a result (res may be NULL when a send or the connection
 * failed).  SQLSTATE classes 08 and 57P0x, and 25006 (read-only: we reached
 * a standby after a failover), count as DB_LOST.
 */
enum db_error db_classify(PGconn *conn, const PGresult *res);

/*
 * The error of res (or of conn when res is NULL) as one line:
 * "SQLSTATE: message".  Returns a new string; caller frees.
 */
char *db_error_text(PGconn *conn, const PGresult *res);

/* 1 when libpq can parse conninfo (NULL and "" included). */
int db_conninfo_valid(const char *conninfo);

/*
 * conninfo as keyword=value pairs without the options libpq marks secret
 * (password, sslpassword), for messages.  Returns a new string; caller
 * frees.  Never returns the input verbatim.
 */
char *db_conninfo_redacted(const char *conninfo);

#endif
