/*
 * Integration: pgjob.enqueue() in SQL and `pgjob enqueue` on the command
 * line, against a freshly migrated database.
 */
#include "testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *ci;

static int
setup(void **state)
{
	ci = t_db_migrated("t_enqueue");
	return 0;
}

static int
teardown(void **state)
{
	free(ci);
	return 0;
}

static void
test_sql_defaults(void **state)
{
	PGconn *c = t_connect(ci);
	long long id = t_long(c, "select pgjob.enqueue('email', "
				 "'{\"to\":\"a@b\"}')");
	t_assert_job(c, id,
		     "concat_ws('|', queue, kind, payload->>'to', priority, "
		     "state, attempts, coalesce(max_attempts::text, 'null'), "
		     "lease_token, run_at <= now(), unique_key is null)",
		     "default|email|a@b|0|available|0|null|0|t|t");
	PQfinish(c);
}

static void
test_sql_named_arguments(void **state)
{
	PGconn *c = t_connect(ci);
	long long id = t_long(
		c, "select pgjob.enqueue('report', '{}', queue => 'slow', "
		   "run_at => now() + interval '1 hour', priority => -5, "
		   "max_attempts => 3, ordering_key => 'tenant-7')");
	t_assert_job(c, id,
		     "concat_ws('|', queue, priority, max_attempts, "
		     "ordering_key, run_at > now() + interval '59 minutes')",
		     "slow|-5|3|tenant-7|t");
	PQfinish(c);
}

static void
test_unique_key(void **state)
{
	PGconn *c = t_connect(ci);
	long long a = t_long(c, "select pgjob.enqueue('sync', '{\"n\":1}', "
				"unique_key => 'sync-42')");
	long long b = t_long(c, "select pgjob.enqueue('sync', '{\"n\":2}', "
				"unique_key => 'sync-42')");
	assert_int_equal(a, b);
	assert_int_equal(t_long(c, "select count(*) from pgjob.all_jobs where "
				   "unique_key = 'sync-42'"),
			 1);
	t_assert_job(c, a, "(payload->>'n')::int", "1");
	/* Once finished, the key is free again. */
	t_exec(c,
	       "update pgjob.jobs set state = 'done', finished_at = now() "
	       "where id = %lld",
	       a);
	long long d = t_long(c, "select pgjob.enqueue('sync', '{}', "
				"unique_key => 'sync-42')");
	assert_true(d != a);
	PQfinish(c);
}

static void
test_payload_must_be_object(void **state)
{
	PGconn *c = t_connect(ci);
	char *m = t_expect_sqlstate(c, NULL,
				    "select pgjob.enqueue('x', '[1,2]')");
	assert_non_null(strstr(m, "payload must be a JSON object, not array"));
	free(m);
	PQfinish(c);
}

static void
test_notify(void **state)
{
	PGconn *listener = t_connect(ci);
	PGconn *c = t_connect(ci);
	t_exec(listener, "listen pgjob");

	t_exec(c, "select pgjob.enqueue('n', '{}')");
	assert_int_equal(t_notifications(listener), 1);

	/* A bulk insert of 1,000 rows: one notification, not 1,000. */
	t_exec(c, "insert into pgjob.jobs (kind) select 'bulk' from "
		  "generate_series(1, 1000)");
	assert_int_equal(t_notifications(listener), 1);

	/* 100 enqueues in one transaction: PostgreSQL folds them to one. */
	t_exec(c, "begin");
	for (int i = 0; i < 100; i++)
		t_exec(c, "select pgjob.enqueue('n', '{}')");
	t_exec(c, "commit");
	assert_int_equal(t_notifications(listener), 1);

	/* Future work wakes nobody; polling picks it up when due. */
	t_exec(c, "select pgjob.enqueue('n', '{}', run_at => now() + "
		  "interval '1 hour')");
	assert_int_equal(t_notifications(listener), 0);
	PQfinish(c);
	PQfinish(listener);
}

/* Runs `pgjob --database ci enqueue ARGS...` (args NULL-terminated). */
static void
enqueue(struct t_run *r, const char *const *args)
{
	const char *argv[32] = {"enqueue"};
	int n = 1;
	while (*args)
		argv[n++] = *args++;
	argv[n] = NULL;
	t_pgjobv(r, ci, argv);
}

static void
test_cli_enqueue(void **state)
{
	struct t_run r;
	PGconn *c = t_connect(ci);
	const char *args[] = {"cli_kind",
			      "{\"a\": 1}",
			      "--queue",
			      "q1",
			      "--priority",
			      "3",
			      "--max-attempts",
			      "4",
			      "--unique-key",
			      "u-1",
			      "--ordering-key",
			      "o-1",
			      "--in",
			      "5m",
			      NULL};
	enqueue(&r, args);
	assert_int_equal(r.status, 0);
	long long id = atoll(r.out);
	assert_true(id > 0);
	t_run_free(&r);
	t_assert_job(c, id,
		     "concat_ws('|', kind, payload->>'a', queue, priority, "
		     "max_attempts, unique_key, ordering_key, run_at between "
		     "now() + interval '4 minutes' and now() + interval '6 "
		     "minutes')",
		     "cli_kind|1|q1|3|4|u-1|o-1|t");

	/* The same unique key prints the same id. */
	enqueue(&r, args);
	assert_int_equal(r.status, 0);
	assert_int_equal(atoll(r.out), id);
	t_run_free(&r);

	const char *at[] = {"cli_at", "--run-at", "2030-01-02 03:04:05+00",
			    NULL};
	enqueue(&r, at);
	assert_int_equal(r.status, 0);
	assert_int_equal(t_long(c,
				"select extract(year from run_at) from "
				"pgjob.all_jobs where id = %s",
				r.out),
			 2030);
	t_run_free(&r);

	const char *bare[] = {"cli_bare", NULL};
	enqueue(&r, bare);
	assert_int_equal(r.status, 0);
	t_assert_value(c, "{}",
		       "select payload::text from pgjob.all_jobs where id = %s",
		       r.out);
	t_run_free(&r);
	PQfinish(c);
}

/* Each bad call: exit status, a message on stderr, and nothing written. */
static void
test_cli_errors(void **state)
{
	static const struct {
		const char *args[6];
		int status;
		const char *msg;
	} cases[] = {
		{{"k", "{not json", NULL},
		 2,
		 "pgjob: enqueue: payload is not valid JSON: {not json\n"},
		{{"k", "[1]", NULL},
		 2,
		 "pgjob: enqueue: payload must be a JSON object: [1]\n"},
		{{"k", "--bogus", NULL},
		 2,
		 "pgjob: enqueue: unknown option \"--bogus\"\n"},
		{{"k", "--priority", "high", NULL},
		 2,
		 "pgjob: enqueue: bad --priority \"high\" (an integer from "
		 "-32768 to 32767)\n"},
		{{"k", "--in", "5x", NULL},
		 2,
		 "pgjob: enqueue: bad --in \"5x\" (use 500ms, 30s, 5m, 2h, "
		 "7d)\n"},
		{{"k", "--in", "5m", "--run-at", "2030-01-01", NULL},
		 2,
		 "pgjob: enqueue: --run-at and --in exclude each other\n"},
		{{NULL}, 2, "pgjob: enqueue: missing KIND\n"},
		{{"k", "{}", "extra", NULL},
		 2,
		 "pgjob: enqueue: unexpected argument \"extra\"\n"},
		{{"k", "--run-at", "not a time", NULL},
		 1,
		 "pgjob: enqueue: 22007: invalid input syntax for type "
		 "timestamp with time zone: \"not a time\"\n"},
	};
	PGconn *c = t_connect(ci);
	long long before = t_long(c, "select count(*) from pgjob.all_jobs");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct t_run r;
		enqueue(&r, cases[i].args);
		assert_int_equal(r.status, cases[i].status);
		assert_string_equal(r.err, cases[i].msg);
		assert_string_equal(r.out, "");
		t_run_free(&r);
	}
	assert_int_equal(t_long(c, "select count(*) from pgjob.all_jobs"),
			 before);
	PQfinish(c);
}

static void
test_cli_database_sources(void **state)
{
	struct t_run r;
	PGconn *c = t_connect(ci);

	/* From the config file's database.conninfo, via ${NAME}. */
	char cfg[512], env[1100];
	snprintf(cfg, sizeof(cfg), "%s/db.yaml", t_tmpdir());
	t_write_file(cfg, "database:\n  conninfo: \"${T_CONNINFO}\"\n");
	snprintf(env, sizeof(env), "T_CONNINFO=%s", ci);
	const char *envs[] = {env, NULL};
	const char *argv[] = {t_bin("pgjob"), "-c",	  cfg,
			      "enqueue",      "from_cfg", NULL};
	t_run(&r, 30, envs, argv);
	assert_int_equal(r.status, 0);
	t_run_free(&r);
	assert_int_equal(t_long(c, "select count(*) from pgjob.all_jobs where "
				   "kind = 'from_cfg'"),
			 1);

	/* From PG* variables. */
	char dbname[64], host[64], port[64];
	snprintf(dbname, sizeof(dbname), "PGDATABASE=%s", PQdb(c));
	snprintf(host, sizeof(host), "PGHOST=%s", PQhost(c));
	snprintf(port, sizeof(port), "PGPORT=%s", PQport(c));
	const char *pgenv[] = {dbname, host, port, "PGUSER=postgres", NULL};
	const char *argv2[] = {t_bin("pgjob"), "enqueue", "from_env", NULL};
	t_run(&r, 30, pgenv, argv2);
	assert_int_equal(r.status, 0);
	t_run_free(&r);
	assert_int_equal(t_long(c, "select count(*) from pgjob.all_jobs where "
				   "kind = 'from_env'"),
			 1);

	/* A config that does not validate: its errors and exit 78. */
	t_write_file(cfg, "workers: 0\n");
	const char *argv3[] = {t_bin("pgjob"), "-c", cfg, "enqueue", "x", NULL};
	t_run(&r, 30, NULL, argv3);
	assert_int_equal(r.status, 78);
	assert_non_null(strstr(r.err, "db.yaml:1:10: workers:"));
	t_run_free(&r);
	PQfinish(c);
}

static void
test_cli_unreachable(void **state)
{
	struct t_run r;
	const char *argv[] = {t_bin("pgjob"),
			      "--database",
			      "postgresql://u:hunter2@127.0.0.1:1/x"
			      "?connect_timeout=2",
			      "enqueue",
			      "k",
			      NULL};
	t_run(&r, 30, NULL, argv);
	assert_int_equal(r.status, 1);
	assert_non_null(strstr(r.err, "pgjob: cannot connect to database ("));
	assert_null(strstr(r.err, "hunter2"));
	/* One line. */
	assert_ptr_equal(strchr(r.err, '\n'), r.err + strlen(r.err) - 1);
	t_run_free(&r);
}

static void
test_cli_usage(void **state)
{
	struct t_run r;
	const char *argv[] = {t_bin("pgjob"), "frobnicate", NULL};
	t_run(&r, 30, NULL, argv);
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "pgjob: unknown command \"frobnicate\""));
	t_run_free(&r);
	const char *v[] = {t_bin("pgjob"), "version", NULL};
	t_run(&r, 30, NULL, v);
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, "pgjob 0."));
	t_run_free(&r);
}

/*
 * A child enqueued (depends_on) while its parent ends done: the parent,
 * a plain job, moves to pgjob.jobs_done in its end's statement (a delete
 * from pgjob.jobs), after the child's enqueue saw it in pgjob.jobs and
 * while it waits for the parent's lock.  The enqueue failed there ("a
 * parent was deleted", 23503) until schema version 46; now the parent comes
 * back and the child is enqueued with its result, as after any end.  The
 * move here is the finish's statement restated (src/db/finish.c), held
 * open until the enqueue waits for it.  A parent deleted meanwhile
 * (retention 0, a prune) still fails the enqueue, and the error names it.
 */
static void
test_parent_moved_while_locking(void **state)
{
	PGconn *c = t_connect(ci);
	PGconn *mover = t_connect(ci);
	long long p = t_long(c, "select pgjob.enqueue('pm_parent')");
	t_exec(mover, "begin");
	t_exec(mover,
	       "with fd as (delete from pgjob.jobs j where j.id = %lld"
	       "  returning j.*)"
	       " insert into pgjob.jobs_done (id, queue, kind, payload,"
	       "  priority, run_at, state, attempts, max_attempts, locked_by,"
	       "  locked_until, lease_token, unique_key, ordering_key,"
	       "  last_error, result, created_at, finished_at, lost_attempts,"
	       "  limit_key, cost, attempted_at, children, parents_left,"
	       "  on_parent_failure, workflow_id, step, batch_id,"
	       "  enqueued_by, ring)"
	       " select id, queue, kind, payload, priority, run_at, 'done', 1,"
	       "  max_attempts, 'w:1', null, 1, unique_key, ordering_key,"
	       "  last_error, '{\"made\": 1}', created_at, now(), 0,"
	       "  limit_key, cost, now(), children, parents_left,"
	       "  on_parent_failure, workflow_id, step, batch_id,"
	       "  enqueued_by, pgjob.done_ring(now(), 604800000) from fd",
	       p);
	char q[160];
	snprintf(q, sizeof(q),
		 "select pgjob.enqueue('pm_child', depends_on => array[%lld])",
		 p);
	assert_int_equal(PQsendQuery(c, q), 1);
	/* It waits for the parent's row (the mover's delete holds it). */
	PGconn *watch = t_connect(ci);
	t_wait_lock_wait(watch, PQbackendPID(c), 30);
	t_exec(mover, "commit");
	PGresult *res = PQgetResult(c);
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		fail_msg("the child's enqueue failed: %s",
			 PQresultErrorMessage(res));
	long long child = atoll(PQgetvalue(res, 0, 0));
	PQclear(res);
	assert_null(PQgetResult(c));
	/* Released at once, with what its parent gave; the parent back in
	 * pgjob.jobs, marked as having children, its edge settled. */
	t_assert_value(c, "available 1",
		       "select state || ' ' || (payload -> 'pgjob' -> 'parents'"
		       " -> '%lld' ->> 'made') from pgjob.jobs where id = %lld",
		       p, child);
	t_assert_value(c, "done true",
		       "select state || ' ' || children from pgjob.jobs"
		       " where id = %lld",
		       p);
	t_assert_value(c, "done",
		       "select resolved from pgjob.job_deps where child ="
		       " %lld",
		       child);
	/* A parent deleted (retention 0, a prune) while the enqueue waits
	 * for it: the enqueue fails, naming the parent. */
	long long gone = t_long(c, "select pgjob.enqueue('pm_parent')");
	t_exec(mover, "begin");
	t_exec(mover, "delete from pgjob.jobs where id = %lld", gone);
	snprintf(q, sizeof(q),
		 "select pgjob.enqueue('pm_child', depends_on => array[%lld])",
		 gone);
	assert_int_equal(PQsendQuery(c, q), 1);
	t_wait_lock_wait(watch, PQbackendPID(c), 30);
	t_exec(mover, "commit");
	res = PQgetResult(c);
	assert_int_equal(PQresultStatus(res), PGRES_FATAL_ERROR);
	assert_string_equal(PQresultErrorField(res, PG_DIAG_SQLSTATE), "23503");
	char want[96];
	snprintf(want, sizeof(want), "depends_on: parent %lld was deleted",
		 gone);
	if (!strstr(PQresultErrorMessage(res), want))
		fail_msg("the enqueue's error: %s", PQresultErrorMessage(res));
	PQclear(res);
	assert_null(PQgetResult(c));
	PQfinish(watch);
	PQfinish(mover);
	PQfinish(c);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sql_defaults),
		cmocka_unit_test(test_sql_named_arguments),
		cmocka_unit_test(test_unique_key),
		cmocka_unit_test(test_payload_must_be_object),
		cmocka_unit_test(test_notify),
		cmocka_unit_test(test_parent_moved_while_locking),
		cmocka_unit_test(test_cli_enqueue),
		cmocka_unit_test(test_cli_errors),
		cmocka_unit_test(test_cli_database_sources),
		cmocka_unit_test(test_cli_unreachable),
		cmocka_unit_test(test_cli_usage),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
