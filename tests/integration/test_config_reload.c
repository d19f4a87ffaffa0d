/*
 * Integration: a config that tells the truth (docs/configuration.md).  Real
 * pgjobd and pgjob processes against the test server: a secret in a file
 * rotates on reload and reaches a real job, and never a log line nor a
 * command line; a reload whose command or plugin would fail is refused
 * with the value's place, the old config keeps running jobs, and the
 * supervisor loads no plugin itself; a setting a reload cannot apply is
 * named; --check-config reports plugins that do not load; a plugin given
 * by name loads; pgjob -c runs without the handlers' secrets; the shipped
 * example validates with an empty environment.
 */
#include "testlib.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"

/* Two secrets that no other text of a log could hold. */
#define SECRET1 "rot-8c1f5e-first"
#define SECRET2 "rot-27d9aa-second"

static void
write_secret(const char *path, const char *value)
{
	char *tmp = xasprintf("%s.tmp", path);
	char *text = xasprintf("%s\n", value);

	/* Replaced by a rename, as an operator's tooling does. */
	t_write_file(tmp, text);
	assert_int_equal(chmod(tmp, 0600), 0);
	assert_int_equal(rename(tmp, path), 0);
	free(text);
	free(tmp);
}

/* Enqueues a `show` job and returns the token its command printed. */
static char *
token_seen(PGconn *c)
{
	long long id = t_long(c, "select pgjob.enqueue('show', '{}')");

	t_wait_state(c, id, "done", 60);
	return t_job(c, id, "result->>'token'");
}

static const char show_body[] =
	"workers: 1\n"
	"handlers:\n"
	"  show:\n"
	"    type: exec\n"
	"    command: [/bin/sh, -c, 'printf \"{\\\"token\\\":\\\"%%s\\\"}\" "
	"\"$TOKEN\"']\n"
	"    env: { TOKEN: \"${file:%s}\" }\n"
	"%s";

/*
 * A ${file:} secret is read again at each reload: a job after the reload
 * sees the new value.  Neither value is in the log.
 */
static void
test_secret_rotates(void **state)
{
	char *ci = t_db_migrated("t_creload_secret");
	PGconn *c = t_connect(ci);
	char *secret = xasprintf("%s/token", t_tmpdir());
	char *tok;
	pid_t d;

	write_secret(secret, SECRET1);
	d = t_start("secret", ci, show_body, secret, "");
	tok = token_seen(c);
	assert_string_equal(tok, SECRET1);
	free(tok);

	write_secret(secret, SECRET2);
	kill(d, SIGHUP);
	t_wait_log("secret", "reload done", 1, 30);
	tok = token_seen(c);
	assert_string_equal(tok, SECRET2);
	free(tok);
	assert_int_equal(t_log_count("secret", "reload refused"), 0);

	/* A secret made group-writable: the reload is refused, saying which
	 * reference, and the last good secret keeps working. */
	assert_int_equal(chmod(secret, 0620), 0);
	kill(d, SIGHUP);
	t_wait_log("secret", "reload refused", 1, 30);
	assert_true(t_log_count("secret", "handlers.show.env.TOKEN: ${file:") >
		    0);
	assert_true(t_log_count("secret", "writable by group or others") > 0);
	tok = token_seen(c);
	assert_string_equal(tok, SECRET2);
	free(tok);
	/* Nor in the processes' command lines. */
	char *cmd = t_cmdline(d);
	assert_null(strstr(cmd, "rot-"));
	free(cmd);
	cmd = t_cmdline(t_worker_pid(c, d));
	assert_null(strstr(cmd, "rot-"));
	free(cmd);
	t_stop_clean(d);

	assert_int_equal(t_log_count("secret", SECRET1), 0);
	assert_int_equal(t_log_count("secret", SECRET2), 0);
	PQfinish(c);
	free(secret);
	free(ci);
}

/* Whether the process pid has a file whose path holds needle mapped. */
static int
maps_hold(pid_t pid, const char *needle)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	return t_count_in_file(path, needle) > 0;
}

/*
 * A reload whose exec command does not exist, or whose plugin lacks its
 * symbol, has the wrong ABI or does not load, is refused with the value's
 * file:line:column; the old config keeps running jobs, and the supervisor
 * never loaded the plugin.
 */
static void
test_reload_refused(void **state)
{
	char *ci = t_db_migrated("t_creload_refused");
	PGconn *c = t_connect(ci);
	char *plugins = xstrdup(t_bin("pgjobd_test_plugins.so"));
	char *crash = xstrdup(t_bin("pgjobd_crash_on_load.so"));
	char *notelf = xasprintf("%s/notelf.so", t_tmpdir());
	char *body;
	long long id;
	pid_t d;

	t_write_file(notelf, "not a shared library\n");
	d = t_start("refused", ci,
		    "workers: 1\n"
		    "handlers:\n"
		    "  hello: { type: exec, command: [/bin/echo, "
		    "'{\"v\":1}'] }\n");
	id = t_long(c, "select pgjob.enqueue('hello', '{}')");
	t_wait_state(c, id, "done", 60);

	/* command[0]'s place in the file t_config writes (its database
	 * section takes the first two lines). */
	t_config("refused", ci,
		 "workers: 1\n"
		 "handlers:\n"
		 "  hello: { type: exec, command: [/nonexistent/hello, "
		 "'{\"v\":2}'] }\n");
	kill(d, SIGHUP);
	t_wait_log("refused", "reload refused", 1, 30);
	assert_int_equal(t_log_count("refused",
				     "refused.yaml:5:34: "
				     "handlers.hello.command[0]: "
				     "\\\"/nonexistent/hello\\\": No such "
				     "file or directory"),
			 1);
	id = t_long(c, "select pgjob.enqueue('hello', '{}')");
	t_wait_state(c, id, "done", 60);
	t_assert_job(c, id, "result->>'v'", "1");

	body = xasprintf("workers: 1\n"
			 "handlers:\n"
			 "  hello: { type: exec, command: [/bin/echo, "
			 "'{\"v\":3}'] }\n"
			 "  nosym: { type: plugin, library: \"%s\", "
			 "symbol: nope }\n"
			 "  abi: { type: plugin, library: \"%s\", "
			 "symbol: bad_abi }\n"
			 "  broken: { type: plugin, library: \"%s\", "
			 "symbol: x }\n"
			 "  crash: { type: plugin, library: \"%s\", "
			 "symbol: pgjobd_crash_on_load }\n",
			 plugins, plugins, notelf, crash);
	t_config("refused", ci, body);
	kill(d, SIGHUP);
	t_wait_log("refused", "reload refused", 2, 30);
	assert_true(t_log_count("refused", ": handlers.nosym.symbol: no "
					   "symbol \\\"nope\\\" in ") > 0);
	assert_true(t_log_count("refused",
				": handlers.abi.symbol: plugin ABI "
				"version 99, this pgjobd takes ") > 0);
	assert_true(t_log_count("refused", ": handlers.broken.library: "
					   "cannot load: ") > 0);
	assert_true(t_log_count("refused", ": handlers.crash.library: loading "
					   "") > 0);
	assert_true(t_log_count("refused",
				"pgjobd_crash_on_load.so killed "
				"the checking process (signal 11)") > 0);
	/* The supervisor checked them in a child: it has none mapped. */
	assert_false(maps_hold(d, "pgjobd_test_plugins"));
	assert_false(maps_hold(d, "notelf"));
	assert_false(maps_hold(d, "crash_on_load"));
	assert_true(t_alive(d));
	id = t_long(c, "select pgjob.enqueue('hello', '{}')");
	t_wait_state(c, id, "done", 60);
	t_assert_job(c, id, "result->>'v'", "1");
	t_stop_clean(d);
	PQfinish(c);
	free(body);
	free(notelf);
	free(crash);
	free(plugins);
	free(ci);
}

/* metrics.listen is bound at start: a reload says it keeps the old one. */
static void
test_reload_names_what_it_keeps(void **state)
{
	char *ci = t_db_migrated("t_creload_kept");
	int port = t_free_port(), other = t_free_port();
	char *want;
	pid_t d;

	d = t_start("kept", ci,
		    "workers: 1\n"
		    "metrics: { listen: \"127.0.0.1:%d\" }\n",
		    port);
	t_wait_log("kept", "ready:", 1, 60);
	want = xasprintf("workers: 1\nmetrics: { listen: \"127.0.0.1:%d\" }\n",
			 other);
	t_config("kept", ci, want);
	free(want);
	kill(d, SIGHUP);
	t_wait_log("kept", "reload done", 1, 30);
	want = xasprintf("metrics.listen changed: needs a restart; kept "
			 "127.0.0.1:%d",
			 port);
	assert_int_equal(t_log_count("kept", want), 1);
	free(want);
	/* And it is served there still. */
	char *got = t_http_get(port, "/healthz");
	assert_non_null(got);
	free(got);
	t_stop_clean(d);
	free(ci);
}

/* --check-config (the host too) and --check-config=static (the file). */
static void
test_check_config(void **state)
{
	char *plugins = xstrdup(t_bin("pgjobd_test_plugins.so"));
	char *crash = xstrdup(t_bin("pgjobd_crash_on_load.so"));
	char *body = xasprintf(
		"handlers:\n"
		"  nosym: { type: plugin, library: \"%s\", symbol: nope }\n"
		"  gone: { type: plugin, library: examples/none, symbol: x }\n"
		"  run: { type: exec, command: [no-such-program-here] }\n"
		"  hook: { type: http, url: \"http://\" }\n"
		"  abi: { type: plugin, library: \"%s\", symbol: bad_abi }\n"
		"  crash: { type: plugin, library: \"%s\", symbol: x }\n"
		"tasks:\n"
		"  feed: { command: [/nonexistent/feed] }\n",
		plugins, plugins, crash);
	const char *cfg = t_config("check", "dbname=x", body);
	const char *deep[] = {t_bin("pgjobd"), "-c", cfg, "--check-config",
			      NULL};
	const char *flat[] = {t_bin("pgjobd"), "-c", cfg,
			      "--check-config=static", NULL};
	struct t_run r;

	t_run(&r, 30, NULL, deep);
	assert_int_equal(r.status, 78);
	assert_non_null(strstr(r.err, "check.yaml:4:"));
	assert_non_null(strstr(r.err, ": handlers.nosym.symbol: no symbol "
				      "\"nope\" in "));
	assert_non_null(strstr(r.err, "check.yaml:5:34: handlers.gone.library: "
				      "cannot load: "));
	assert_non_null(strstr(r.err, "/examples/none: cannot open shared "
				      "object file"));
	assert_non_null(strstr(r.err, "check.yaml:6:32: "
				      "handlers.run.command[0]: "
				      "\"no-such-program-here\": not found in "
				      "PATH"));
	assert_non_null(strstr(r.err, "check.yaml:7:28: handlers.hook.url: "));
	assert_non_null(strstr(r.err, ": handlers.abi.symbol: plugin ABI "
				      "version 99, this pgjobd takes 1 to 2 "
				      "(library "));
	assert_non_null(strstr(r.err,
			       "check.yaml:11:21: tasks.feed.command[0]: "
			       "\"/nonexistent/feed\": No such file or "
			       "directory"));
	assert_non_null(strstr(r.err,
			       "check.yaml:9:35: handlers.crash.library: "
			       "loading "));
	assert_non_null(strstr(r.err, "killed the checking process (signal "
				      "11)"));
	t_run_free(&r);
	t_run(&r, 30, NULL, flat);
	assert_int_equal(r.status, 0);
	t_run_free(&r);
	free(body);
	free(crash);
	free(plugins);
}

/* A program named without a path, found in the child's PATH, passes the
 * host check (--check-config and every reload). */
static void
test_check_config_bare_name(void **state)
{
	const char *cfg =
		t_config("bare", "dbname=x",
			 "handlers:\n"
			 "  a: { type: exec, command: [sh, -c, true] }\n"
			 "  b: { type: process, command: [cat] }\n");
	const char *deep[] = {t_bin("pgjobd"), "-c", cfg, "--check-config",
			      NULL};
	struct t_run r;

	t_run(&r, 30, NULL, deep);
	if (r.status != 0)
		fail_msg("--check-config: exit %d: %s", r.status, r.err);
	t_run_free(&r);
}

/* pgjob -c leaves the handlers unread: a handler's secret that is missing
 * does not stop `pgjob status`. */
static void
test_pgjob_without_handler_secrets(void **state)
{
	char *ci = t_db_migrated("t_creload_cli");
	const char *cfg = t_config(
		"cli", ci,
		"handlers:\n"
		"  a: { type: exec, command: [/bin/true],\n"
		"       env: { TOKEN: \"${PGJOBD_T_NOT_SET_ANYWHERE}\" } }\n"
		"  b: { type: http, url: \"https://x.example/\",\n"
		"       headers: { Authorization: \"${file:/nonexistent/t}\" "
		"} }\n");
	const char *argv[] = {t_bin("pgjob"), "-c", cfg, "status", NULL};
	const char *check[] = {t_bin("pgjobd"), "-c", cfg, "--check-config",
			       NULL};
	struct t_run r;

	t_run(&r, 30, NULL, argv);
	assert_int_equal(r.status, 0);
	t_run_free(&r);
	/* pgjobd itself needs them, and says so. */
	t_run(&r, 30, NULL, check);
	assert_int_equal(r.status, 78);
	assert_non_null(strstr(r.err, "handlers.a.env.TOKEN: environment "
				      "variable \"PGJOBD_T_NOT_SET_ANYWHERE\" "
				      "is not set"));
	assert_non_null(strstr(r.err, "handlers.b.headers.Authorization: "
				      "${file:/nonexistent/t}: cannot read"));
	t_run_free(&r);
	free(ci);
}

/* A daemon's workers load a plugin named as example.yaml names it, from
 * the plugin directory beside the build's pgjobd. */
static void
test_plugin_by_name(void **state)
{
	char *ci = t_db_migrated("t_creload_byname");
	PGconn *c = t_connect(ci);
	long long id;
	pid_t d;

	d = t_start("byname", ci,
		    "workers: 1\n"
		    "handlers:\n"
		    "  noop: { type: plugin, library: examples/pgjobd_example, "
		    "symbol: pgjobd_example }\n");
	id = t_long(c, "select pgjob.enqueue('noop', '{}')");
	t_wait_state(c, id, "done", 60);
	t_assert_job(c, id, "result->>'ok'", "true");
	assert_int_equal(t_log_count("byname", "/plugins/examples/"
					       "pgjobd_example.so"),
			 1);
	t_stop_clean(d);
	PQfinish(c);
	free(ci);
}

/* config/example.yaml names its plugin by name: from the build tree, with
 * an empty environment, it validates, plugin loaded and all. */
static void
test_example_empty_environment(void **state)
{
	const char *argv[] = {"/usr/bin/env",
			      "-i",
			      t_bin("pgjobd"),
			      "-c",
			      t_src("config/example.yaml"),
			      "--check-config",
			      NULL};
	struct t_run r;

	t_run(&r, 30, NULL, argv);
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, "example.yaml: ok"));
	t_run_free(&r);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_secret_rotates),
		cmocka_unit_test(test_reload_refused),
		cmocka_unit_test(test_reload_names_what_it_keeps),
		cmocka_unit_test(test_check_config),
		cmocka_unit_test(test_check_config_bare_name),
		cmocka_unit_test(test_pgjob_without_handler_secrets),
		cmocka_unit_test(test_plugin_by_name),
		cmocka_unit_test(test_example_empty_environment),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
