/*
 * sqlstate: the SQLSTATEs the program tells apart, by name, and the one
 * test of a state against them.  PostgreSQL's names (Appendix A, "PostgreSQL
 * Error Codes"); a class is its first two characters; the PJ codes are the
 * schema's own (raised in sql/).  A status's sqlstate (struct db_status) and
 * the first five characters of an error's text (db_error_text()) are such
 * states.
 */
#ifndef PGJOBD_SQLSTATE_H
#define PGJOBD_SQLSTATE_H

#include <stdbool.h>
#include <string.h>

/* Classes. */
#define SQLSTATE_CLASS_CONNECTION "08" /* connection exception */
#define SQLSTATE_CLASS_DATA	  "22" /* data exception */
#define SQLSTATE_CLASS_INTEGRITY  "23" /* integrity constraint */
#define SQLSTATE_CLASS_RESOURCES  "53" /* insufficient resources */
/* 57P01 admin_shutdown to 57P04 database_dropped: the server is going. */
#define SQLSTATE_PREFIX_SHUTDOWN "57P0"

/* States. */
/* A standby: the server we reached after a failover. */
#define SQLSTATE_READ_ONLY_TRANSACTION	   "25006"
#define SQLSTATE_SERIALIZATION_FAILURE	   "40001"
#define SQLSTATE_DEADLOCK_DETECTED	   "40P01"
#define SQLSTATE_INSUFFICIENT_PRIVILEGE	   "42501"
#define SQLSTATE_UNDEFINED_FUNCTION	   "42883"
#define SQLSTATE_UNDEFINED_TABLE	   "42P01"
#define SQLSTATE_UNDEFINED_COLUMN	   "42703"
#define SQLSTATE_UNDEFINED_OBJECT	   "42704"
#define SQLSTATE_TOO_MANY_CONNECTIONS	   "53300"
#define SQLSTATE_NOT_IN_PREREQUISITE_STATE "55000"
#define SQLSTATE_LOCK_NOT_AVAILABLE	   "55P03"
/* statement_timeout, or a cancel request. */
#define SQLSTATE_QUERY_CANCELED "57014"

/* The schema's own. */
#define SQLSTATE_PJ_LEASE_LOST	"PJ001" /* pgjob.lock_lease() */
#define SQLSTATE_PJ_REQUEST_KEY "PJ002" /* pgjob.request_*() */

/*
 * Whether state (NULL or "" for none) is code: a whole SQLSTATE, or begins
 * with it when code is a class or a prefix.  state may be the start of an
 * error's text ("57014: canceling statement ...").
 */
static inline bool
sqlstate_is(const char *state, const char *code)
{
	return state && strncmp(state, code, strlen(code)) == 0;
}

#endif
