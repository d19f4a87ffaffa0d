/*
 * Integration: pgjobd and pgjob behind a real PgBouncer
 * (scripts/testbouncer.sh, in front of the "pg" fixture's server).
 * Workers run through a session pool and refuse a transaction or statement
 * pool, once each, with a message that names the fix, and the supervisor
 * stops; pgjob and pgjob.enqueue() work through a transaction pool, and a
 * pgjobd pointed at PostgreSQL directly runs what they enqueued.
 * pooler_check() itself is asked too, on each kind of connection.
 */
#include "testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "db/db.h"
#include "db/pooler.h"

#define NOOP                                                                   \
	"handlers:\n"                                                          \
	"  noop: { type: exec, command: [\"/bin/true\"] }\n"

#define REFUSED "shares server sessions between clients"

/* The pgbouncers running, so that a failed test leaves none behind
 * (teardown()). */
static char *running[8];

/* Starts a pgbouncer named name (its directory in t_tmpdir()) in pool_mode
 * mode; returns its directory in *dir and the conninfo of database db
 * through it (both for the caller to free). */
static char *
bouncer_start(const char *name, const char *mode, int pool_size, const char *db,
	      char **dir)
{
	*dir = xasprintf("%s/bouncer-%s", t_tmpdir(), name);
	char size[16];
	snprintf(size, sizeof(size), "%d", pool_size);
	const char *argv[] = {"bash",
			      t_src("scripts/testbouncer.sh"),
			      "start",
			      *dir,
			      getenv("PGJOBD_TESTPG"),
			      mode,
			      size,
			      NULL};
	struct t_run r;
	t_run(&r, 60, NULL, argv);
	if (r.status != 0)
		fail_msg("testbouncer.sh start %s: exit %d: %s%s", mode,
			 r.status, r.out, r.err);
	t_run_free(&r);
	for (size_t i = 0; i < sizeof(running) / sizeof(running[0]); i++)
		if (!running[i]) {
			running[i] = *dir;
			break;
		}
	char *path = xasprintf("%s/conninfo", *dir);
	char *ci = t_read_file(path);
	free(path);
	assert_non_null(ci);
	ci[strcspn(ci, "\n")] = '\0';
	/* The last dbname= wins in a conninfo string. */
	char *out = xasprintf("%s dbname=%s", ci, db);
	free(ci);
	return out;
}

/* Stops the pgbouncer in dir, and frees dir. */
static void
bouncer_stop(char *dir)
{
	const char *argv[] = {"bash", t_src("scripts/testbouncer.sh"), "stop",
			      dir, NULL};
	struct t_run r;
	t_run(&r, 60, NULL, argv);
	assert_int_equal(r.status, 0);
	t_run_free(&r);
	for (size_t i = 0; i < sizeof(running) / sizeof(running[0]); i++)
		if (running[i] == dir)
			running[i] = NULL;
	free(dir);
}

/* Stops what a failed test left running. */
static int
teardown(void **state)
{
	for (size_t i = 0; i < sizeof(running) / sizeof(running[0]); i++)
		if (running[i])
			bouncer_stop(running[i]);
	return 0;
}

/* What pooler_check() says of a new connection to conninfo; *msg as it
 * sets it. */
static enum pooler
check(const char *conninfo, char **msg)
{
	char *err;
	struct db_conn *c = db_connect(conninfo, "pgjobd", &err);
	if (!c)
		fail_msg("%s", err);
	enum pooler found = pooler_check(c, msg);
	db_close(c);
	return found;
}

static void
test_check_each_kind(void **state)
{
	const char *db = "t_pooler_check";
	char *ci = t_db_migrated(db);
	char *msg, *dirs[5];
	char *sess = bouncer_start("check-s", "session", 2, db, &dirs[0]);
	char *full = bouncer_start("check-s1", "session", 1, db, &dirs[4]);
	char *one = bouncer_start("check-t1", "transaction", 1, db, &dirs[1]);
	char *four = bouncer_start("check-t4", "transaction", 4, db, &dirs[2]);
	char *stmt = bouncer_start("check-st", "statement", 1, db, &dirs[3]);

	/* PostgreSQL itself: never flagged, no message. */
	assert_int_equal(check(ci, &msg), POOLER_DIRECT);
	assert_null(msg);
	/* A session pool: found, and it kept our session (a warning). */
	assert_int_equal(check(sess, &msg), POOLER_SESSION);
	assert_non_null(strstr(msg, "kept this connection's server session"));
	free(msg);
	/* A session pool whose one server connection is ours: the probe
	 * waits for another in vain, and the worker is told it could not
	 * tell (and starts). */
	assert_int_equal(check(full, &msg), POOLER_UNKNOWN);
	assert_non_null(strstr(msg, "could not be checked"));
	assert_non_null(strstr(msg, "no server connection free"));
	free(msg);
	/* A transaction pool with one server connection and no other
	 * client: the hard case for any check of session state. */
	assert_int_equal(check(one, &msg), POOLER_SHARED);
	assert_non_null(strstr(msg, "pool_mode=transaction or statement"));
	assert_non_null(strstr(msg, "point database.conninfo at PostgreSQL "
				    "directly or at a session-mode pool"));
	free(msg);
	/* A transaction pool whose four server connections are all open:
	 * four clients in a transaction each, then idle. */
	PGconn *held[4];
	long long pids[4];
	for (int i = 0; i < 4; i++) {
		held[i] = t_connect(four);
		t_exec(held[i], "begin");
		pids[i] = t_long(held[i], "select pg_backend_pid()");
		for (int k = 0; k < i; k++)
			assert_true(pids[k] != pids[i]);
	}
	for (int i = 0; i < 4; i++) {
		t_exec(held[i], "commit");
		PQfinish(held[i]);
	}
	assert_int_equal(check(four, &msg), POOLER_SHARED);
	free(msg);
	assert_int_equal(check(stmt, &msg), POOLER_SHARED);
	free(msg);

	for (int i = 0; i < 5; i++)
		bouncer_stop(dirs[i]);
	free(sess);
	free(full);
	free(one);
	free(four);
	free(stmt);
	free(ci);
}

static void
test_session_pool_runs_jobs(void **state)
{
	char *ci = t_db_migrated("t_pooler_session");
	char *dir;
	char *pool = bouncer_start("session", "session", 20, "t_pooler_session",
				   &dir);
	PGconn *c = t_connect(ci);
	t_exec(c, "select pgjob.enqueue('noop', jsonb_build_object('n', n))"
		  " from generate_series(1, 300) n");

	pid_t p = t_start("session", pool, "workers: 4\n" NOOP);
	t_wait_done(c, 300, 120);
	/* Every worker took its slot through the pool, and each said once
	 * that a transaction-mode pool would break it. */
	t_wait_workers(c, 4, 10);
	assert_int_equal(t_log_count("session", "connected, slot"), 4);
	assert_int_equal(t_log_count("session", "kept this connection's "
						"server session"),
			 4);
	assert_int_equal(t_log_count("session", REFUSED), 0);
	t_stop_clean(p);
	bouncer_stop(dir);
	PQfinish(c);
	free(pool);
	free(ci);
}

/* Refused by mode's pool: once per worker, no restart, supervisor exits
 * 78 (EXIT_CONFIG). */
static void
refused(const char *mode, const char *pool)
{
	char name[64];
	snprintf(name, sizeof(name), "refused-%s", mode);
	pid_t p = t_start(name, pool, "workers: 3\n" NOOP);
	assert_int_equal(t_wait(p, 60), 78);
	int errors = t_log_count(name, REFUSED);
	assert_true(errors >= 1 && errors <= 3);
	assert_int_equal(t_log_count(name, "level=error proc=worker"), errors);
	/* Each of the three workers started once. */
	assert_int_equal(t_log_count(name, "exited with status") +
				 t_log_count(name, "killed by signal"),
			 3);
	assert_int_equal(t_log_count(name, "restarting"), 0);
	assert_int_equal(t_log_count(name, "connected, slot"), 0);
	assert_true(t_log_count(name, "cannot work with this config or "
				      "schema; stopping") == 1);
}

static void
test_transaction_pool_enqueues_only(void **state)
{
	char *ci = t_db_migrated("t_pooler_trans");
	char *tdir, *stdir;
	char *trans = bouncer_start("trans", "transaction", 1, "t_pooler_trans",
				    &tdir);
	char *stmt =
		bouncer_start("stmt", "statement", 2, "t_pooler_trans", &stdir);
	PGconn *c = t_connect(ci);

	refused("transaction", trans);
	refused("statement", stmt);
	assert_true(t_long(c, "select count(*) from pgjob.workers") == 0);

	/* The application's side: the CLI and SQL through the pool. */
	struct t_run r;
	for (int i = 0; i < 20; i++) {
		char payload[32];
		snprintf(payload, sizeof(payload), "{\"i\": %d}", i);
		t_pgjob(&r, trans, "enqueue", "noop", payload, NULL);
		assert_int_equal(r.status, 0);
		t_run_free(&r);
	}
	PGconn *app = t_connect(trans);
	for (int i = 0; i < 20; i++)
		t_exec(app, "select pgjob.enqueue('noop', '{\"sql\": %d}')", i);
	t_exec(app, "begin");
	t_exec(app, "select pgjob.enqueue('noop', '{\"in\": \"tx\"}')");
	t_exec(app, "select pgjob.enqueue('noop', '{\"in\": \"tx\"}')");
	t_exec(app, "commit");
	PQfinish(app);
	assert_true(t_long(c, "select count(*) from pgjob.all_jobs"
			      " where state = 'available'") == 42);
	t_pgjob(&r, trans, "status", NULL);
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, "default"));
	t_run_free(&r);

	/* pgjob doctor names the pool: a warning for an operator's
	 * --database, a failure for the config's conninfo (the workers'). */
	t_pgjob(&r, trans, "doctor", NULL);
	assert_true(r.status >= 1);
	assert_non_null(strstr(r.out, "WARN  pooler: "));
	assert_non_null(strstr(r.out, "workers that use it refuse to start"));
	t_run_free(&r);
	const char *cfg = t_config("pooler_doctor", trans, "");
	const char *dargv[] = {t_bin("pgjob"), "-c", cfg, "doctor", NULL};
	t_run(&r, 60, NULL, dargv);
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.out, "FAIL  pooler: "));
	assert_non_null(strstr(r.out, "fix: point database.conninfo"));
	t_run_free(&r);
	t_pgjob(&r, trans, "jobs", "--state", "available", NULL);
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, "noop"));
	t_run_free(&r);
	/* The operator's other commands, each through the pool too. */
	const char *const cmds[][4] = {
		{"show", "1", NULL},
		{"cancel", "1", NULL},
		{"retry", "1", NULL},
		{"pause", "default", NULL},
		{"resume", "default", NULL},
		{"top", "--once", NULL},
		{"limits", NULL},
		{"migrate", "--status", NULL},
		{"prune", NULL},
	};
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		t_pgjobv(&r, trans, cmds[i]);
		if (r.status != 0)
			fail_msg("pgjob %s through a transaction pool: exit "
				 "%d: %s",
				 cmds[i][0], r.status, r.err);
		t_run_free(&r);
	}
	assert_true(t_long(c, "select count(*) from pgjob.all_jobs"
			      " where state = 'available'") == 42);

	/* A pgjobd pointed at PostgreSQL runs them, and sees no pooler. */
	pid_t p = t_start("direct", ci, "workers: 2\n" NOOP);
	t_wait_done(c, 42, 60);
	assert_int_equal(t_log_count("direct", "pooler"), 0);
	assert_int_equal(t_log_count("direct", "connection pool"), 0);
	t_stop_clean(p);

	t_pgjob(&r, trans, "jobs", "--state", "done", NULL);
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, "done"));
	t_run_free(&r);
	bouncer_stop(tdir);
	bouncer_stop(stdir);
	PQfinish(c);
	free(trans);
	free(stmt);
	free(ci);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_check_each_kind, teardown),
		cmocka_unit_test_teardown(test_session_pool_runs_jobs,
					  teardown),
		cmocka_unit_test_teardown(test_transaction_pool_enqueues_only,
					  teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
