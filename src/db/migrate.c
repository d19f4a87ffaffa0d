/*
 * migrate: installs schema pgjob from sql/schema/, or upgrades it with the
 * released steps of sql/upgrade/ and then restates sql/schema/'s functions,
 * views, triggers and grants (all compiled into migrations.c; sql/README.md
 * says why).
 *
 * Everything happens in one transaction that first takes a transaction-level
 * advisory lock: a second `pgjob migrate` waits, then sees the first one's
 * work and applies nothing.  A failed migration rolls back whole.
 */
#include "db/migrate.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "db/db.h"
#include "db/internal.h"
#include "db/sqlstate.h"
#include "common/failpoint.h"
#include "common/util.h"

/* pg_advisory_xact_lock(MIGRATE_LOCK_CLASS, 0) serialises migrations. */
#define MIGRATE_LOCK_CLASS 0x70676d67 /* "pgmg" */

/* Runs sql; on error sets *err (prefixed with what) and returns -1. */
static int
exec(PGconn *conn, const char *sql, const char *what, char **err)
{
	PGresult *res = PQexec(conn, sql);
	/* Empty: a step that is a comment alone (sql/README.md). */
	if (PQresultStatus(res) == PGRES_COMMAND_OK ||
	    PQresultStatus(res) == PGRES_TUPLES_OK ||
	    PQresultStatus(res) == PGRES_EMPTY_QUERY) {
		PQclear(res);
		return 0;
	}
	char *text = db_error_text(conn, res);
	*err = xasprintf("%s: %s", what, text);
	free(text);
	PQclear(res);
	return -1;
}

static int
read_version(PGconn *conn, int *version, char **err)
{
	/* Two statements: a relation named in a query must exist when the
	 * query is parsed, even in a branch that never runs. */
	PGresult *res =
		PQexec(conn, "select to_regclass('pgjob.schema_version')"
			     " is not null");
	if (PQresultStatus(res) == PGRES_TUPLES_OK &&
	    strcmp(PQgetvalue(res, 0, 0), "t") != 0) {
		PQclear(res);
		*version = 0;
		return 0;
	}
	if (PQresultStatus(res) == PGRES_TUPLES_OK) {
		PQclear(res);
		res = PQexec(conn, "select coalesce(max(version), 0)"
				   " from pgjob.schema_version");
	}
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		char *text = db_error_text(conn, res);
		*err = xasprintf("cannot read the schema version: %s", text);
		free(text);
		PQclear(res);
		return -1;
	}
	*version = atoi(PQgetvalue(res, 0, 0));
	PQclear(res);
	return 0;
}

/* Records that the schema includes step m. */
static int
record(PGconn *conn, const struct migration *m, char **err)
{
	char ver[16];
	snprintf(ver, sizeof(ver), "%d", m->version);
	const char *params[] = {ver, m->name};
	PGresult *res = PQexecParams(conn,
				     "insert into pgjob.schema_version "
				     "(version, name) values ($1, $2)",
				     2, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		char *text = db_error_text(conn, res);
		*err = xasprintf("recording migration %s: %s", m->name, text);
		free(text);
		PQclear(res);
		return -1;
	}
	PQclear(res);
	return 0;
}

static int
apply(PGconn *conn, const struct migration *m, char **err)
{
	char *what = xasprintf("migration %s", m->name);
	int rc = exec(conn, m->sql, what, err);
	free(what);
	if (rc < 0)
		return -1;
	return record(conn, m, err);
}

/*
 * Runs sql/schema/'s files: every one for a fresh install, the restated
 * ones (functions, views, triggers, grants) after an upgrade.  A body is
 * not checked as it is created (as pg_restore does), so a function may name
 * a view created after it.
 */
/* run_schema()'s restate_only for migrate_replay_to()'s stand-in. */
#define STAND_IN 2

/*
 * A file restated in migrate_replay_to()'s stand-in for a past release's
 * restatement: today's view may name a column that a later step adds
 * (pgjob.all_jobs and jobs.traceparent, version 36), which that release's
 * did not.  Such a file (undefined column, 42703) is left out, in a
 * savepoint; the upgrade that follows restates it over the later tables.
 */
static int
stand_in(PGconn *conn, const char *sql, const char *what, char **err)
{
	if (exec(conn, "savepoint stand_in", "savepoint", err) < 0)
		return -1;
	PGresult *res = PQexec(conn, sql);
	ExecStatusType rs = PQresultStatus(res);
	if (rs == PGRES_COMMAND_OK || rs == PGRES_TUPLES_OK ||
	    rs == PGRES_EMPTY_QUERY) {
		PQclear(res);
		return exec(conn, "release savepoint stand_in", "release", err);
	}
	const char *st = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	if (!sqlstate_is(st, SQLSTATE_UNDEFINED_COLUMN)) {
		char *text = db_error_text(conn, res);
		*err = xasprintf("%s: %s", what, text);
		free(text);
		PQclear(res);
		return -1;
	}
	PQclear(res);
	return exec(conn, "rollback to savepoint stand_in", "rollback", err);
}

static int
run_schema(PGconn *conn, int restate_only, char **err)
{
	if (exec(conn, "set local check_function_bodies = off", "set", err) < 0)
		return -1;
	for (int i = 0; i < migrate_schema_count; i++) {
		const struct schema_file *f = &migrate_schema[i];
		if (restate_only && !f->restate)
			continue;
		char *what = xasprintf("sql/schema/%s", f->name);
		int rc = restate_only == STAND_IN
				 ? stand_in(conn, f->sql, what, err)
				 : exec(conn, f->sql, what, err);
		free(what);
		if (rc < 0)
			return -1;
	}
	return exec(conn, "set local check_function_bodies = on", "set", err);
}

/*
 * A fresh install: the schema from sql/schema/ alone, then one row per
 * released step in schema_version, as a replay of them would have left:
 * max(version) is the schema's version, and `migrate --status` has nothing
 * pending.
 */
static int
install(PGconn *conn, char **err)
{
	if (run_schema(conn, 0, err) < 0)
		return -1;
	for (int i = 0; i < migrate_count; i++)
		if (record(conn, &migrate_list[i], err) < 0)
			return -1;
	return 0;
}

/* Begins the transaction, takes the lock and reads the version. */
static int
begin_locked(PGconn *conn, int *version, char **err)
{
	char lock[96];

	snprintf(lock, sizeof(lock), "select pg_advisory_xact_lock(%d, 0)",
		 MIGRATE_LOCK_CLASS);
	if (exec(conn, "begin", "begin", err) < 0)
		return -1;
	if (exec(conn, "set local lock_timeout = '60s'", "set", err) < 0 ||
	    exec(conn, lock, "taking the migration lock", err) < 0 ||
	    read_version(conn, version, err) < 0) {
		PQclear(PQexec(conn, "rollback"));
		return -1;
	}
	if (*version > migrate_latest()) {
		*err = xasprintf(
			"the database schema is version %d, newer than "
			"this pgjob (version %d): upgrade pgjobd",
			*version, migrate_latest());
		PQclear(PQexec(conn, "rollback"));
		return -1;
	}
	return 0;
}

/*
 * The steps from version + 1 to `to`, and then, with restate, sql/schema/'s
 * functions, views, triggers and grants again and the steps' after-parts:
 * whatever an old step did to a function's text, the functions are now
 * sql/schema/'s.
 */
static int
upgrade(PGconn *conn, int version, int to, int restate, char **err)
{
	for (int i = version; i < to; i++)
		if (apply(conn, &migrate_list[i], err) < 0)
			return -1;
	if (!restate)
		return 0;
	if (run_schema(conn, restate, err) < 0)
		return -1;
	for (int i = version; i < to; i++) {
		const struct migration *m = &migrate_list[i];
		if (!m->after)
			continue;
		char *what = xasprintf("migration %s, after", m->name);
		int rc = exec(conn, m->after, what, err);
		free(what);
		if (rc < 0)
			return -1;
	}
	return 0;
}

int
migrate_run(struct db_conn *c, int *applied, char **err)
{
	PGconn *conn = db_pgconn(c);
	int version;

	*applied = 0;
	*err = NULL;
	if (begin_locked(conn, &version, err) < 0)
		return -1;
	if (version == 0) {
		if (install(conn, err) < 0)
			goto fail;
	} else if (version < migrate_latest()) {
		if (upgrade(conn, version, migrate_count, 1, err) < 0)
			goto fail;
	}
	if (FAILPOINT(FP_MIGRATE)) {
		*err = xstrdup("failpoint: the migration fails before it "
			       "commits");
		goto fail;
	}
	if (exec(conn, "commit", "commit", err) < 0)
		return -1;
	*applied = migrate_count - version;
	return 0;
fail:
	PQclear(PQexec(conn, "rollback"));
	return -1;
}

int
migrate_replay_to(struct db_conn *c, int to, char **err)
{
	PGconn *conn = db_pgconn(c);
	int version;

	*err = NULL;
	if (to > migrate_count)
		to = migrate_count;
	if (begin_locked(conn, &version, err) < 0)
		return -1;
	if (version < to &&
	    upgrade(conn, version, to,
		    to > MIGRATE_LAST_REPLAYED ? STAND_IN : 0, err) < 0) {
		PQclear(PQexec(conn, "rollback"));
		return -1;
	}
	return exec(conn, "commit", "commit", err);
}

void
migrate_plan(int version,
	     void (*emit)(const char *title, const char *sql, void *arg),
	     void *arg)
{
	char title[256];

	if (version >= migrate_latest())
		return;
	for (int i = version; version > 0 && i < migrate_count; i++) {
		snprintf(title, sizeof(title), "%d %s", migrate_list[i].version,
			 migrate_list[i].name);
		emit(title, migrate_list[i].sql, arg);
	}
	for (int i = 0; i < migrate_schema_count; i++) {
		if (version > 0 && !migrate_schema[i].restate)
			continue;
		snprintf(title, sizeof(title), "schema/%s",
			 migrate_schema[i].name);
		emit(title, migrate_schema[i].sql, arg);
	}
	for (int i = version; version > 0 && i < migrate_count; i++) {
		if (!migrate_list[i].after)
			continue;
		snprintf(title, sizeof(title), "%d %s, after",
			 migrate_list[i].version, migrate_list[i].name);
		emit(title, migrate_list[i].after, arg);
	}
}

int
migrate_check(struct db_conn *c, int *version, char **err)
{
	PGconn *conn = db_pgconn(c);
	int v;

	*err = NULL;
	if (read_version(conn, &v, err) < 0)
		return -1;
	if (version)
		*version = v;
	if (v == migrate_latest())
		return 0;
	if (v == 0)
		*err = xasprintf("schema pgjob is not installed in this "
				 "database: run `pgjob migrate`");
	else if (v < migrate_latest())
		*err = xasprintf("the database schema is version %d, this "
				 "pgjobd needs %d: run `pgjob migrate`",
				 v, migrate_latest());
	else
		*err = xasprintf(
			"the database schema is version %d, newer "
			"than this pgjobd (version %d): upgrade pgjobd",
			v, migrate_latest());
	return -1;
}
