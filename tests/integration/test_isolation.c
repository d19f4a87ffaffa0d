/*
 * Integration: process isolation (docs/security.md#process-isolation).
 * What an exec handler can read of the daemon that runs it, and what
 * becomes of it when the daemon dies.
 *
 * - A handler that runs as the daemon's own user cannot read the worker's
 *   or the supervisor's environment (they are not dumpable), and the
 *   variables that the config expanded are not in that environment anyway:
 *   the test itself, as root, reads /proc/<worker>/environ and finds an
 *   unrelated variable but not the expanded ones.  The daemon runs as
 *   nobody here (t_spawn_as()).
 * - A handler with `user: nobody` under a root daemon runs as nobody and
 *   reads nothing of the daemon either.
 * - When the daemon's whole process group is SIGKILLed, the exec handler
 *   it was running dies too (its own process group is not the daemon's).
 *
 * These need root (to start processes as nobody); without it they skip.
 */
#include "testlib.h"

#include <cjson/cJSON.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"

/* The secrets the configs take from the environment, and a variable that
 * no config names (it must stay visible, so the reads are the right ones). */
#define MARK	"s3cret-iso"
#define VISIBLE "PGJOBD_T_VISIBLE=visible-iso"
static const char *const secret_env[] = {
	"PGJOBD_T_PASS=pw-" MARK,
	"PGJOBD_T_TOKEN=token-" MARK,
	VISIBLE,
	NULL,
};

/*
 * Starts `pgjobd -c cfg -w 1` in its own process group, as uid:gid (0: as
 * root), with secret_env added to its environment and its log in logname.
 */
static pid_t
daemon_as(uid_t uid, gid_t gid, const char *cfg, const char *logname)
{
	const char *argv[] = {t_bin("pgjobd"), "-c", cfg, "-w", "1", NULL};
	return t_spawn_as(uid, gid, t_log(logname), secret_env, argv);
}

/* The config: a peek handler (isolation.sh), and secrets in places a
 * config keeps them: the database password and another handler's env. */
static const char *
config(const char *name, const char *ci, const char *peek_extra)
{
	char *conninfo = xasprintf("%s password=${PGJOBD_T_PASS}", ci);
	char *body = xasprintf(
		"workers: 1\n"
		"handlers:\n"
		"  peek: { type: exec, command: [/bin/sh, \"%s\", %s]%s }\n"
		"  other: { type: exec, command: [/bin/true],"
		" env: { TOKEN: \"${PGJOBD_T_TOKEN}\" } }\n",
		t_src("tests/fixtures/handlers/isolation.sh"), MARK,
		peek_extra);
	const char *cfg = t_config(name, conninfo, body);

	free(conninfo);
	free(body);
	return cfg;
}

/* Runs one peek job and returns what the handler found (caller frees with
 * cJSON_Delete()). */
static cJSON *
peek(PGconn *c)
{
	long long id = t_long(c, "select pgjob.enqueue('peek', '{}')");
	char *text;
	cJSON *j;

	t_wait_state(c, id, "done", 30);
	text = t_job(c, id, "result::text");
	assert_non_null(text);
	printf("peek: %s\n", text);
	j = cJSON_Parse(text);
	assert_non_null(j);
	free(text);
	return j;
}

static int
num(cJSON *j, const char *key)
{
	cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);

	assert_true(cJSON_IsNumber(v));
	return v->valueint;
}

/* The test reads /proc/<pid>/environ itself (as root): the variables the
 * config expanded are gone from it, the others are there. */
static void
check_environ(int pid)
{
	char path[64], *env;
	size_t len;
	struct buf b = {0};
	FILE *f;
	char chunk[4096];

	snprintf(path, sizeof(path), "/proc/%d/environ", pid);
	f = fopen(path, "r");
	assert_non_null(f);
	while ((len = fread(chunk, 1, sizeof(chunk), f)) > 0)
		buf_append(&b, chunk, len);
	fclose(f);
	/* NUL-separated: make it one string. */
	for (size_t i = 0; i < b.len; i++)
		if (b.data[i] == '\0')
			b.data[i] = '\n';
	env = b.data ? b.data : "";
	assert_non_null(strstr(env, VISIBLE));
	assert_null(strstr(env, MARK));
	buf_free(&b);
}

/*
 * What a peek found when the handler could read nothing of the daemon: it
 * ran as uid; it could not read the worker's environment and found no
 * secret in the worker or the supervisor; and the test itself finds no
 * expanded variable in their environments.
 */
static void
assert_nothing_seen(cJSON *j, uid_t uid)
{
	assert_int_equal(num(j, "uid"), (int)uid);
	/* Not dumpable: a process of the same user cannot read it. */
	assert_false(cJSON_IsTrue(
		cJSON_GetObjectItemCaseSensitive(j, "worker_env")));
	assert_int_equal(num(j, "worker_secrets"), 0);
	assert_int_equal(num(j, "supervisor_secrets"), 0);
	/* And what the config expanded is not in the environment at all. */
	check_environ(num(j, "worker"));
	check_environ(num(j, "supervisor"));
}

static void
test_same_user(void **state)
{
	struct passwd *pw = getpwnam("nobody");
	char *ci;
	PGconn *c;
	pid_t d;
	cJSON *j;

	if (geteuid() != 0 || !pw)
		skip();
	ci = t_db_migrated("t_isolation_same");
	c = t_connect(ci);
	d = daemon_as(pw->pw_uid, pw->pw_gid, config("same", ci, ""), "same");
	j = peek(c);
	assert_nothing_seen(j, pw->pw_uid);
	assert_int_equal(num(j, "supervisor"), d);
	cJSON_Delete(j);
	/* A reload that adds user: to a daemon that is not root is refused
	 * with the key's place, as a start would be; the old config runs. */
	config("same", ci, ", user: nobody");
	kill(d, SIGHUP);
	assert_int_equal(t_wait_log("same", "reload refused", 1, 10), 1);
	assert_true(t_log_count("same", "handlers.peek.user") > 0);
	assert_true(t_alive(d));
	t_stop_clean(d);
	PQfinish(c);
	free(ci);
}

static void
test_handler_user(void **state)
{
	struct passwd *pw = getpwnam("nobody");
	char *ci;
	PGconn *c;
	pid_t d;
	cJSON *j;

	if (geteuid() != 0 || !pw)
		skip();
	ci = t_db_migrated("t_isolation_user");
	c = t_connect(ci);
	d = daemon_as(0, 0, config("user", ci, ", user: nobody"), "user");
	j = peek(c);
	assert_nothing_seen(j, pw->pw_uid);
	cJSON_Delete(j);

	/* A reload expands the same variables again, from the private copy
	 * (a variable that is not set would refuse it), and its new worker
	 * has no more of them than the first. */
	kill(d, SIGHUP);
	assert_int_equal(t_wait_log("user", "reload done", 1, 30), 1);
	assert_int_equal(t_log_count("user", "reload refused"), 0);
	j = peek(c);
	assert_int_equal(num(j, "uid"), (int)pw->pw_uid);
	check_environ(num(j, "worker"));
	cJSON_Delete(j);
	t_stop_clean(d);
	PQfinish(c);
	free(ci);
}

static void
test_dies_with_daemon(void **state)
{
	char *ci = t_db_migrated("t_isolation_kill");
	char *file = xasprintf("%s/handler.pid", t_tmpdir());
	char *body = xasprintf(
		"workers: 1\n"
		"handlers:\n"
		"  long: { type: exec, command: [/bin/sh, -c,"
		" \"echo $$$$ > %s.tmp && mv %s.tmp %s && exec sleep 60\"] }\n",
		file, file, file);
	PGconn *c = t_connect(ci);
	pid_t d, h;

	unlink(file);
	d = t_daemon(t_config("kill", ci, body), 1, "kill");
	t_exec(c, "select pgjob.enqueue('long', '{}')");
	h = t_pid_in_file(file, 30);
	assert_true(t_alive(h));
	/* The daemon's whole process group, as a kill outside systemd does:
	 * the supervisor dies too, so nobody is left to clean up but the
	 * kernel. */
	assert_int_equal(kill(-d, SIGKILL), 0);
	assert_int_equal(t_wait(d, 10), 128 + SIGKILL);
	t_wait_gone(h, 10); /* killed there if not, not to be left behind */
	PQfinish(c);
	free(body);
	free(file);
	free(ci);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_same_user),
		cmocka_unit_test(test_handler_user),
		cmocka_unit_test(test_dies_with_daemon),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
