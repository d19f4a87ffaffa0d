/*
 * Integration: `pgjob migrate` on a real server: fresh, again, two at once,
 * a database newer than the binary; and the schema it creates.
 */
#include "testlib.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "db/migrate.h"

static void
test_fresh_then_again(void **state)
{
	const char *ci = t_db_create("t_migrate_fresh");
	struct t_run r;

	t_pgjob(&r, ci, "migrate", NULL);
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, "migrated to schema version"));
	t_run_free(&r);

	PGconn *c = t_connect(ci);
	assert_int_equal(t_long(c, "select max(version) from "
				   "pgjob.schema_version"),
			 migrate_latest());
	assert_int_equal(t_long(c, "select count(*) from pg_tables where "
				   "schemaname = 'pgjob' and tablename in "
				   "('jobs', 'leases', 'workers', "
				   "'schema_version')"),
			 4);
	static const char applied[] = "select string_agg(version || ':' || "
				      "applied_at, ',') from "
				      "pgjob.schema_version";
	char *before = t_value(c, applied);

	t_pgjob(&r, ci, "migrate", NULL);
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, "schema is up to date"));
	t_run_free(&r);
	/* Nothing applied again. */
	t_assert_value(c, before, applied);
	free(before);

	/* A job is finished exactly when its state says so (schema 23): a
	 * row written by hand that says otherwise is refused. */
	long long id = t_long(c, "select pgjob.enqueue('k')");
	free(t_expect_sqlstate(c, "23514",
			       "update pgjob.jobs set state = 'done'"
			       " where id = %lld",
			       id));
	free(t_expect_sqlstate(c, "23514",
			       "update pgjob.jobs set finished_at = now()"
			       " where id = %lld",
			       id));
	free(t_expect_sqlstate(c, "23514",
			       "insert into pgjob.jobs (kind, state)"
			       " values ('k', 'cancelled')"));
	/* An unfinished job waits exactly when it has parents left (schema
	 * 26); a finished one may keep its count. */
	free(t_expect_sqlstate(c, "23514",
			       "update pgjob.jobs set parents_left = 1"
			       " where id = %lld",
			       id));
	free(t_expect_sqlstate(c, "23514",
			       "update pgjob.jobs set state = 'waiting'"
			       " where id = %lld",
			       id));
	free(t_expect_sqlstate(c, "23514",
			       "insert into pgjob.jobs (kind, state)"
			       " values ('k', 'waiting')"));
	t_exec(c,
	       "update pgjob.jobs set state = 'waiting', parents_left = 2"
	       " where id = %lld",
	       id);
	t_exec(c,
	       "update pgjob.jobs set state = 'cancelled', finished_at ="
	       " now() where id = %lld",
	       id);
	PQfinish(c);
}

static void
test_concurrent(void **state)
{
	const char *ci = t_db_create("t_migrate_concurrent");
	char logs[4][256];
	pid_t pids[4];

	for (int i = 0; i < 4; i++) {
		snprintf(logs[i], sizeof(logs[i]), "%s/migrate%d.log",
			 t_tmpdir(), i);
		const char *argv[] = {t_bin("pgjob"), "--database", ci,
				      "migrate", NULL};
		pids[i] = t_spawn(logs[i], NULL, argv);
	}
	int applied = 0;
	for (int i = 0; i < 4; i++) {
		assert_int_equal(t_wait(pids[i], 60), 0);
		char *log = t_read_file(logs[i]);
		applied += strstr(log, "migrated to") != NULL;
		free(log);
	}
	assert_int_equal(applied, 1);
	PGconn *c = t_connect(ci);
	assert_int_equal(t_long(c, "select count(*) from pgjob.schema_version"),
			 migrate_latest());
	PQfinish(c);
}

static void
test_newer_database_refused(void **state)
{
	const char *ci = t_db_create("t_migrate_newer");
	struct t_run r;

	t_pgjob(&r, ci, "migrate", NULL);
	assert_int_equal(r.status, 0);
	t_run_free(&r);
	PGconn *c = t_connect(ci);
	t_exec(c,
	       "insert into pgjob.schema_version (version, name) "
	       "values (%d, '999_future.sql')",
	       migrate_latest() + 1);

	t_pgjob(&r, ci, "migrate", NULL);
	assert_int_equal(r.status, 1);
	assert_non_null(strstr(r.err, "newer than this pgjob"));
	assert_null(strchr(strchr(r.err, '\n') + 1, '\n')); /* one line */
	t_run_free(&r);
	assert_int_equal(t_long(c, "select count(*) from pgjob.schema_version"),
			 migrate_latest() + 1);
	PQfinish(c);
}

static void
test_unreachable(void **state)
{
	struct t_run r;
	t_pgjob(&r, "host=127.0.0.1 port=1 connect_timeout=2 password=sekrit",
		"migrate", NULL);
	assert_int_equal(r.status, 1);
	assert_non_null(strstr(r.err, "pgjob: cannot connect to database"));
	assert_null(strstr(r.err, "sekrit"));
	t_run_free(&r);
}

/* migrate --status and --dry-run say what would be applied and change
 * nothing; -V and --version print the version. */
static void
test_status_and_dry_run(void **state)
{
	const char *ci = t_db_create("t_migrate_status");
	struct t_run r;
	char want[64];

	t_pgjob(&r, ci, "migrate", "--status", NULL);
	assert_int_equal(r.status, 0);
	snprintf(want, sizeof(want),
		 "schema version 0; this pgjob applies up to %d",
		 migrate_latest());
	assert_non_null(strstr(r.out, want));
	assert_non_null(strstr(r.out, "pending: 1 001_init.sql\n"));
	snprintf(want, sizeof(want), "pending: %d ", migrate_latest());
	assert_non_null(strstr(r.out, want));
	t_run_free(&r);
	t_pgjob(&r, ci, "migrate", "--dry-run", NULL);
	assert_int_equal(r.status, 0);
	/* A fresh install runs sql/schema/'s files alone. */
	assert_non_null(strstr(r.out, "-- schema/schema.sql\n"));
	assert_non_null(strstr(r.out, "-- schema/tables/jobs.sql\n"));
	assert_non_null(strstr(r.out, "create table pgjob.jobs"));
	assert_null(strstr(r.out, "-- 1 001_init.sql\n"));
	t_run_free(&r);
	PGconn *c = t_connect(ci);
	t_assert_value(c, "f", "select to_regnamespace('pgjob') is not null");
	t_pgjob(&r, ci, "migrate", "--status", "--dry-run", NULL);
	assert_int_equal(r.status, 2);
	t_run_free(&r);
	t_pgjob(&r, ci, "migrate", NULL);
	assert_int_equal(r.status, 0);
	t_run_free(&r);
	t_pgjob(&r, ci, "migrate", "--status", NULL);
	assert_int_equal(r.status, 0);
	assert_null(strstr(r.out, "pending"));
	t_run_free(&r);
	t_pgjob(&r, ci, "migrate", "--dry-run", NULL);
	assert_int_equal(r.status, 0);
	assert_string_equal(r.out, "");
	t_run_free(&r);
	PQfinish(c);

	const char *v[] = {t_bin("pgjob"), "-V", NULL};
	t_run(&r, 10, NULL, v);
	assert_int_equal(r.status, 0);
	snprintf(want, sizeof(want), "(schema version %d)\n", migrate_latest());
	assert_non_null(strstr(r.out, want));
	t_run_free(&r);
	const char *ver[] = {t_bin("pgjob"), "--version", NULL};
	t_run(&r, 10, NULL, ver);
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, want));
	t_run_free(&r);
}

/*
 * Applies pgjobd's migrations from version from to version to, as an older
 * pgjob migrate would have (from 1: the schema as that version left it).
 */
static void
install_range(PGconn *c, int from, int to)
{
	t_exec(c, "begin");
	for (int i = 0; i < migrate_count && migrate_list[i].version <= to;
	     i++) {
		if (migrate_list[i].version < from)
			continue;
		PGresult *res = PQexec(c, migrate_list[i].sql);
		/* A step may be a comment alone (sql/README.md): empty. */
		if (PQresultStatus(res) != PGRES_COMMAND_OK &&
		    PQresultStatus(res) != PGRES_TUPLES_OK &&
		    PQresultStatus(res) != PGRES_EMPTY_QUERY)
			fail_msg("%s: %s", migrate_list[i].name,
				 PQresultErrorMessage(res));
		PQclear(res);
		t_exec(c,
		       "insert into pgjob.schema_version (version, name)"
		       " values (%d, '%s')",
		       migrate_list[i].version, migrate_list[i].name);
	}
	t_exec(c, "commit");
}

static void
install_up_to(PGconn *c, int version)
{
	install_range(c, 1, version);
}

/* The last version that changes pgjob.jobs without rewriting it: 27 adds
 * a stored generated column (sql/upgrade/027_hot_claim.sql), which does. */
enum { LAST_NO_REWRITE = 26 };

/*
 * An upgrade from schema version 10 (flow control) to 11 (workflows), with
 * jobs in the table and a role granted pgjob.enqueue by name: the role can
 * call the new enqueue and workflow functions, and an old done job can be
 * a parent.
 */
static void
test_upgrade_from_10(void **state)
{
	const char *ci = t_db_create("t_migrate_from_10");
	PGconn *c = t_connect(ci);
	install_up_to(c, 10);
	t_exec(c, "do $$ begin create role t_enq_10; exception when"
		  " duplicate_object then null; end $$");
	t_exec(c, "grant usage on schema pgjob to t_enq_10");
	t_exec(c, "grant execute on function pgjob.enqueue to t_enq_10");
	t_exec(c, "insert into pgjob.jobs (kind, state, result, finished_at)"
		  " values ('old', 'done', '{\"x\": 1}', now())");
	struct t_run r;
	char applied[32];
	/* 11 and every later one. */
	snprintf(applied, sizeof(applied), "(%d applied)",
		 migrate_latest() - 10);
	t_pgjob(&r, ci, "migrate", NULL);
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, applied));
	t_run_free(&r);
	t_assert_value(
		c, "true|true|true",
		"select has_function_privilege('t_enq_10',"
		" 'pgjob.enqueue_workflow(jsonb)', 'execute')::text"
		" || '|' || has_function_privilege('t_enq_10',"
		" 'pgjob.batch_seal(bigint)', 'execute')::text || '|' ||"
		" has_function_privilege('t_enq_10', 'pgjob.enqueue(text,"
		" jsonb, text, timestamptz, int, int, text, text, text,"
		" int, bigint[], text, bigint, text)', 'execute')::text");
	t_exec(c, "set role t_enq_10");
	long long child = t_long(c, "select pgjob.enqueue('new', depends_on =>"
				    " (select array[1::bigint]))");
	t_exec(c, "reset role");
	t_assert_value(c, "available|1",
		       "select state || '|' || (payload -> 'pgjob' -> 'parents'"
		       " -> '1' ->> 'x') from pgjob.all_jobs where id = %lld",
		       child);
	PQfinish(c);
}

/*
 * An upgrade from schema version 29 to 30 (EXECUTE taken from PUBLIC, jobs
 * owned by their role), with the roles an older deployment made: a worker
 * role granted the tables only (it called every function through PUBLIC),
 * a read-only role on pgjob.all_jobs and an application granted enqueue()
 * by name.  Each keeps what it could do, but PUBLIC's functions, and a job
 * from before the upgrade has no owner: the application cannot make it a
 * parent, the worker role can.
 */
static void
test_upgrade_from_29(void **state)
{
	const char *ci = t_db_create("t_migrate_from_29");
	PGconn *c = t_connect(ci);
	install_up_to(c, 29);
	const char *roles[] = {"t_worker_29", "t_reader_29", "t_app_29"};
	for (size_t i = 0; i < 3; i++)
		t_exec(c,
		       "do $$ begin create role %s login; exception when"
		       " duplicate_object then null; end $$",
		       roles[i]);
	t_exec(c, "grant usage on schema pgjob to t_worker_29, t_reader_29,"
		  " t_app_29");
	t_exec(c, "grant select, insert, update, delete on pgjob.jobs,"
		  " pgjob.jobs_done, pgjob.limits to t_worker_29");
	t_exec(c, "grant select on pgjob.all_jobs, pgjob.worker_minutes"
		  " to t_reader_29");
	t_exec(c, "grant execute on function pgjob.enqueue to t_app_29");
	long long old = t_long(c, "insert into pgjob.jobs (kind, state, result,"
				  " finished_at) values ('old', 'done',"
				  " '{\"x\": 1}', now()) returning id");
	t_migrate(ci);
	t_assert_value(
		c, "t|t|t|t|f|t|f|f|f",
		"select concat_ws('|', has_function_privilege('t_worker_29',"
		" 'pgjob.prune_done(timestamptz, int)', 'execute'),"
		" has_function_privilege('t_worker_29', 'pgjob.key_candidates("
		"text, text, text[], text[], timestamptz, int, text)',"
		" 'execute'),"
		" has_function_privilege('t_worker_29', 'pgjob.enqueue(text,"
		" jsonb, text, timestamptz, int, int, text, text, text,"
		" int, bigint[], text, bigint, text)', 'execute'),"
		" has_function_privilege('t_reader_29',"
		" 'pgjob.throughput(interval)', 'execute'),"
		" has_function_privilege('t_reader_29',"
		" 'pgjob.prune_done(timestamptz, int)', 'execute'),"
		" has_function_privilege('t_app_29', 'pgjob.enqueue(text,"
		" jsonb, text, timestamptz, int, int, text, text, text,"
		" int, bigint[], text, bigint, text)', 'execute'),"
		" has_function_privilege('t_app_29',"
		" 'pgjob.prune_done(timestamptz, int)', 'execute'),"
		" has_function_privilege('public',"
		" 'pgjob.prune_done(timestamptz, int)', 'execute'),"
		" has_function_privilege('public',"
		" 'pgjob.forget_attempts(bigint[])', 'execute'))");
	char cs[1200];
	snprintf(cs, sizeof(cs), "%s user=t_reader_29", ci);
	PGconn *r = t_connect(cs);
	t_assert_value(r, "1", "select count(*) from pgjob.all_jobs");
	t_exec(r, "select * from pgjob.throughput('1 hour')");
	PQfinish(r);
	snprintf(cs, sizeof(cs), "%s user=t_app_29", ci);
	PGconn *a = t_connect(cs);
	char *m = t_expect_sqlstate(
		a, "23503",
		"select pgjob.enqueue('new', depends_on => array[%lld])", old);
	assert_non_null(strstr(m, "no job"));
	free(m);
	assert_true(t_long(a, "select pgjob.enqueue('new')") > 0);
	PQfinish(a);
	snprintf(cs, sizeof(cs), "%s user=t_worker_29", ci);
	PGconn *w = t_connect(cs);
	long long child = t_long(
		w, "select pgjob.enqueue('new', depends_on => array[%lld])",
		old);
	t_exec(w, "select pgjob.prune_done(now(), 0)");
	PQfinish(w);
	t_assert_value(c, "available|1",
		       "select state || '|' || (payload -> 'pgjob' -> 'parents'"
		       " -> '%lld' ->> 'x') from pgjob.jobs where id = %lld",
		       old, child);
	for (size_t i = 0; i < 3; i++) {
		t_exec(c, "drop owned by %s", roles[i]);
		t_exec(c, "drop role %s", roles[i]);
	}
	PQfinish(c);
}

/*
 * An upgrade from schema version 25 to 26 (an unfinished job waits exactly
 * when it has parents left), with rows written by hand that break it: each
 * is mended by its state, then the check holds.
 */
static void
test_upgrade_from_25(void **state)
{
	const char *ci = t_db_create("t_migrate_from_25");
	PGconn *c = t_connect(ci);
	install_up_to(c, 25);
	t_exec(c, "insert into pgjob.jobs (id, kind, state, parents_left,"
		  " finished_at) overriding system value values"
		  " (1, 'avail', 'available', 3, null),"
		  " (2, 'counted', 'waiting', null, null),"
		  " (3, 'orphan', 'waiting', 0, null),"
		  " (4, 'cancelled', 'cancelled', 2, now()),"
		  " (5, 'parent', 'running', null, null)");
	t_exec(c, "insert into pgjob.job_deps (parent, child) values (5, 2)");
	struct t_run r;
	t_pgjob(&r, ci, "migrate", NULL);
	assert_int_equal(r.status, 0);
	t_run_free(&r);
	t_assert_value(
		c,
		"1 available 0, 2 waiting 1, 3 available 0,"
		" 4 cancelled 2, 5 running null",
		"select string_agg(id || ' ' || state || ' ' ||"
		" coalesce(parents_left::text, 'null'), ', ' order by id)"
		" from pgjob.jobs");
	free(t_expect_sqlstate(c, "23514",
			       "update pgjob.jobs set parents_left = 0"
			       " where id = 2"));
	PQfinish(c);
}

/*
 * An upgrade from schema version 11 to 12 (attempt figures), with jobs in
 * the table: last_wall_ms, last_cpu_ms and last_max_rss_kb are added as a
 * change of the catalog only (the table keeps its file: no rewrite), null
 * for the jobs already there, and an attempt ended through the worker's
 * finish statement fills them.
 */
static void
test_upgrade_from_11(void **state)
{
	const char *ci = t_db_create("t_migrate_from_11");
	PGconn *c = t_connect(ci);
	install_up_to(c, 11);
	long long old = t_long(c, "insert into pgjob.jobs (kind, state, result,"
				  " finished_at) values ('old', 'done',"
				  " '{\"x\": 1}', now()) returning id");
	long long file = t_long(c, "select relfilenode from pg_class"
				   " where oid = 'pgjob.jobs'::regclass");
	install_range(c, 12, LAST_NO_REWRITE);
	t_assert_value(c,
		       "last_cpu_ms integer YES -,last_max_rss_kb integer YES"
		       " -,last_wall_ms integer YES -",
		       "select string_agg(concat_ws(' ', column_name,"
		       " data_type, is_nullable, coalesce(column_default,"
		       " '-')), ',' order by column_name)"
		       " from information_schema.columns where table_schema ="
		       " 'pgjob' and table_name = 'jobs'"
		       " and column_name like 'last\\_%%' and column_name"
		       " not in ('last_error', 'last_status')");
	t_assert_value(c, "t",
		       "select relfilenode = %lld from pg_class"
		       " where oid = 'pgjob.jobs'::regclass",
		       file);
	t_assert_job(c, old,
		     "num_nulls(last_wall_ms, last_cpu_ms, last_max_rss_kb)",
		     "3");
	struct t_run r;
	char applied[32];
	/* Every later one. */
	snprintf(applied, sizeof(applied), "(%d applied)",
		 migrate_latest() - LAST_NO_REWRITE);
	t_pgjob(&r, ci, "migrate", NULL);
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, applied));
	t_run_free(&r);
	/* A job the daemon runs gets its figures. */
	long long id = t_long(c, "select pgjob.enqueue('true_')");
	pid_t p = t_start("migrate12", ci,
			  "workers: 1\n"
			  "handlers:\n"
			  "  true_: { type: exec, command: [\"true\"] }\n");
	t_wait_state(c, id, "done", 30);
	t_assert_job(c, id,
		     "num_nonnulls(last_wall_ms, last_cpu_ms, last_max_rss_kb)",
		     "3");
	t_stop_clean(p);
	PQfinish(c);
}

/*
 * An upgrade from schema version 12 to 13 (the attempt history) with a job
 * running under the old version: last_status is a change of the catalog
 * only, and the claim that takes over the job's expired lease after the
 * upgrade writes its lost attempt to the new pgjob.attempts.
 */
static void
test_upgrade_from_12(void **state)
{
	const char *ci = t_db_create("t_migrate_from_12");
	PGconn *c = t_connect(ci);
	install_up_to(c, 12);
	long long id = t_long(c, "insert into pgjob.jobs (kind, state,"
				 " attempts, lease_token, locked_by,"
				 " locked_until, attempted_at) values"
				 " ('true_', 'running', 1, 1, 'gone:7',"
				 " now() - interval '1 minute',"
				 " now() - interval '2 minutes') returning id");
	long long file = t_long(c, "select relfilenode from pg_class"
				   " where oid = 'pgjob.jobs'::regclass");
	install_range(c, 13, LAST_NO_REWRITE);
	t_assert_value(c, "integer YES -",
		       "select concat_ws(' ', data_type, is_nullable,"
		       " coalesce(column_default, '-'))"
		       " from information_schema.columns where table_schema ="
		       " 'pgjob' and table_name = 'jobs'"
		       " and column_name = 'last_status'");
	t_assert_value(c, "t",
		       "select relfilenode = %lld from pg_class"
		       " where oid = 'pgjob.jobs'::regclass",
		       file);
	struct t_run r;
	t_pgjob(&r, ci, "migrate", NULL);
	assert_int_equal(r.status, 0);
	t_run_free(&r);
	pid_t p = t_start("migrate13", ci,
			  "workers: 1\n"
			  "handlers:\n"
			  "  true_: { type: exec, command: [\"true\"] }\n");
	t_wait_state(c, id, "done", 30);
	t_assert_value(c, "1 lost gone:7",
		       "select concat_ws(' ', attempt, outcome, worker)"
		       " from pgjob.attempts where job_id = %lld",
		       id);
	t_stop_clean(p);
	PQfinish(c);
}

/*
 * migrate --dry-run on a database of an older version: the steps it lacks,
 * then sql/schema/'s functions, views, triggers and grants restated, and
 * none of its tables (sql/README.md).
 */
static void
test_dry_run_upgrade(void **state)
{
	const char *ci = t_db_create("t_migrate_dry_31");
	PGconn *c = t_connect(ci);
	install_up_to(c, migrate_latest() - 1);
	struct t_run r;
	char want[96];
	t_pgjob(&r, ci, "migrate", "--dry-run", NULL);
	assert_int_equal(r.status, 0);
	snprintf(want, sizeof(want), "-- %d %s\n", migrate_latest(),
		 migrate_list[migrate_count - 1].name);
	assert_non_null(strstr(r.out, want));
	assert_non_null(strstr(r.out, "-- schema/functions/enqueue.sql\n"));
	assert_non_null(strstr(r.out, "-- schema/views/all_jobs.sql\n"));
	assert_non_null(strstr(r.out, "-- schema/triggers/jobs.sql\n"));
	assert_non_null(strstr(r.out, "-- schema/grants.sql\n"));
	assert_null(strstr(r.out, "-- schema/tables/"));
	assert_null(strstr(r.out, "-- schema/schema.sql"));
	t_run_free(&r);
	t_pgjob(&r, ci, "migrate", NULL);
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, "(1 applied)"));
	t_run_free(&r);
	PQfinish(c);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fresh_then_again),
		cmocka_unit_test(test_status_and_dry_run),
		cmocka_unit_test(test_upgrade_from_10),
		cmocka_unit_test(test_upgrade_from_25),
		cmocka_unit_test(test_upgrade_from_29),
		cmocka_unit_test(test_upgrade_from_11),
		cmocka_unit_test(test_upgrade_from_12),
		cmocka_unit_test(test_dry_run_upgrade),
		cmocka_unit_test(test_concurrent),
		cmocka_unit_test(test_newer_database_refused),
		cmocka_unit_test(test_unreachable),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
