/*
 * Integration: the schema from one current source (sql/README.md).  For
 * every released schema version v, a database built by the frozen steps
 * 1..v of sql/upgrade/ (what release v's `pgjob migrate` made) and then
 * upgraded by `pgjob migrate` has exactly the schema of a fresh install
 * from sql/schema/: the same `pg_dump --schema-only --schema=pgjob`, the
 * same rows pgjobd ships (`pg_dump --data-only`, schema_version aside,
 * whose versions and names are compared on their own), and the same owners
 * and privileges of every object.  So a change of sql/schema/ without an
 * upgrade step (or a step without its sql/schema/ change) fails here.
 *
 * Each version in a database of its own, made from template0 and dropped
 * afterwards; no role or other cluster-wide state, so the test runs beside
 * the others.
 */
#include "testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/db.h"
#include "db/migrate.h"

/* Drops and creates database name from template0; its conninfo. */
static char *
db_create(const char *name)
{
	PGconn *c = t_connect(t_server_conninfo());
	t_exec(c, "drop database if exists %s with (force)", name);
	t_exec(c, "create database %s template template0", name);
	PQfinish(c);
	char *ci = malloc(1200);
	assert_non_null(ci);
	snprintf(ci, 1200, "%s dbname=%s", t_server_conninfo(), name);
	return ci;
}

static void
db_drop(const char *name)
{
	PGconn *c = t_connect(t_server_conninfo());
	t_exec(c, "drop database if exists %s with (force)", name);
	PQfinish(c);
}

/* pg_dump's output for schema pgjob with the option given (caller frees):
 * the \restrict line's key is random, so those two lines go. */
static char *
dump(const char *ci, const char *what)
{
	struct t_run r;
	const char *argv[] = {"pg_dump", "--schema=pgjob", what, "-d", ci,
			      NULL};
	t_run(&r, 60, NULL, argv);
	if (r.status != 0)
		fail_msg("pg_dump %s: exit %d: %s", what, r.status, r.err);
	char *out = malloc(strlen(r.out) + 1);
	assert_non_null(out);
	char *o = out;
	for (char *line = r.out; *line;) {
		char *end = strchr(line, '\n');
		size_t n = end ? (size_t)(end - line + 1) : strlen(line);
		if (strncmp(line, "\\restrict ", 10) != 0 &&
		    strncmp(line, "\\unrestrict ", 12) != 0) {
			memcpy(o, line, n);
			o += n;
		}
		line += n;
	}
	*o = '\0';
	t_run_free(&r);
	return out;
}

/* Every object of the schema with its owner and its privileges (each
 * object's ACL entries in a fixed order), and the schema's versions. */
static char *
catalog(const char *ci)
{
	PGconn *c = t_connect(ci);
	char *v = t_value(
		c,
		"with o(what, owner, acl) as ("
		" select 'schema pgjob', nspowner, nspacl from pg_namespace"
		"  where nspname = 'pgjob'"
		" union all"
		" select relkind::text || ' ' || oid::regclass, relowner, "
		"relacl"
		"  from pg_class where relnamespace = 'pgjob'::regnamespace"
		" union all"
		" select 'f ' || oid::regprocedure, proowner, proacl"
		"  from pg_proc where pronamespace = 'pgjob'::regnamespace"
		" union all"
		" select 't ' || oid::regtype, typowner, typacl from pg_type"
		"  where typnamespace = 'pgjob'::regnamespace)"
		" select string_agg(what || ' ' || owner::regrole || ' ' ||"
		"  coalesce((select string_agg(a::text, ',' order by a::text)"
		"   from unnest(acl) a), '-'), E'\\n' order by what) || E'\\n'"
		"  || (select string_agg(version || ' ' || name, E'\\n'"
		"   order by version) from pgjob.schema_version)"
		" from o");
	PQfinish(c);
	return v;
}

/*
 * Fails the test when got differs from want (what: how they were read,
 * file: a name for the two files kept under t_tmpdir()), with the first
 * 80 lines of a unified diff of the two on stderr.
 */
static void
same(const char *want, const char *got, const char *what, const char *file,
     int v)
{
	if (strcmp(want, got) == 0)
		return;
	char a[512], b[512];
	snprintf(a, sizeof(a), "%s/fresh.%s", t_tmpdir(), file);
	snprintf(b, sizeof(b), "%s/upgraded-from-%d.%s", t_tmpdir(), v, file);
	FILE *f = fopen(a, "w");
	assert_non_null(f);
	fputs(want, f);
	fclose(f);
	f = fopen(b, "w");
	assert_non_null(f);
	fputs(got, f);
	fclose(f);
	struct t_run r;
	const char *argv[] = {"diff", "-u", a, b, NULL};
	t_run(&r, 30, NULL, argv);
	char *cut = r.out;
	for (int n = 0; cut && n < 80; n++)
		cut = strchr(cut + 1, '\n');
	if (cut)
		cut[1] = '\0';
	fprintf(stderr, "%s", r.out);
	t_run_free(&r);
	fail_msg("schema version %d upgraded by pgjob migrate differs from a "
		 "fresh install (%s; the diff above): sql/schema/ and "
		 "sql/upgrade/ disagree (sql/README.md)",
		 v, what);
}

static void
test_every_version_upgrades_to_the_fresh_schema(void **state)
{
	char *fresh_ci = db_create("t_schema_fresh");
	t_migrate(fresh_ci);
	char *schema = dump(fresh_ci, "--schema-only");
	char *data = dump(fresh_ci, "--data-only");
	char *objects = catalog(fresh_ci);
	/* The data dump holds pgjob.schema_version's rows with the time each
	 * was applied: compared by catalog() instead. */
	char *sv = strstr(data, "COPY pgjob.schema_version");
	assert_non_null(sv);
	db_drop("t_schema_fresh");
	free(fresh_ci);

	/* v = 32: what release 32 made, not upgraded at all. */
	for (int v = 1; v <= migrate_latest(); v++) {
		char name[64];
		snprintf(name, sizeof(name), "t_schema_v%d", v);
		char *ci = db_create(name);
		char *err = NULL;
		struct db_conn *c = db_connect(ci, "test_migrate_schema", &err);
		if (!c)
			fail_msg("connect: %s", err);
		if (migrate_replay_to(c, v, &err) < 0)
			fail_msg("replaying the steps up to %d: %s", v, err);
		db_close(c);
		if (v < migrate_latest())
			t_migrate(ci);
		char *s = dump(ci, "--schema-only");
		same(schema, s, "pg_dump --schema-only", "schema.sql", v);
		free(s);
		s = dump(ci, "--data-only");
		/* Up to schema_version's rows, whose applied_at differ. */
		char *cut = strstr(s, "COPY pgjob.schema_version");
		assert_non_null(cut);
		*cut = '\0';
		char saved = *sv;
		*sv = '\0';
		same(data, s, "pg_dump --data-only", "data.sql", v);
		*sv = saved;
		free(s);
		s = catalog(ci);
		same(objects, s, "owners, privileges, versions", "catalog", v);
		free(s);
		db_drop(name);
		free(ci);
	}
	free(schema);
	free(data);
	free(objects);
}

/*
 * A database already at the latest version gets sql/schema/'s functions,
 * views, triggers and grants only from an upgrade to a later one: a change
 * of them comes with a new step of sql/upgrade/ (a comment alone will do),
 * and sql/schema/restated.sum records the version and the SHA-256 of the
 * restated files it goes with (sql/README.md).
 */
static void
test_restated_sum_recorded(void **state)
{
	if (strcmp(migrate_restated_sum, migrate_restated_recorded) == 0)
		return;
	int v = atoi(migrate_restated_recorded);
	if (v == migrate_latest())
		fail_msg("sql/schema/'s functions, views, triggers or grants "
			 "changed, but no step came with them: a database "
			 "already at version %d would never get them.  Add "
			 "sql/upgrade/%03d_name.sql (a comment saying what "
			 "changed will do), then write \"%d %s\" into "
			 "sql/schema/restated.sum (sql/README.md)",
			 v, v + 1, v + 1,
			 strchr(migrate_restated_sum, ' ') + 1);
	fail_msg("sql/schema/restated.sum says \"%s\"; write \"%s\" "
		 "into it (sql/README.md)",
		 migrate_restated_recorded, migrate_restated_sum);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_restated_sum_recorded),
		cmocka_unit_test(
			test_every_version_upgrades_to_the_fresh_schema),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
