/*
 * migrate: applies the numbered migrations of sql/, which the build compiles
 * into the binaries (migrations.c), and checks the schema version.
 */
#ifndef PGJOBD_MIGRATE_H
#define PGJOBD_MIGRATE_H

struct db_conn;

struct migration {
	int version;
	const char *name;
	const char *sql;
};

extern const struct migration migrate_list[];
extern const int migrate_count;

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
 * Reads the schema version (0 when pgjob is not installed).  Returns 0 when
 * it equals migrate_latest(), or -1 with *err set to one clear line saying
 * what to do (caller frees).  *version may be NULL.
 */
int migrate_check(struct db_conn *conn, int *version, char **err);

#endif
