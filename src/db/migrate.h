/*
 * migrate: installs or upgrades schema pgjob from sql/, which the build
 * compiles into the binaries (migrations.c), and checks the schema version.
 * A fresh install runs sql/schema/'s files; an upgrade runs the released
 * steps of sql/upgrade/ and then restates sql/schema/'s functions, views,
 * triggers and grants (sql/README.md).
 */
#ifndef PGJOBD_MIGRATE_H
#define PGJOBD_MIGRATE_H

struct db_conn;

struct migration {
	int version;
	const char *name;
	const char *sql;
	/* NNN_name.after.sql, run after sql/schema/ is restated (grants on
	 * a function that the restatement created), or NULL. */
	const char *after;
};

/* The released upgrade steps, sql/upgrade/NNN_name.sql: version N is
 * migrate_list[N - 1]. */
extern const struct migration migrate_list[];
extern const int migrate_count;

/* sql/schema/'s files in the order of sql/schema/order.txt; restate: run
 * again after every upgrade (functions, views, triggers, grants). */
struct schema_file {
	const char *name;
	int restate;
	const char *sql;
};

extern const struct schema_file migrate_schema[];
extern const int migrate_schema_count;

/* "<latest version> <SHA-256 of the restated files>", and what
 * sql/schema/restated.sum says: the test checks they are the same. */
extern const char migrate_restated_sum[];
extern const char migrate_restated_recorded[];

/* The schema version this binary was built for (the newest migration). */
#define migrate_latest() (migrate_count)

/*
 * Applies every pending migration in one transaction under an advisory
 * lock, so concurrent runs are safe.  *applied is how many were applied
 * (0: already up to date).  Returns 0, or -1 with *err set (caller frees):
 * a database newer than this binary is refused.
 */
int migrate_run(struct db_conn *conn, int *applied, char **err);

/*
 * What migrate_run() would run on a database at version (0: none), for
 * migrate --dry-run: emit(title, sql, arg) for each piece in order, title
 * "<N> <step name>" for a step, "schema/<file>" for a file of sql/schema/.
 * Nothing for a database at the latest version or newer.
 */
void migrate_plan(int version,
		  void (*emit)(const char *title, const char *sql, void *arg),
		  void *arg);

/*
 * The last schema version whose pgjob built the schema by replaying every
 * step from 1: the versions up to it are exactly their steps, replayed.
 */
#define MIGRATE_LAST_REPLAYED 32

/*
 * For tests: a database at version as its release's pgjob left it, from a
 * lower version, in one transaction under the same lock: the released
 * steps up to version, replayed; past MIGRATE_LAST_REPLAYED, then
 * sql/schema/'s functions, views, triggers and grants restated (today's
 * stand in for that release's; a file that names a column a later step
 * adds is left out).  0 or -1 with *err set (caller frees).
 */
int migrate_replay_to(struct db_conn *conn, int version, char **err);

/*
 * Reads the schema version (0 when pgjob is not installed).  Returns 0 when
 * it equals migrate_latest(), or -1 with *err set to one clear line saying
 * what to do (caller frees).  *version may be NULL.
 */
int migrate_check(struct db_conn *conn, int *version, char **err);

#endif
