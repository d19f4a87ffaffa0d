/*
 * Unit tests for config (and the yaml reader behind it): good files and
 * what they resolve to, and bad files with the exact text and position of
 * every error.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/config.h"
#include "common/env.h"
#include "common/duration.h"
#include "common/log.h"
#include "common/size.h"
#include "db/db.h"

#define MAX_ERRORS 12

/* Loads text as "t.yaml" and fails the test if it does not validate. */
static struct config *
load_ok(const char *text)
{
	struct config_errors errs = {0};
	struct config *c =
		config_load_string("t.yaml", text, strlen(text), &errs);

	if (!c) {
		for (size_t i = 0; i < errs.n; i++)
			print_error("%s\n", errs.msg[i]);
		config_errors_free(&errs);
		fail_msg("config did not validate:\n%s", text);
	}
	assert_int_equal(errs.n, 0);
	return c;
}

/* Asserts that errs holds exactly want (NULL-terminated), in order. */
static void
assert_errors(const struct config_errors *errs, const char *const *want,
	      const char *text)
{
	size_t n = 0;

	while (want[n])
		n++;
	for (size_t i = 0; i < errs->n || i < n; i++) {
		const char *got = i < errs->n ? errs->msg[i] : "(none)";
		const char *exp = i < n ? want[i] : "(none)";

		if (strcmp(got, exp))
			fail_msg("error %zu of\n%s\n got: %s\nwant: %s", i,
				 text, got, exp);
	}
}

static const char sketch[] =
	"database:\n"
	"  conninfo: \"host=${PGJOBD_T_HOSTS} dbname=app "
	"target_session_attrs=read-write connect_timeout=5\"\n"
	"workers: 4\n"
	"max_slots: 64\n"
	"lease: 30s\n"
	"shutdown_timeout: 60s\n"
	"retention: 7d\n"
	"log: { level: info, format: text }\n"
	"metrics: { listen: \"127.0.0.1:9188\" }\n"
	"defaults: { timeout: 5m, max_attempts: 20, backoff: { base: 30s, "
	"max: 30m } }\n"
	"queues:\n"
	"  default: { concurrency: 8 }\n"
	"  billing: { concurrency: 1, mode: serial }\n"
	"  tenants: { concurrency: 4, mode: per_key }\n"
	"handlers:\n"
	"  send_email: { type: exec, command: [\"/usr/local/bin/send-email\"], "
	"timeout: 30s }\n"
	"  charge:     { type: sql, statement: \"select billing.charge($1, "
	"$2)\", queue: billing }\n"
	"  notify:     { type: http, url: \"https://partner.example/hook\", "
	"timeout: 10s }\n"
	"  thumbnail:  { type: plugin, library: "
	"\"/usr/lib/pgjobd/thumbnail.so\", symbol: \"thumbnail_run\" }\n"
	"schedules:\n"
	"  nightly-billing: { cron: \"0 3 * * *\", kind: charge, payload: {} "
	"}\n"
	"tasks:\n"
	"  feed-consumer: { command: [\"/usr/local/bin/consume-feed\"], "
	"partitions: 8 }\n";

/* A configuration with every section, the hosts from the env. */
static void
test_design_sketch(void **state)
{
	struct config *c;
	const struct handler_conf *h;
	const struct queue_conf *q;

	setenv("PGJOBD_T_HOSTS", "db1,db2", 1);
	c = load_ok(sketch);
	assert_string_equal(c->path, "t.yaml");
	assert_string_equal(
		c->conninfo,
		"host=db1,db2 dbname=app "
		"target_session_attrs=read-write connect_timeout=5");
	assert_int_equal(c->workers, 4);
	assert_int_equal(c->max_slots, 64);
	assert_int_equal(c->lease_ms, 30000);
	assert_int_equal(c->shutdown_timeout_ms, 60000);
	assert_int_equal(c->retention_ms, 7 * 86400 * 1000LL);
	assert_int_equal(c->log_level, LOG_INFO);
	assert_int_equal(c->log_format, LOG_FORMAT_TEXT);
	assert_string_equal(c->metrics_listen, "127.0.0.1:9188");
	assert_int_equal(c->nqueues, 3);
	q = config_queue(c, "billing");
	assert_non_null(q);
	assert_int_equal(q->concurrency, 1);
	assert_int_equal(q->mode, QUEUE_SERIAL);
	assert_int_equal(q->line, 13);
	assert_int_equal(q->column, 3);
	assert_int_equal(config_queue(c, "tenants")->mode, QUEUE_PER_KEY);
	assert_int_equal(config_queue(c, "default")->mode, QUEUE_PARALLEL);
	assert_int_equal(c->nhandlers, 4);

	h = config_handler(c, "send_email");
	assert_int_equal(h->type, HANDLER_EXEC);
	assert_int_equal(h->command.n, 1);
	assert_string_equal(h->command.v[0], "/usr/local/bin/send-email");
	assert_null(h->command.v[1]);
	assert_string_equal(h->queue, "default");
	assert_int_equal(h->timeout_ms, 30000);
	assert_int_equal(h->max_attempts, 20);
	assert_int_equal(h->backoff.base_ms, 30000);
	assert_int_equal(h->backoff.max_ms, 30 * 60000);
	assert_int_equal(h->line, 16);

	h = config_handler(c, "charge");
	assert_int_equal(h->type, HANDLER_SQL);
	assert_string_equal(h->statement, "select billing.charge($1, $2)");
	assert_string_equal(h->queue, "billing");
	assert_int_equal(h->timeout_ms, 5 * 60000);

	h = config_handler(c, "notify");
	assert_int_equal(h->type, HANDLER_HTTP);
	assert_string_equal(h->url, "https://partner.example/hook");
	assert_true(h->tls_verify);
	assert_int_equal(h->headers.n, 0);

	h = config_handler(c, "thumbnail");
	assert_int_equal(h->type, HANDLER_PLUGIN);
	assert_string_equal(h->library, "/usr/lib/pgjobd/thumbnail.so");
	assert_string_equal(h->symbol, "thumbnail_run");
	assert_string_equal(h->plugin_config, "{}");
	/* 5m from the defaults, lowered to the lease less its fifth. */
	assert_int_equal(h->timeout_ms, 24000);

	assert_int_equal(c->nschedules, 1);
	assert_string_equal(c->schedules[0].name, "nightly-billing");
	assert_string_equal(c->schedules[0].cron, "0 3 * * *");
	assert_string_equal(c->schedules[0].kind, "charge");
	assert_string_equal(c->schedules[0].payload, "{}");
	assert_null(c->schedules[0].queue);
	assert_null(c->schedules[0].timezone);
	assert_false(c->schedules[0].catch_up_all);

	assert_int_equal(c->ntasks, 1);
	assert_string_equal(c->tasks[0].name, "feed-consumer");
	assert_string_equal(c->tasks[0].command.v[0],
			    "/usr/local/bin/consume-feed");
	assert_int_equal(c->tasks[0].partitions, 8);
	assert_null(config_handler(c, "nope"));
	assert_null(config_queue(c, "nope"));
	config_free(c);
}

/* An empty file is valid: every default, and the default queue. */
static void
test_defaults(void **state)
{
	const char *texts[] = {"", "# nothing\n", "{}\n", "---\n", "~\n"};

	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		struct config *c = load_ok(texts[i]);

		assert_null(c->conninfo);
		assert_int_equal(c->workers, 2);
		assert_int_equal(c->max_slots, 64);
		assert_int_equal(c->lock_class, CONFIG_DEFAULT_LOCK_CLASS);
		assert_int_equal(c->lease_ms, 30000);
		assert_int_equal(c->shutdown_timeout_ms, 60000);
		assert_int_equal(c->retention_ms, 7 * 86400000LL);
		assert_int_equal(c->poll_interval_ms, 1000);
		assert_int_equal(c->max_payload_bytes, 1048576);
		assert_int_equal(c->health_interval_ms, 10000);
		assert_int_equal(c->health_xmin_warn_ms, 300000);
		assert_int_equal(c->log_level, LOG_INFO);
		assert_int_equal(c->log_format, LOG_FORMAT_TEXT);
		assert_null(c->metrics_listen);
		assert_null(c->tracing_endpoint);
		assert_string_equal(c->tracing_service, "pgjobd");
		assert_int_equal(c->tracing_buffer, 2048);
		assert_int_equal(c->default_timeout_ms, 300000);
		assert_int_equal(c->default_max_attempts, 20);
		assert_int_equal(c->default_backoff.base_ms, 30000);
		assert_int_equal(c->default_backoff.max_ms, 1800000);
		assert_int_equal(c->nqueues, 1);
		assert_string_equal(c->queues[0].name, "default");
		assert_int_equal(c->queues[0].concurrency, 8);
		assert_int_equal(c->queues[0].mode, QUEUE_PARALLEL);
		assert_int_equal(c->nhandlers + c->nschedules + c->ntasks, 0);
		config_free(c);
	}
}

/* Handler settings come from the handler, else its queue, else defaults. */
static void
test_inheritance(void **state)
{
	struct config *c = load_ok(
		"defaults:\n"
		"  timeout: 1m\n"
		"  max_attempts: 5\n"
		"  backoff: { base: 10s, max: 1h }\n"
		"handlers:\n"
		"  a: { type: sql, statement: x, queue: slow }\n"
		"  b: { type: sql, statement: x, queue: slow, timeout: 3m,\n"
		"       max_attempts: 2, backoff: { max: 2h } }\n"
		"  c: { type: sql, statement: x }\n"
		"  d: { type: sql, statement: x, queue: default }\n"
		"queues:\n"
		"  slow: { timeout: 2m, max_attempts: 7, backoff: { base: 20s "
		"} }\n");
	const struct handler_conf *a = config_handler(c, "a");
	const struct handler_conf *b = config_handler(c, "b");
	const struct handler_conf *h = config_handler(c, "c");
	const struct queue_conf *q = config_queue(c, "slow");

	assert_int_equal(a->timeout_ms, 120000);
	assert_int_equal(a->max_attempts, 7);
	assert_int_equal(a->backoff.base_ms, 20000);
	assert_int_equal(a->backoff.max_ms, 3600000);
	assert_int_equal(b->timeout_ms, 180000);
	assert_int_equal(b->max_attempts, 2);
	assert_int_equal(b->backoff.base_ms, 20000);
	assert_int_equal(b->backoff.max_ms, 7200000);
	assert_string_equal(h->queue, "default");
	assert_int_equal(h->timeout_ms, 60000);
	assert_int_equal(h->max_attempts, 5);
	assert_int_equal(h->backoff.base_ms, 10000);
	assert_int_equal(h->backoff.max_ms, 3600000);
	assert_int_equal(config_handler(c, "d")->timeout_ms, 60000);
	/* A queue keeps "unset" for what it does not set. */
	assert_int_equal(q->timeout_ms, 120000);
	assert_int_equal(q->backoff.max_ms, -1);
	assert_int_equal(config_queue(c, "default")->timeout_ms, -1);
	assert_int_equal(config_queue(c, "default")->max_attempts, 0);
	assert_int_equal(c->nqueues, 2);
	config_free(c);
}

/* Every handler type's own keys, schedules' and tasks' optional keys. */
static void
test_handler_keys(void **state)
{
	struct config *c;
	const struct handler_conf *h;

	setenv("PGJOBD_T_TOKEN", "s3cret", 1);
	setenv("PGJOBD_T_NUM", "7", 1);
	c = load_ok(
		"log: { level: debug, format: json }\n"
		"lock_class: -5\n"
		"poll_interval: 250ms\n"
		"max_payload_bytes: 65536\n"
		"health: { interval: 2s, xmin_warn: 90s }\n"
		"handlers:\n"
		"  run:\n"
		"    type: exec\n"
		"    command: [sh, -c, 'echo \"$$1\" $1', 5]\n"
		"    env: { LANG: C.UTF-8, TOKEN: \"${PGJOBD_T_TOKEN}\" }\n"
		"  run2:\n"
		"    type: exec\n"
		"    command: [/bin/true]\n"
		"    env: [\"PATH=/opt/x/bin:/usr/bin\", EMPTY=]\n"
		"  hook:\n"
		"    type: http\n"
		"    url: http://localhost:8080/x\n"
		"    headers: { Authorization: \"Bearer ${PGJOBD_T_TOKEN}\" }\n"
		"    tls_verify: no\n"
		"  plug:\n"
		"    type: plugin\n"
		"    library: p.so\n"
		"    symbol: \"5\"\n"
		"    config:\n"
		"      n: ${PGJOBD_T_NUM}\n"
		"      s: \"${PGJOBD_T_NUM}\"\n"
		"schedules:\n"
		"  tick:\n"
		"    cron: \"*/5 * * * *\"\n"
		"    kind: plug\n"
		"    queue: default\n"
		"    timezone: Europe/Paris\n"
		"    catch_up: all\n"
		"    payload: { a: [1, { b: x }] }\n");
	assert_int_equal(c->log_level, LOG_DEBUG);
	assert_int_equal(c->log_format, LOG_FORMAT_JSON);
	assert_int_equal(c->lock_class, -5);
	assert_int_equal(c->poll_interval_ms, 250);
	assert_int_equal(c->max_payload_bytes, 65536);
	assert_int_equal(c->health_interval_ms, 2000);
	assert_int_equal(c->health_xmin_warn_ms, 90000);
	h = config_handler(c, "run");
	assert_int_equal(h->command.n, 4);
	assert_string_equal(h->command.v[0], "sh");
	assert_string_equal(h->command.v[2], "echo \"$1\" $1");
	assert_string_equal(h->command.v[3], "5");
	assert_int_equal(h->env.n, 2);
	assert_string_equal(h->env.v[0], "LANG=C.UTF-8");
	assert_string_equal(h->env.v[1], "TOKEN=s3cret");
	assert_null(h->env.v[2]);
	h = config_handler(c, "run2");
	assert_int_equal(h->env.n, 2);
	assert_string_equal(h->env.v[0], "PATH=/opt/x/bin:/usr/bin");
	assert_string_equal(h->env.v[1], "EMPTY=");
	h = config_handler(c, "hook");
	assert_string_equal(h->headers.v[0], "Authorization: Bearer s3cret");
	assert_false(h->tls_verify);
	h = config_handler(c, "plug");
	assert_string_equal(h->symbol, "5");
	assert_string_equal(h->plugin_config, "{\"n\":7,\"s\":\"7\"}");
	assert_string_equal(c->schedules[0].queue, "default");
	assert_string_equal(c->schedules[0].timezone, "Europe/Paris");
	assert_true(c->schedules[0].catch_up_all);
	assert_string_equal(c->schedules[0].payload,
			    "{\"a\":[1,{\"b\":\"x\"}]}");
	config_free(c);
}

/* YAML maps become JSON: plain scalars are typed, quoted ones strings. */
static void
test_json(void **state)
{
	struct config *c =
		load_ok("handlers:\n"
			"  p:\n"
			"    type: plugin\n"
			"    library: p.so\n"
			"    symbol: s\n"
			"    config:\n"
			"      big: 12345678901234567890\n"
			"      neg: -3\n"
			"      f: 1.5e3\n"
			"      t: true\n"
			"      F: False\n"
			"      yes: no\n"
			"      q: \"42\"\n"
			"      sq: 'true'\n"
			"      nul: ~\n"
			"      empty:\n"
			"      estr: \"\"\n"
			"      oct: 007\n"
			"      hex: 0x1F\n"
			"      text: a \"quoted\" \\ word\n"
			"      utf8: héllo\n"
			"      list: [1, \"a\", false, null, [], {}]\n"
			"      nested: { a: { b: c } }\n"
			"      block: |\n"
			"        line 1\n"
			"        line 2\n");

	assert_string_equal(
		config_handler(c, "p")->plugin_config,
		"{\"big\":12345678901234567890,\"neg\":-3,\"f\":1.5e3,"
		"\"t\":true,\"F\":false,\"yes\":\"no\",\"q\":\"42\","
		"\"sq\":\"true\",\"nul\":null,\"empty\":null,\"estr\":\"\","
		"\"oct\":\"007\",\"hex\":\"0x1F\","
		"\"text\":\"a \\\"quoted\\\" \\\\ word\",\"utf8\":\"héllo\","
		"\"list\":[1,\"a\",false,null,[],{}],"
		"\"nested\":{\"a\":{\"b\":\"c\"}},"
		"\"block\":\"line 1\\nline 2\\n\"}");
	config_free(c);
}

struct bad {
	const char *text;
	const char *want[MAX_ERRORS];
};

#define HINT "(use 500ms, 30s, 5m, 2h, 7d)"

static const struct bad bad_configs[] = {
	/* tracing: (docs/tracing.md). */
	{"tracing: {otlp_endpoint: \"127.0.0.1:4318\"}\n",
	 {"t.yaml:1:26: tracing.otlp_endpoint: not an http:// or https:// "
	  "URL"}},
	{"tracing: {buffer: 0}\n",
	 {"t.yaml:1:19: tracing.buffer: must be at least 1"}},
	/* Unknown keys, at the top and deeper. */
	{"foo: 1\n", {"t.yaml:1:1: foo: unknown key \"foo\""}},
	{"handlers:\n  x:\n    type: exec\n    command: [/bin/true]\n"
	 "    timout: 5s\n",
	 {"t.yaml:5:5: handlers.x.timout: unknown key \"timout\""}},
	{"log: {level: info, colour: true}\n",
	 {"t.yaml:1:20: log.colour: unknown key \"colour\""}},
	/* Wrong types. */
	{"log: text\n", {"t.yaml:1:6: log: expected a map"}},
	{"handlers: [a, b]\n", {"t.yaml:1:11: handlers: expected a map"}},
	{"handlers:\n  x: {type: exec, command: /bin/true}\n",
	 {"t.yaml:2:28: handlers.x.command: expected a list of strings"}},
	{"tasks:\n  t: {command: [/bin/x, [a]]}\n",
	 {"t.yaml:2:25: tasks.t.command[1]: expected a string"}},
	{"workers: two\n", {"t.yaml:1:10: workers: expected an integer"}},
	{"workers: \"4\"\n", {"t.yaml:1:10: workers: expected an integer"}},
	{"workers: 1.5\n", {"t.yaml:1:10: workers: expected an integer"}},
	{"workers:\n", {"t.yaml:1:9: workers: expected an integer"}},
	{"handlers:\n  h:\n    type: http\n    url: https://x.example/\n"
	 "    tls_verify: maybe\n",
	 {"t.yaml:5:17: handlers.h.tls_verify: expected true or false"}},
	{"handlers:\n  h: {type: http, url: http://x/, tls_verify: \"true\"}\n",
	 {"t.yaml:2:47: handlers.h.tls_verify: expected true or false"}},
	{"database:\n  conninfo: [a, b]\n",
	 {"t.yaml:2:13: database.conninfo: expected a string"}},
	{"database: {conninfo: ~}\n",
	 {"t.yaml:1:22: database.conninfo: expected a string"}},
	{"? [a]\n: 1\n", {"t.yaml:1:3: keys must be strings"}},
	{"- workers: 2\n", {"t.yaml:1:1: expected a map of settings"}},
	/* Durations. */
	{"queues: {}\nhandlers:\n send_email:\n  timeout: 5x\n  type: exec\n"
	 "  command: [/usr/bin/send-email]\n",
	 {"t.yaml:4:12: handlers.send_email.timeout: bad duration "
	  "\"5x\" " HINT}},
	{"lease: -1s\n", {"t.yaml:1:8: lease: bad duration \"-1s\" " HINT}},
	{"lease: \"\"\n", {"t.yaml:1:8: lease: bad duration \"\" " HINT}},
	{"lease: {a: 1}\n", {"t.yaml:1:8: lease: expected a duration " HINT}},
	{"lease: 500ms\n", {"t.yaml:1:8: lease: must be at least 1s"}},
	{"poll_interval: 0\n",
	 {"t.yaml:1:16: poll_interval: must be at least 10ms"}},
	{"health: { interval: 500ms, xmin_warn: 5y }\n",
	 {"t.yaml:1:21: health.interval: must be at least 1s",
	  "t.yaml:1:39: health.xmin_warn: bad duration \"5y\" " HINT}},
	{"health: { interval: [1] }\n",
	 {"t.yaml:1:21: health.interval: expected a duration " HINT}},
	{"health: { xmin_wrn: 5m }\n",
	 {"t.yaml:1:11: health.xmin_wrn: unknown key \"xmin_wrn\""}},
	{"retention: 999999999999999999d\n",
	 {"t.yaml:1:12: retention: bad duration \"999999999999999999d\" (too "
	  "large)"}},
	/* Handlers. */
	{"handlers:\n  x:\n    type: exec\n",
	 {"t.yaml:2:3: handlers.x: missing required key \"command\""}},
	{"handlers:\n  x:\n    command: [/bin/true]\n",
	 {"t.yaml:2:3: handlers.x: missing required key \"type\""}},
	{"handlers:\n  x:\n",
	 {"t.yaml:2:3: handlers.x: missing required key "
	  "\"type\""}},
	{"handlers:\n  x: {type: ftp}\n",
	 {"t.yaml:2:13: handlers.x.type: unknown handler type \"ftp\" (use "
	  "exec, sql, http, plugin or process)"}},
	{"handlers:\n  x: {type: sql, statement: \"select 1\", queue: "
	 "billing}\n",
	 {"t.yaml:2:48: handlers.x.queue: unknown queue \"billing\""}},
	{"handlers:\n  x: {type: sql, statement: x, command: [/bin/true]}\n",
	 {"t.yaml:2:32: handlers.x.command: command is only for exec or "
	  "process handlers"}},
	{"handlers:\n  x: {type: exec, command: [/bin/true], url: http://x/, "
	 "config: {}}\n",
	 {"t.yaml:2:41: handlers.x.url: url is only for http handlers",
	  "t.yaml:2:57: handlers.x.config: config is only for plugin "
	  "handlers"}},
	/* process handlers: their own keys, checked as any. */
	{"handlers:\n  p: {type: process, command: [/bin/cat], copies: 0,"
	 " concurrency: x}\n"
	 "  e: {type: exec, command: [/bin/true], max_jobs: 3}\n"
	 "  f: {type: process}\n",
	 {"t.yaml:2:51: handlers.p.copies: must be at least 1",
	  "t.yaml:2:67: handlers.p.concurrency: expected an integer",
	  "t.yaml:3:41: handlers.e.max_jobs: max_jobs is only for process "
	  "handlers",
	  "t.yaml:4:3: handlers.f: missing required key \"command\""}},
	{"handlers:\n  p: {type: plugin, library: p.so}\n",
	 {"t.yaml:2:3: handlers.p: missing required key \"symbol\""}},
	{"handlers:\n  h: {type: http, url: ftp://x}\n",
	 {"t.yaml:2:24: handlers.h.url: must start with http:// or https://"}},
	{"handlers:\n  s: {type: sql, statement: \"\"}\n",
	 {"t.yaml:2:29: handlers.s.statement: must not be empty"}},
	{"handlers:\n  x: {type: exec, command: [bin/x]}\n",
	 {"t.yaml:2:29: handlers.x.command[0]: relative path \"bin/x\": use an "
	  "absolute path or a bare program name"}},
	{"handlers:\n  x: {type: exec, command: []}\n",
	 {"t.yaml:2:28: handlers.x.command: must not be empty"}},
	{"handlers:\n  x:\n    type: exec\n    command: [/bin/true]\n"
	 "    env: {1BAD: x, OK: [y]}\n",
	 {"t.yaml:5:11: handlers.x.env.1BAD: bad variable name \"1BAD\"",
	  "t.yaml:5:24: handlers.x.env.OK: expected a string"}},
	{"handlers:\n  x: {type: exec, command: [/bin/true], env: [A=1, B]}\n",
	 {"t.yaml:2:52: handlers.x.env[1]: expected \"NAME=value\""}},
	{"handlers:\n  x: {type: exec, command: [/bin/true], env: A=1}\n",
	 {"t.yaml:2:46: handlers.x.env: expected a map"}},
	{"handlers:\n  h: {type: http, url: http://x/, headers: {\"A B\": "
	 "c}}\n",
	 {"t.yaml:2:45: handlers.h.headers.A B: bad header name \"A B\""}},
	{"handlers:\n  p: {type: plugin, library: p.so, symbol: s, config: "
	 "[1]}\n",
	 {"t.yaml:2:55: handlers.p.config: expected a map"}},
	{"handlers:\n  p: {type: plugin, library: p.so, symbol: s, config: "
	 "{a: 1, a: 2}}\n",
	 {"t.yaml:2:62: handlers.p.config.a: duplicate key \"a\""}},
	/* Duplicate keys, at the second one. */
	{"workers: 2\nworkers: 3\n",
	 {"t.yaml:2:1: workers: duplicate key \"workers\""}},
	{"handlers:\n  a: {type: sql, statement: x}\n"
	 "  a: {type: sql, statement: y}\n",
	 {"t.yaml:3:3: handlers.a: duplicate key \"a\""}},
	/* The environment. */
	{"database:\n  conninfo: \"host=${PGJOBD_T_UNSET}\"\n",
	 {"t.yaml:2:13: database.conninfo: environment variable "
	  "\"PGJOBD_T_UNSET\" is not set"}},
	{"database: {conninfo: \"x ${PGJOBD_T_HOSTS\"}\n",
	 {"t.yaml:1:22: database.conninfo: bad variable reference "
	  "\"${PGJOBD_T_HOSTS\" (use ${NAME}, ${file:PATH}, "
	  "${credential:NAME}, or $$ for a literal $)"}},
	{"workers: ${PGJOBD_T_UNSET}\n",
	 {"t.yaml:1:10: workers: environment variable \"PGJOBD_T_UNSET\" is "
	  "not set"}},
	{"database: {conninfo: \"a\\0b\"}\n",
	 {"t.yaml:1:22: database.conninfo: contains a NUL character"}},
	/* Queues. */
	{"queues:\n  q: {mode: random}\n",
	 {"t.yaml:2:13: queues.q.mode: unknown queue mode \"random\" (use "
	  "parallel, serial or per_key)"}},
	{"queues:\n  q: {concurrency: 0}\n",
	 {"t.yaml:2:20: queues.q.concurrency: must be at least 1"}},
	{"queues: {\"\": {}}\n",
	 {"t.yaml:1:10: queues: names must not be empty"}},
	/* Schedules and tasks. */
	{"schedules:\n  nightly: {cron: \"0 3 * * *\", kind: charge}\n",
	 {"t.yaml:2:38: schedules.nightly.kind: no handler for kind "
	  "\"charge\""}},
	{"handlers:\n  h: {type: sql, statement: x}\nschedules:\n"
	 "  s: {cron: \"* * * * *\", kind: h, catch_up: some, queue: q, "
	 "payload: [1]}\n",
	 {"t.yaml:4:45: schedules.s.catch_up: unknown catch_up \"some\" (use "
	  "latest or all)",
	  "t.yaml:4:58: schedules.s.queue: unknown queue \"q\"",
	  "t.yaml:4:70: schedules.s.payload: expected a map"}},
	{"schedules:\n  s: {kind: k}\n",
	 {"t.yaml:2:3: schedules.s: missing required key \"cron\"",
	  "t.yaml:2:13: schedules.s.kind: no handler for kind \"k\""}},
	{"tasks:\n  t: {command: []}\n",
	 {"t.yaml:2:16: tasks.t.command: must not be empty"}},
	{"tasks:\n  t: {partitions: 2}\n",
	 {"t.yaml:2:3: tasks.t: missing required key \"command\""}},
	/* Integers out of range. */
	{"workers: 0\n", {"t.yaml:1:10: workers: must be at least 1"}},
	{"workers: -3\n", {"t.yaml:1:10: workers: must be at least 1"}},
	{"workers: 99999999999999999999\n",
	 {"t.yaml:1:10: workers: must be at most 2147483647"}},
	{"max_slots: 0\n", {"t.yaml:1:12: max_slots: must be at least 1"}},
	{"max_slots: 100001\n",
	 {"t.yaml:1:12: max_slots: must be at most 100000"}},
	{"lock_class: 99999999999\n",
	 {"t.yaml:1:13: lock_class: must be at most 2147483647"}},
	{"lock_class: -2147483649\n",
	 {"t.yaml:1:13: lock_class: must be at least -2147483648"}},
	{"max_payload_bytes: 0\n",
	 {"t.yaml:1:20: max_payload_bytes: must be at least 1"}},
	{"max_payload_bytes: 1073741825\n",
	 {"t.yaml:1:20: max_payload_bytes: must be at most 1073741824"}},
	{"defaults: {max_attempts: 0}\n",
	 {"t.yaml:1:26: defaults.max_attempts: must be at least 1"}},
	{"max_slots: 4\nworkers: 5\n",
	 {"t.yaml:2:10: workers: must not be more than max_slots (4)"}},
	/* Other values. */
	{"log: {level: loud}\n",
	 {"t.yaml:1:14: log.level: unknown log level \"loud\" (use debug, "
	  "info, warn or error)"}},
	{"database: {conninfo: \"host=x password=a b\"}\n",
	 {"t.yaml:1:22: database.conninfo: not a valid libpq connection "
	  "string (keyword=value pairs or a postgresql:// URI)"}},
	{"metrics: {listen: 9188}\n",
	 {"t.yaml:1:19: metrics.listen: expected \"host:port\", e.g. "
	  "\"127.0.0.1:9188\", \"[::1]:9188\" or \":9188\""}},
	{"metrics: {listen: \"::1:9188\"}\n",
	 {"t.yaml:1:19: metrics.listen: expected \"host:port\", e.g. "
	  "\"127.0.0.1:9188\", \"[::1]:9188\" or \":9188\""}},
	{"metrics: {listen: \"localhost:99999\"}\n",
	 {"t.yaml:1:19: metrics.listen: port must be 1 to 65535"}},
	/* YAML syntax. */
	{"a: b: c\n",
	 {"t.yaml:1:5: syntax: mapping values are not allowed in this "
	  "context"}},
	{"workers: 2\n\tlease: 1s\n",
	 {"t.yaml:2:1: syntax: found a tab character that violates "
	  "indentation"}},
	{"workers: [1, 2\n",
	 {"t.yaml:2:1: syntax: did not find expected ',' or ']'"}},
	{"workers: 2\nlog: \"caf\xe9\"\n",
	 {"t.yaml:2:11: syntax: invalid trailing UTF-8 octet"}},
	{"workers: *nope\n", {"t.yaml:1:10: syntax: found undefined alias"}},
	{"workers: 2\n---\nworkers: 3\n",
	 {"t.yaml:2:1: syntax: only one document is allowed"}},
	/* Several errors: all of them, in document order. */
	{"workers: 0\n"
	 "log: {level: loud, format: xml}\n"
	 "handlers:\n"
	 "  a: {type: exec}\n"
	 "  b: {type: exec, command: [bin/x], timeout: -1s}\n"
	 "queues:\n"
	 "  q: {concurrency: 0}\n",
	 {"t.yaml:1:10: workers: must be at least 1",
	  "t.yaml:2:14: log.level: unknown log level \"loud\" (use debug, "
	  "info, warn or error)",
	  "t.yaml:2:28: log.format: unknown log format \"xml\" (use text or "
	  "json)",
	  "t.yaml:4:3: handlers.a: missing required key \"command\"",
	  "t.yaml:5:29: handlers.b.command[0]: relative path \"bin/x\": use an "
	  "absolute path or a bare program name",
	  "t.yaml:5:46: handlers.b.timeout: bad duration \"-1s\" " HINT,
	  "t.yaml:7:20: queues.q.concurrency: must be at least 1"}},
	/* Schedules: the cron expression and the time zone, by cron.c. */
	{"handlers:\n  h: {type: sql, statement: x}\nschedules:\n"
	 "  s: {cron: \"61 * * * *\", kind: h}\n",
	 {"t.yaml:4:13: schedules.s.cron: minute: 61 is out of range 0-59"}},
	{"handlers:\n  h: {type: sql, statement: x}\nschedules:\n"
	 "  s: {cron: \"0 3 * *\", kind: h}\n",
	 {"t.yaml:4:13: schedules.s.cron: expected 5 fields, got 4"}},
	{"handlers:\n  h: {type: sql, statement: x}\nschedules:\n"
	 "  s: {cron: \"0 3 * * * *\", kind: h}\n",
	 {"t.yaml:4:13: schedules.s.cron: expected 5 fields, got 6"}},
	{"handlers:\n  h: {type: sql, statement: x}\nschedules:\n"
	 "  s: {cron: \"0 0 * foo *\", kind: h}\n",
	 {"t.yaml:4:13: schedules.s.cron: month: \"foo\" is not a number or a "
	  "month name"}},
	{"handlers:\n  h: {type: sql, statement: x}\nschedules:\n"
	 "  s: {cron: \"*/0 * * * *\", kind: h}\n",
	 {"t.yaml:4:13: schedules.s.cron: minute: step 0 is out of range "
	  "1-59"}},
	{"handlers:\n  h: {type: sql, statement: x}\nschedules:\n"
	 "  s: {cron: \"30-10 * * * *\", kind: h}\n",
	 {"t.yaml:4:13: schedules.s.cron: minute: range 30-10 ends before it "
	  "starts"}},
	{"handlers:\n  h: {type: sql, statement: x}\nschedules:\n"
	 "  s: {cron: \"@reboot\", kind: h}\n",
	 {"t.yaml:4:13: schedules.s.cron: unknown shortcut \"@reboot\" (use "
	  "@yearly, @annually, @monthly, @weekly, @daily, @midnight or "
	  "@hourly)"}},
	{"handlers:\n  h: {type: sql, statement: x}\nschedules:\n"
	 "  s: {cron: \"0 3 * * *\", kind: h, timezone: Mars/Olympus}\n",
	 {"t.yaml:4:45: schedules.s.timezone: unknown time zone "
	  "\"Mars/Olympus\""}},
	{"handlers:\n  h: {type: sql, statement: x}\nschedules:\n"
	 "  s: {cron: \"0 3 * * *\", kind: h, timezone: ../../etc/passwd}\n",
	 {"t.yaml:4:45: schedules.s.timezone: unknown time zone "
	  "\"../../etc/passwd\""}},
	{"handlers:\n  h: {type: sql, statement: x}\nschedules:\n"
	 "  s: {cron: \"0 3 * * *\", kind: h, timezone: \"\"}\n",
	 {"t.yaml:4:45: schedules.s.timezone: must not be empty"}},
	{"handlers:\n  h: {type: sql, statement: x}\nschedules:\n"
	 "  s: {cron: \"\", kind: h}\n",
	 {"t.yaml:4:13: schedules.s.cron: must not be empty"}},
	{"handlers:\n  h: {type: sql, statement: x}\nschedules:\n"
	 "  s: {cron: [0, 3], kind: h}\n",
	 {"t.yaml:4:13: schedules.s.cron: expected a string"}},
	{"handlers:\n  h: {type: sql, statement: x}\nschedules:\n"
	 "  s: {cron: \"0 0 30 2 *\", kind: h}\n",
	 {"t.yaml:4:13: schedules.s.cron: day-of-month: no such day in the "
	  "months given"}},
	/* A plugin blocks its worker: its own timeout must end before the
	 * lease's deadline, lease - lease/5. */
	{"lease: 30s\nhandlers:\n"
	 "  p: {type: plugin, library: x.so, symbol: s, timeout: 25s}\n",
	 {"t.yaml:3:56: handlers.p.timeout: 25s is longer than a plugin may "
	  "block its worker: at most 24s (the lease, 30s, less a fifth)"}},
	{"lease: 2s\nhandlers:\n  p:\n    type: plugin\n    library: x.so\n"
	 "    symbol: s\n    timeout: 1601ms\n",
	 {"t.yaml:7:14: handlers.p.timeout: 1601ms is longer than a plugin "
	  "may block its worker: at most 1600ms (the lease, 2s, less a "
	  "fifth)"}},
	/* user: and group: of exec handlers and tasks must exist. */
	{"handlers:\n  x: {type: exec, command: [/bin/true],"
	 " user: no-such-user-pgjobd}\n",
	 {"t.yaml:2:47: handlers.x.user: unknown user "
	  "\"no-such-user-pgjobd\""}},
	{"tasks:\n  t:\n    command: [/bin/true]\n    user: nobody\n"
	 "    group: no-such-group-pgjobd\n",
	 {"t.yaml:5:12: tasks.t.group: unknown group "
	  "\"no-such-group-pgjobd\""}},
	{"handlers:\n  x: {type: sql, statement: x, user: nobody}\n",
	 {"t.yaml:2:32: handlers.x.user: user is only for exec or process "
	  "handlers"}},
	{"handlers:\n  x: {type: exec, command: [/bin/true], group: ~}\n",
	 {"t.yaml:2:48: handlers.x.group: expected a string"}},
	/* Flow control: each limit alone, then together. */
	{"queues:\n  q: {rate: 10/x}\n",
	 {"t.yaml:2:13: queues.q.rate: rate \"10/x\": unknown unit (ms, s, "
	  "min, h, d)"}},
	{"queues:\n  q: {rate: ten/s, rate_per_key: 0/s}\n",
	 {"t.yaml:2:13: queues.q.rate: rate \"ten/s\": not COUNT/PERIOD "
	  "(10/s, 600/min, 100/10s)",
	  "t.yaml:2:34: queues.q.rate_per_key: rate \"0/s\": the count must "
	  "be at least 1"}},
	{"queues:\n  q: {global_concurrency: -1, per_key_concurrency: 0}\n",
	 {"t.yaml:2:27: queues.q.global_concurrency: must be at least 1",
	  "t.yaml:2:52: queues.q.per_key_concurrency: must be at least 1"}},
	{"queues:\n  q: {burst: 5, burst_per_key: 2}\n",
	 {"t.yaml:2:14: queues.q.burst: a burst needs a rate (rate: 10/s)",
	  "t.yaml:2:32: queues.q.burst_per_key: burst_per_key needs a "
	  "rate_per_key"}},
	{"queues:\n  q: {mode: serial, fair: true, per_key_concurrency: 2}\n",
	 {"t.yaml:2:27: queues.q.fair: a serial queue runs one job at a time, "
	  "in order: keys cannot take turns in it (use mode: parallel or "
	  "per_key)",
	  "t.yaml:2:54: queues.q.per_key_concurrency: a serial queue runs one "
	  "job at a time, in order: keys cannot take turns in it (use mode: "
	  "parallel or per_key)"}},
	{"queues:\n  q: {rate: 1/99999999999999999d}\n",
	 {"t.yaml:2:13: queues.q.rate: rate \"1/99999999999999999d\": not "
	  "COUNT/PERIOD (10/s, 600/min, 100/10s)"}},
	/* An exec handler's limits: each value, unknown keys, other types. */
	{"handlers:\n  x:\n    type: exec\n    command: [/bin/true]\n"
	 "    limits:\n      cpu: 1500ms\n      memory: 512MB\n"
	 "      open_files: 0\n      processes: -2\n      file_size: 0\n"
	 "      wall: 5s\n",
	 {"t.yaml:6:12: handlers.x.limits.cpu: CPU time is limited in whole "
	  "seconds (RLIMIT_CPU): 1s, 90s, 5m",
	  "t.yaml:7:15: handlers.x.limits.memory: size \"512MB\": unknown "
	  "unit (use B, KiB, MiB, GiB or TiB)",
	  "t.yaml:8:19: handlers.x.limits.open_files: must be at least 1",
	  "t.yaml:9:18: handlers.x.limits.processes: must be at least 1",
	  "t.yaml:10:18: handlers.x.limits.file_size: must be at least 1 byte "
	  "(leave it out for no limit)",
	  "t.yaml:11:7: handlers.x.limits.wall: unknown key \"wall\""}},
	{"handlers:\n  x: {type: exec, command: [/bin/true],"
	 " limits: {cpu: 0s, memory: -1GiB, file_size: 2PiB}}\n",
	 {"t.yaml:2:55: handlers.x.limits.cpu: must be at least 1s",
	  "t.yaml:2:67: handlers.x.limits.memory: size \"-1GiB\": negative",
	  "t.yaml:2:85: handlers.x.limits.file_size: size \"2PiB\": unknown "
	  "unit (use B, KiB, MiB, GiB or TiB)"}},
	{"handlers:\n  x: {type: exec, command: [/bin/true],"
	 " limits: {memory: 99999999TiB, cpu: [1s]}}\n",
	 {"t.yaml:2:58: handlers.x.limits.memory: size \"99999999TiB\": too "
	  "large",
	  "t.yaml:2:76: handlers.x.limits.cpu: expected a duration " HINT}},
	{"handlers:\n  x: {type: exec, command: [/bin/true], limits: 5}\n",
	 {"t.yaml:2:49: handlers.x.limits: expected a map"}},
	/* The others run inside their worker: a limit would be the
	 * worker's, every job's at once. */
	{"handlers:\n  s: {type: sql, statement: x, limits: {cpu: 1s}}\n"
	 "  p: {type: plugin, library: x.so, symbol: s,\n"
	 "      limits: {memory: 1GiB}}\n"
	 "  h: {type: http, url: \"http://x\", limits: {}}\n",
	 {"t.yaml:2:32: handlers.s.limits: limits is only for exec or process "
	  "handlers",
	  "t.yaml:4:7: handlers.p.limits: limits is only for exec or process "
	  "handlers",
	  "t.yaml:5:36: handlers.h.limits: limits is only for exec or "
	  "process handlers"}},
	/* Every schedule error, in document order. */
	{"schedules:\n"
	 "  nightly:\n"
	 "    timezone: Europe/Pariss\n"
	 "    cron: \"0 25 * * *\"\n"
	 "    kind: nope\n",
	 {"t.yaml:3:15: schedules.nightly.timezone: unknown time zone "
	  "\"Europe/Pariss\"",
	  "t.yaml:4:11: schedules.nightly.cron: hour: 25 is out of range 0-23",
	  "t.yaml:5:11: schedules.nightly.kind: no handler for kind "
	  "\"nope\""}},
	/* databases: each error at its place. */
	{"database: { conninfo: \"dbname=a\" }\n"
	 "databases:\n"
	 "  a: { conninfo: \"dbname=a\" }\n",
	 {"t.yaml:3:3: databases: databases: and database: do not go "
	  "together: name the one database under databases:"}},
	{"databases: {}\n",
	 {"t.yaml:1:12: databases: names no database: give at least one, or "
	  "use database:"}},
	{"max_slots: 4\n"
	 "databases:\n"
	 "  a: { workers: 2 }\n"
	 "  b c: { conninfo: \"dbname=b\" }\n"
	 "  d: { conninfo: \"dbname=d\", workers: 5, slots: 1 }\n",
	 {"t.yaml:3:3: databases.a: missing required key \"conninfo\"",
	  "t.yaml:4:3: databases.b c: a database's name is 1 to 63 letters, "
	  "digits, _ and -",
	  "t.yaml:5:39: databases.d.workers: must not be more than max_slots "
	  "(4)",
	  "t.yaml:5:42: databases.d.slots: unknown key \"slots\""}},
};

/* databases: several databases, each its conninfo and workers (default:
 * the top-level workers:); the single-database form has none. */
static void
test_databases(void **state)
{
	struct config *c = load_ok("workers: 3\n"
				   "databases:\n"
				   "  alpha: { conninfo: \"dbname=a\" }\n"
				   "  beta-2:\n"
				   "    conninfo: \"dbname=b\"\n"
				   "    workers: 1\n");
	assert_null(c->conninfo);
	assert_int_equal(c->ndatabases, 2);
	assert_string_equal(c->databases[0].name, "alpha");
	assert_string_equal(c->databases[0].conninfo, "dbname=a");
	assert_int_equal(c->databases[0].workers, 3);
	assert_int_equal(c->databases[0].line, 3);
	assert_string_equal(c->databases[1].name, "beta-2");
	assert_int_equal(c->databases[1].workers, 1);
	assert_ptr_equal(config_database(c, "beta-2"), &c->databases[1]);
	assert_null(config_database(c, "gamma"));
	config_free(c);

	c = load_ok("database: { conninfo: \"dbname=a\" }\n");
	assert_int_equal(c->ndatabases, 0);
	assert_null(config_database(c, "a"));
	config_free(c);

	c = load_ok("tracing: { otlp_endpoint: \"http://otel:4318\","
		    " service_name: billing, buffer: 16 }\n");
	assert_string_equal(c->tracing_endpoint, "http://otel:4318");
	assert_string_equal(c->tracing_service, "billing");
	assert_int_equal(c->tracing_buffer, 16);
	config_free(c);
}

static void
test_bad_configs(void **state)
{
	unsetenv("PGJOBD_T_UNSET");
	for (size_t i = 0; i < sizeof(bad_configs) / sizeof(bad_configs[0]);
	     i++) {
		const struct bad *b = &bad_configs[i];
		struct config_errors errs = {0};
		struct config *c = config_load_string("t.yaml", b->text,
						      strlen(b->text), &errs);

		if (c)
			fail_msg("config %zu validated:\n%s", i, b->text);
		assert_errors(&errs, b->want, b->text);
		config_errors_free(&errs);
		assert_int_equal(errs.n, 0);
		/* Without a place for the errors, they are just dropped. */
		assert_null(config_load_string("t.yaml", b->text,
					       strlen(b->text), NULL));
	}
}

/* Flow-control keys read, and published as pgjob.publish_limits() takes
 * them: every queue the file names, the implicit default not. */
static void
test_flow_limits(void **state)
{
	struct config *c = load_ok(
		"queues:\n"
		"  a: {global_concurrency: 5, rate: 600/min, burst: 20}\n"
		"  b: {per_key_concurrency: 2, rate_per_key: 3/1.5s, fair: "
		"true,"
		" adaptive: true}\n"
		"  c: {concurrency: 2}\n"
		"  d: {rate: \" 7 / 250ms \"}\n");
	const struct queue_conf *a = config_queue(c, "a");
	assert_int_equal(a->global_concurrency, 5);
	assert_int_equal(a->rate.n, 600);
	assert_int_equal(a->rate.period_ms, 60000);
	assert_true(config_queue_limited(a));
	const struct queue_conf *b = config_queue(c, "b");
	assert_int_equal(b->rate_per_key.period_ms, 1500);
	assert_true(b->fair && b->adaptive);
	assert_false(config_queue_limited(config_queue(c, "c")));
	char *json = config_limits_json(c);
	assert_string_equal(
		json, "{\"a\":{\"global_concurrency\":5,\"rate\":\"600/min\","
		      "\"burst\":20},\"b\":{\"per_key_concurrency\":2,"
		      "\"rate_per_key\":\"3/1500ms\",\"fair\":true},\"c\":{},"
		      "\"d\":{\"rate\":\"7/250ms\"}}");
	free(json);
	config_free(c);
	struct rate r;
	const char *why;
	char buf[RATE_LEN];
	assert_int_equal(rate_parse("1/d", &r, &why), 0);
	assert_string_equal(rate_format(&r, buf, sizeof(buf)), "1/d");
	assert_int_equal(rate_parse("10/2h", &r, &why), 0);
	assert_string_equal(rate_format(&r, buf, sizeof(buf)), "10/2h");
	assert_int_equal(rate_parse("10/0.5ms", &r, &why), 0);
	assert_int_equal(r.period_ms, 1);
	assert_int_equal(rate_parse("10/0.4ms", &r, &why), -1);
	assert_string_equal(why, "the period is out of range");
	assert_int_equal(rate_parse("10/s/s", &r, &why), -1);
	assert_int_equal(rate_parse("1234567890/s", &r, &why), -1);
}

/* An inherited plugin timeout is lowered to what the lease allows; one
 * that fits, or another type's, is kept. */
static void
test_plugin_timeout(void **state)
{
	struct config *c =
		load_ok("lease: 10s\n"
			"defaults: {timeout: 1m}\n"
			"queues: {slow: {timeout: 9s}}\n"
			"handlers:\n"
			"  p: {type: plugin, library: x, symbol: s}\n"
			"  q: {type: plugin, library: x, symbol: s,"
			" queue: slow}\n"
			"  r: {type: plugin, library: x, symbol: s,"
			" timeout: 8s}\n"
			"  s: {type: plugin, library: x, symbol: s,"
			" timeout: 2s}\n"
			"  e: {type: exec, command: [/bin/true]}\n");

	assert_int_equal(config_handler(c, "p")->timeout_ms, 8000);
	assert_int_equal(config_handler(c, "q")->timeout_ms, 8000);
	assert_int_equal(config_handler(c, "r")->timeout_ms, 8000);
	assert_int_equal(config_handler(c, "s")->timeout_ms, 2000);
	assert_int_equal(config_handler(c, "e")->timeout_ms, 60000);
	config_free(c);
}

/* An exec handler's limits, read; absent ones stay 0 (no limit). */
/* process handlers: their keys, defaults and the values they resolve. */
static void
test_process_handler(void **state)
{
	struct config *c =
		load_ok("max_payload_bytes: 1000\n"
			"queues: { q: { concurrency: 6 } }\n"
			"handlers:\n"
			"  a:\n"
			"    type: process\n"
			"    command: [python3, /srv/h.py]\n"
			"    env: [\"A=1\"]\n"
			"    copies: 2\n"
			"    concurrency: 16\n"
			"    max_jobs: 1000\n"
			"    max_memory: 512MiB\n"
			"    startup_timeout: 5s\n"
			"    max_line_bytes: 65536\n"
			"    limits: { open_files: 100 }\n"
			"  b: {type: process, command: [/bin/cat], queue: q,"
			" concurrency: 4}\n"
			"  c: {type: process, command: [/bin/cat]}\n");
	const struct handler_conf *a = config_handler(c, "a");
	const struct handler_conf *b = config_handler(c, "b");
	const struct handler_conf *d = config_handler(c, "c");

	assert_int_equal(a->type, HANDLER_PROCESS);
	assert_string_equal(a->command.v[1], "/srv/h.py");
	assert_int_equal(a->copies, 2);
	assert_int_equal(a->concurrency, 16);
	assert_int_equal(a->max_jobs, 1000);
	assert_int_equal(a->max_memory, 512LL << 20);
	assert_int_equal(a->startup_timeout_ms, 5000);
	assert_int_equal(a->max_line_bytes, 65536);
	assert_int_equal(a->limits.open_files, 100);
	/* Copies enough for the queue's concurrency (6 / 4, rounded up). */
	assert_int_equal(b->copies, 2);
	/* The defaults: one job a copy, the default queue's 8 copies, the
	 * payload limit and a MiB a line. */
	assert_int_equal(d->concurrency, 1);
	assert_int_equal(d->copies, 8);
	assert_int_equal(d->max_jobs, 0);
	assert_int_equal(d->max_memory, 0);
	assert_int_equal(d->startup_timeout_ms, 30000);
	assert_int_equal(d->max_line_bytes, 1000 + (1 << 20));
	assert_string_equal(config_handler_type_name(HANDLER_PROCESS),
			    "process");
	config_free(c);
}

static void
test_exec_limits(void **state)
{
	struct config *c = load_ok(
		"handlers:\n"
		"  a:\n"
		"    type: exec\n"
		"    command: [/bin/true]\n"
		"    limits: { cpu: 60s, memory: 512MiB, open_files: 1024,"
		" processes: 64, file_size: 1GiB }\n"
		"  b: {type: exec, command: [/bin/true], limits: {cpu: 2m,"
		" memory: \"1 GiB\", file_size: 4096}}\n"
		"  c: {type: exec, command: [/bin/true], limits: ~}\n"
		"  d: {type: exec, command: [/bin/true]}\n");
	const struct exec_limits *a = &config_handler(c, "a")->limits;
	const struct exec_limits *b = &config_handler(c, "b")->limits;
	const struct exec_limits none = {0};

	assert_int_equal(a->cpu_ms, 60000);
	assert_int_equal(a->memory, 512LL << 20);
	assert_int_equal(a->open_files, 1024);
	assert_int_equal(a->processes, 64);
	assert_int_equal(a->file_size, 1LL << 30);
	assert_int_equal(b->cpu_ms, 120000);
	assert_int_equal(b->memory, 1LL << 30);
	assert_int_equal(b->file_size, 4096);
	assert_int_equal(b->open_files, 0);
	assert_memory_equal(&config_handler(c, "c")->limits, &none,
			    sizeof(none));
	assert_memory_equal(&config_handler(c, "d")->limits, &none,
			    sizeof(none));
	config_free(c);
}

/* The size grammar (size.h), and its shortest spelling back. */
static void
test_sizes(void **state)
{
	static const struct {
		const char *s;
		int64_t bytes;
		const char *why, *back;
	} t[] = {
		{"0", 0, NULL, "0B"},
		{"1", 1, NULL, "1B"},
		{"1000", 1000, NULL, "1000B"},
		{"1024B", 1024, NULL, "1KiB"},
		{"1536KiB", 1536 << 10, NULL, "1536KiB"},
		{"512MiB", 512LL << 20, NULL, "512MiB"},
		{"2048 MiB", 2LL << 30, NULL, "2GiB"},
		{"3TiB", 3LL << 40, NULL, "3TiB"},
		{"1024TiB", 1LL << 50, NULL, "1024TiB"},
		{"1025TiB", 0, "too large", NULL},
		{"99999999999999999999", 0, "too large", NULL},
		{"", 0, "empty", NULL},
		{"-1", 0, "negative", NULL},
		{"MiB", 0, "not a number", NULL},
		{"1.5GiB", 0, "unknown unit (use B, KiB, MiB, GiB or TiB)",
		 NULL},
		{"1GB", 0, "unknown unit (use B, KiB, MiB, GiB or TiB)", NULL},
		{"1mib", 0, "unknown unit (use B, KiB, MiB, GiB or TiB)", NULL},
		{"1  MiB", 0, "unknown unit (use B, KiB, MiB, GiB or TiB)",
		 NULL},
		{"1 ", 0, "unknown unit (use B, KiB, MiB, GiB or TiB)", NULL},
	};
	char buf[SIZE_LEN];

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		int64_t v = -7;
		const char *why = NULL;
		int rc = size_parse(t[i].s, &v, &why);

		if (t[i].why) {
			assert_int_equal(rc, -1);
			assert_string_equal(why, t[i].why);
			assert_int_equal(v, -7);
			continue;
		}
		assert_int_equal(rc, 0);
		assert_int_equal(v, t[i].bytes);
		assert_string_equal(size_format(v, buf, sizeof(buf)),
				    t[i].back);
	}
	assert_int_equal(size_parse(NULL, NULL, NULL), -1);
}

/* user: and group: resolve to ids when the config is loaded. */
static void
test_run_as(void **state)
{
	struct passwd *pw = getpwnam("nobody");
	struct config_errors errs = {0};
	const struct run_as *as;
	struct config *c;
	char num[32];
	bool found = false;

	assert_non_null(pw);
	snprintf(num, sizeof(num), "%u", (unsigned)pw->pw_uid);
	setenv("PGJOBD_T_UID", num, 1);
	c = load_ok("handlers:\n"
		    "  a: {type: exec, command: [/bin/true], user: nobody}\n"
		    "  b: {type: exec, command: [/bin/true],"
		    " user: \"${PGJOBD_T_UID}\", group: root}\n"
		    "  c: {type: exec, command: [/bin/true], group: 0}\n"
		    "  d: {type: exec, command: [/bin/true]}\n"
		    "tasks:\n"
		    "  t: {command: [/bin/true], user: nobody}\n");
	as = &config_handler(c, "a")->run_as;
	assert_true(as->set);
	assert_string_equal(as->user, "nobody");
	assert_int_equal(as->uid, pw->pw_uid);
	assert_int_equal(as->gid, pw->pw_gid);
	for (int i = 0; i < as->ngroups; i++)
		found |= as->groups[i] == pw->pw_gid;
	assert_true(found);
	assert_int_equal(as->line, 2);
	assert_int_equal(as->column, 47);
	as = &config_handler(c, "b")->run_as;
	assert_int_equal(as->uid, pw->pw_uid);
	assert_int_equal(as->gid, 0);
	as = &config_handler(c, "c")->run_as;
	assert_true(as->set);
	assert_int_equal(as->uid, (uid_t)-1);
	assert_int_equal(as->gid, 0);
	assert_int_equal(as->ngroups, 1);
	assert_false(config_handler(c, "d")->run_as.set);
	assert_true(c->tasks[0].run_as.set);
	assert_int_equal(c->tasks[0].run_as.uid, pw->pw_uid);

	/* Only root can switch: every such key is named at start. */
	assert_int_equal(config_check_run_as(c, 0, &errs), 0);
	assert_int_equal(config_check_run_as(c, 1000, &errs), 4);
	assert_string_equal(errs.msg[0],
			    "t.yaml:2:47: handlers.a.user: pgjobd runs as uid "
			    "1000, not root: it cannot run commands as another "
			    "user or group");
	assert_string_equal(errs.msg[2],
			    "t.yaml:4:48: handlers.c.group: pgjobd runs as uid "
			    "1000, not root: it cannot run commands as another "
			    "user or group");
	assert_string_equal(errs.msg[3],
			    "t.yaml:7:35: tasks.t.user: pgjobd runs as uid "
			    "1000, not root: it cannot run commands as another "
			    "user or group");
	config_errors_free(&errs);
	config_free(c);
}

/* Scalars are untyped where the key's type allows it. */
static void
test_scalars(void **state)
{
	struct config *c = load_ok("database: {conninfo: dbname=5}\n"
				   "workers: ${PGJOBD_T_NUM}\n"
				   "max_slots: \t7\n"
				   "handlers:\n"
				   "  x: {type: exec, command: [/bin/sleep, 1],"
				   " timeout: \"90\"}\n"
				   "  'y': {type: http, url: 'https://y/', "
				   "tls_verify: YES}\n");

	assert_string_equal(c->conninfo, "dbname=5");
	assert_int_equal(c->workers, 7);
	assert_int_equal(c->max_slots, 7);
	assert_string_equal(config_handler(c, "x")->command.v[1], "1");
	assert_int_equal(config_handler(c, "x")->timeout_ms, 90000);
	assert_true(config_handler(c, "y")->tls_verify);
	config_free(c);
}

/* Aliases are followed, and cannot make a small file huge. */
static void
test_aliases(void **state)
{
	struct config_errors errs = {0};
	const char *text;
	struct config *c = load_ok("defaults: &d { timeout: 1m }\n"
				   "queues:\n"
				   "  q: *d\n");

	assert_int_equal(config_queue(c, "q")->timeout_ms, 60000);
	config_free(c);

	/* A map that contains itself, as a schedule's payload. */
	text = "handlers: {h: {type: sql, statement: x}}\n"
	       "schedules:\n"
	       "  s: {cron: \"@daily\", kind: h, payload: &p {a: [*p]}}\n";
	assert_null(config_load_string("t.yaml", text, strlen(text), &errs));
	assert_int_equal(errs.n, 1);
	assert_non_null(strstr(errs.msg[0], "nested too deeply (64 levels"));
	config_errors_free(&errs);

	/* Six levels of ten aliases: a million values if copied. */
	text = "handlers:\n"
	       "  p:\n"
	       "    type: plugin\n"
	       "    library: l\n"
	       "    symbol: s\n"
	       "    config:\n"
	       "      a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
	       "      a1: &a1 [*a0, *a0, *a0, *a0, *a0, *a0, *a0, *a0, *a0, "
	       "*a0]\n"
	       "      a2: &a2 [*a1, *a1, *a1, *a1, *a1, *a1, *a1, *a1, *a1, "
	       "*a1]\n"
	       "      a3: &a3 [*a2, *a2, *a2, *a2, *a2, *a2, *a2, *a2, *a2, "
	       "*a2]\n"
	       "      a4: &a4 [*a3, *a3, *a3, *a3, *a3, *a3, *a3, *a3, *a3, "
	       "*a3]\n"
	       "      a5: &a5 [*a4, *a4, *a4, *a4, *a4, *a4, *a4, *a4, *a4, "
	       "*a4]\n";
	assert_null(config_load_string("t.yaml", text, strlen(text), &errs));
	assert_int_equal(errs.n, 1);
	assert_string_equal(errs.msg[0],
			    "t.yaml:7:40: handlers.p.config.a4[7][8][8][8][8]: "
			    "too many values (100000 at most)");
	config_errors_free(&errs);
}

struct duration_case {
	const char *s;
	int64_t ms;	 /* when why is NULL */
	const char *why; /* NULL: valid */
};

static void
test_durations(void **state)
{
	static const struct duration_case cases[] = {
		{"500ms", 500, NULL},
		{"30s", 30000, NULL},
		{"5m", 300000, NULL},
		{"2h", 7200000, NULL},
		{"7d", 604800000, NULL},
		{"45", 45000, NULL},
		{"0", 0, NULL},
		{"0ms", 0, NULL},
		{"007s", 7000, NULL},
		{"1000000000000000ms", 1000000000000000LL, NULL},
		{"11574074d", 11574074LL * 86400000, NULL},
		/* One grammar for config, command line and handlers: a
		 * fraction is taken, rounded to the millisecond. */
		{"1.5s", 1500, NULL},
		{"0.5m", 30000, NULL},
		{".25s", 250, NULL},
		{"1.0004s", 1000, NULL},
		{"1.0005s", 1001, NULL},
		{"2.", 2000, NULL},
		{NULL, 0, "empty"},
		{"", 0, "empty"},
		{"-5s", 0, "negative"},
		{"s", 0, "not a number"},
		{" 5s", 0, "not a number"},
		{"+5s", 0, "not a number"},
		{"5x", 0, "unknown unit"},
		{"5S", 0, "unknown unit"},
		{"5 s", 0, "unknown unit"},
		{"5s ", 0, "unknown unit"},
		{"1.5.5s", 0, "unknown unit"},
		{"1e3s", 0, "unknown unit"},
		{".", 0, "not a number"},
		{"1h30m", 0, "unknown unit"},
		{"1000000000000001ms", 0, "too large"},
		{"9223372036854775808ms", 0, "too large"},
		{"9223372036854776s", 0, "too large"},
		{"11574075d", 0, "too large"},
		{"99999999999999999999", 0, "too large"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct duration_case *t = &cases[i];
		int64_t ms = -42;
		const char *why = "unset";
		int rc = duration_parse(t->s, &ms, &why);

		if (!t->why) {
			if (rc != 0 || ms != t->ms)
				fail_msg("\"%s\": rc %d, %lld ms", t->s, rc,
					 (long long)ms);
		} else {
			if (rc != -1 || strcmp(why, t->why))
				fail_msg("\"%s\": rc %d, why %s",
					 t->s ? t->s : "NULL", rc, why);
			assert_int_equal(ms, -42);
		}
	}
}

struct env_case {
	const char *s;
	const char *want; /* NULL: fails */
	const char *why;  /* when it fails: the message */
};

#define BAD_REF(r)                                                             \
	"bad variable reference \"" r "\" (use ${NAME}, ${file:PATH}, "        \
	"${credential:NAME}, or $$ for a literal $)"

static void
check_env_cases(const struct env_case *cases, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct env_case *t = &cases[i];
		char *why = (char *)"unset";
		char *got = env_expand(t->s, &why);

		if (t->want) {
			if (!got || strcmp(got, t->want) || why)
				fail_msg("\"%s\": got \"%s\" (%s)", t->s,
					 got ? got : "NULL", why ? why : "");
		} else {
			if (got || !why || strcmp(why, t->why))
				fail_msg("\"%s\": why \"%s\"", t->s,
					 why ? why : "NULL");
		}
		free(got);
		free(why);
	}
}

static void
test_expand_env(void **state)
{
	static const struct env_case cases[] = {
		{"plain", "plain", NULL},
		{"", "", NULL},
		{"${PGJOBD_T_A}", "alpha", NULL},
		{"x${PGJOBD_T_A}y${PGJOBD_T_A}", "xalphayalpha", NULL},
		{"[${PGJOBD_T_EMPTY}]", "[]", NULL},
		{"${PGJOBD_T_DOLLAR}", "$${X}", NULL},
		{"$$", "$", NULL},
		{"a$$b", "a$b", NULL},
		{"$$$$", "$$", NULL},
		{"$${PGJOBD_T_A}", "${PGJOBD_T_A}", NULL},
		{"$HOME and $5", "$HOME and $5", NULL},
		{"trailing $", "trailing $", NULL},
		{"{PGJOBD_T_A}", "{PGJOBD_T_A}", NULL},
		{"${PGJOBD_T_UNSET}", NULL,
		 "environment variable \"PGJOBD_T_UNSET\" is not set"},
		{"ok ${PGJOBD_T_A} ${PGJOBD_T_UNSET} ${PGJOBD_T_A", NULL,
		 "environment variable \"PGJOBD_T_UNSET\" is not set"},
		{"${PGJOBD_T_A", NULL, BAD_REF("${PGJOBD_T_A")},
		{"x ${", NULL, BAD_REF("${")},
		{"${}", NULL, BAD_REF("${}")},
		{"${A B}", NULL, BAD_REF("${A B}")},
		{"${1X}", NULL, BAD_REF("${1X}")},
		{"${A-default}", NULL, BAD_REF("${A-default}")},
		{"${filex:/a}", NULL, BAD_REF("${filex:/a}")},
	};

	setenv("PGJOBD_T_A", "alpha", 1);
	setenv("PGJOBD_T_EMPTY", "", 1);
	setenv("PGJOBD_T_DOLLAR", "$${X}", 1);
	unsetenv("PGJOBD_T_UNSET");
	check_env_cases(cases, sizeof(cases) / sizeof(cases[0]));
}

/* A secret file in the test's scratch folder, with mode. */
static void
put_secret(const char *path, const char *text, size_t len, mode_t mode)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_int_equal(fwrite(text, 1, len, f), len);
	fclose(f);
	assert_int_equal(chmod(path, mode), 0);
}

/*
 * ${file:PATH} and ${credential:NAME}: the content, one trailing newline
 * off; and every refusal, which names the reference and never the value.
 */
static void
test_expand_secrets(void **state)
{
	char dir[] = "/tmp/pgjobd-t-secrets-XXXXXX";
	char big[ENV_SECRET_MAX + 2];
	struct buf b = {0};

	assert_non_null(mkdtemp(dir));
	buf_appendf(&b, "%s/creds", dir);
	assert_int_equal(mkdir(b.data, 0700), 0);
	buf_free(&b);
#define AT(name) (buf_free(&b), buf_appendf(&b, "%s/%s", dir, name), b.data)
	put_secret(AT("pw"), "s3cr3t\n", 7, 0600);
	put_secret(AT("crlf"), "a b\r\n", 5, 0400);
	put_secret(AT("two"), "x\n\n", 3, 0644);
	put_secret(AT("empty"), "", 0, 0600);
	put_secret(AT("gw"), "leak", 4, 0620);
	put_secret(AT("ow"), "leak", 4, 0602);
	put_secret(AT("nul"), "a\0b", 3, 0600);
	memset(big, 'x', sizeof(big));
	put_secret(AT("big"), big, ENV_SECRET_MAX + 1, 0600);
	put_secret(AT("max"), big, ENV_SECRET_MAX, 0600);
	put_secret(AT("creds/db-password"), "from-systemd\n", 13, 0400);
	buf_free(&b);

	char *ref[16];
	int n = 0;
#define REF(fmt, name) (ref[n] = xasprintf(fmt, dir, name), ref[n++])
	const struct env_case cases[] = {
		{REF("${file:%s/%s}", "pw"), "s3cr3t", NULL},
		{REF("p=${file:%s/%s};", "crlf"), "p=a b;", NULL},
		{REF("${file:%s/%s}", "two"), "x\n", NULL},
		{REF("[${file:%s/%s}]", "empty"), "[]", NULL},
		{"${file:relative/pw}", NULL,
		 "${file:relative/pw}: the path must be absolute"},
		{"${file:/nonexistent/pgjobd-t}", NULL,
		 "${file:/nonexistent/pgjobd-t}: cannot read: No such file or "
		 "directory"},
		{"${credential:db-password}", "from-systemd", NULL},
		{"${credential:../pw}", NULL,
		 "${credential:../pw}: bad credential name (letters, digits, "
		 "\"_-.@\")"},
		{"${credential:..}", NULL,
		 "${credential:..}: bad credential name (letters, digits, "
		 "\"_-.@\")"},
		{"${credential:nope}", NULL,
		 "${credential:nope}: cannot read: No such file or directory"},
	};
	char *dirref = xasprintf("${file:%s}", dir);
	char *why[5];
	const char *which[] = {"gw", "ow", "nul", "big", NULL};
	const char *because[] = {
		": writable by group or others: chmod go-w the file",
		": writable by group or others: chmod go-w the file",
		": contains a NUL character", ": larger than 65536 bytes"};

	b = (struct buf){0};
	buf_appendf(&b, "%s/creds", dir);
	setenv("CREDENTIALS_DIRECTORY", b.data, 1);
	buf_free(&b);
	check_env_cases(cases, sizeof(cases) / sizeof(cases[0]));

	/* The refused files: the message names the reference alone. */
	for (int i = 0; which[i]; i++) {
		char *r = xasprintf("${file:%s/%s}", dir, which[i]);
		char *want = xasprintf("%s%s", r, because[i]);
		assert_null(env_expand(r, &why[i]));
		assert_string_equal(why[i], want);
		assert_null(strstr(why[i], "leak"));
		free(r);
		free(want);
		free(why[i]);
	}
	/* A file as large as allowed is taken. */
	char *r = xasprintf("${file:%s/max}", dir), *w;
	char *v = env_expand(r, &w);
	assert_non_null(v);
	assert_int_equal(strlen(v), ENV_SECRET_MAX);
	free(v);
	free(r);
	/* Another user's file, as root can make one: refused (its owner
	 * could choose the secret). */
	if (geteuid() == 0) {
		r = xasprintf("${file:%s/pw}", dir);
		assert_int_equal(chown(AT("pw"), 65534, (gid_t)-1), 0);
		assert_null(env_expand(r, &w));
		assert_non_null(strstr(w, ": owned by uid 65534, neither root "
					  "nor pgjobd's user"));
		free(w);
		free(r);
		buf_free(&b);
	}
	/* A directory is not a secret. */
	assert_null(env_expand(dirref, &w));
	assert_non_null(strstr(w, ": not a regular file"));
	free(w);
	free(dirref);
	/* Without LoadCredential=, the unit's omission is named. */
	unsetenv("CREDENTIALS_DIRECTORY");
	assert_null(env_expand("${credential:db-password}", &w));
	assert_string_equal(w, "${credential:db-password}: "
			       "CREDENTIALS_DIRECTORY is not set "
			       "(LoadCredential= in the unit)");
	free(w);
	for (int i = 0; i < n; i++)
		free(ref[i]);
	b = (struct buf){0};
	buf_appendf(&b, "rm -rf '%s'", dir);
	assert_int_equal(system(b.data), 0);
	buf_free(&b);
#undef AT
#undef REF
}

/*
 * A config error from a secret has the place of its value; and pgjob's
 * load leaves the sections unread, so that a handler's secret it cannot
 * read does not stop it.
 */
static void
test_secrets_in_config(void **state)
{
	static const char text[] =
		"database: { conninfo: \"dbname=${PGJOBD_T_DB}\" }\n"
		"retention: 2d\n"
		"handlers:\n"
		"  a: { type: http, url: \"https://x.example/\",\n"
		"       headers: { Authorization: \"${file:/nonexistent/t}\" } "
		"}\n"
		"  b: { type: exec, command: [\"/bin/true\"],\n"
		"       env: { TOKEN: \"${PGJOBD_T_UNSET}\" } }\n";
	char path[] = "/tmp/pgjobd-t-cli-XXXXXX";
	int fd = mkstemp(path);
	struct config_errors errs = {0};
	struct config *c;

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, sizeof(text) - 1),
			 (ssize_t)sizeof(text) - 1);
	close(fd);
	setenv("PGJOBD_T_DB", "app", 1);
	unsetenv("PGJOBD_T_UNSET");

	/* pgjobd: both handlers' secrets are missing, each at its value. */
	assert_null(config_load(path, &errs));
	assert_int_equal(errs.n, 2);
	assert_non_null(strstr(errs.msg[0],
			       ":5:34: handlers.a.headers.Authorization: "
			       "${file:/nonexistent/t}: cannot read: No such "
			       "file or directory"));
	assert_non_null(strstr(errs.msg[1],
			       ":7:22: handlers.b.env.TOKEN: environment "
			       "variable \"PGJOBD_T_UNSET\" is not set"));
	config_errors_free(&errs);

	/* pgjob: the top-level settings, the queues, and of each handler
	 * its name, type, queue and timeout: no secret read. */
	c = config_load_settings(path, &errs);
	assert_non_null(c);
	assert_string_equal(c->conninfo, "dbname=app");
	assert_int_equal(c->retention_ms, 2 * 86400 * 1000LL);
	assert_int_equal(c->nhandlers, 2);
	assert_non_null(config_handler(c, "a"));
	assert_int_equal(config_handler(c, "a")->headers.n, 0);
	assert_int_equal(config_handler(c, "b")->env.n, 0);
	assert_non_null(config_queue(c, "default"));
	config_free(c);

	/* What it reads still has to be right. */
	unsetenv("PGJOBD_T_DB");
	assert_null(config_load_settings(path, &errs));
	assert_int_equal(errs.n, 1);
	assert_non_null(strstr(errs.msg[0], ":1:23: database.conninfo: "
					    "environment variable "
					    "\"PGJOBD_T_DB\" is not set"));
	config_errors_free(&errs);
	unlink(path);
}

/* A plugin's library may not climb out of the plugin directory. */
static void
test_library_dotdot(void **state)
{
	static const char *const bad[] = {"../x.so", "examples/../../x",
					  "/usr/lib/../lib/x.so", ".."};
	static const char *const good[] = {
		"x", "examples/x", "/usr/lib/x.so", "..x/y", "x../y", "./x"};
	struct config_errors errs = {0};

	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		char *t = xasprintf("handlers:\n  p: { type: plugin, library: "
				    "\"%s\", symbol: s }\n",
				    bad[i]);
		assert_null(config_load_string("t.yaml", t, strlen(t), &errs));
		assert_int_equal(errs.n, 1);
		assert_string_equal(
			errs.msg[0],
			"t.yaml:2:31: handlers.p.library: must not have a "
			"\"..\" component (a name is looked for inside the "
			"plugin directory; give an absolute path to load "
			"another)");
		config_errors_free(&errs);
		free(t);
	}
	for (size_t i = 0; i < sizeof(good) / sizeof(*good); i++) {
		char *t = xasprintf("handlers:\n  p: { type: plugin, library: "
				    "\"%s\", symbol: s }\n",
				    good[i]);
		struct config *c =
			config_load_string("t.yaml", t, strlen(t), &errs);
		assert_non_null(c);
		config_free(c);
		free(t);
	}
}

static void
test_names(void **state)
{
	assert_string_equal(config_handler_type_name(HANDLER_EXEC), "exec");
	assert_string_equal(config_handler_type_name(HANDLER_SQL), "sql");
	assert_string_equal(config_handler_type_name(HANDLER_HTTP), "http");
	assert_string_equal(config_handler_type_name(HANDLER_PLUGIN), "plugin");
	assert_string_equal(config_queue_mode_name(QUEUE_PARALLEL), "parallel");
	assert_string_equal(config_queue_mode_name(QUEUE_SERIAL), "serial");
	assert_string_equal(config_queue_mode_name(QUEUE_PER_KEY), "per_key");
	assert_string_equal(config_queue_mode_name((enum queue_mode)9),
			    "unknown");
	config_free(NULL);
	config_errors_free(NULL);
}

static char *
source_path(const char *env, const char *rel)
{
	const char *dir = getenv(env);
	char *p;

	if (!dir)
		fail_msg("%s is not set (run the tests with ctest)", env);
	p = malloc(strlen(dir) + strlen(rel) + 1);
	assert_non_null(p);
	strcpy(p, dir);
	strcat(p, rel);
	return p;
}

/* The shipped example validates, and says what the README's demo needs. */
static void
test_example_file(void **state)
{
	char *path = source_path("PGJOBD_SOURCE", "/config/example.yaml");
	struct config_errors errs = {0};
	struct config *c;
	const struct handler_conf *h;

	c = config_load(path, &errs);
	for (size_t i = 0; i < errs.n; i++)
		print_error("%s\n", errs.msg[i]);
	assert_non_null(c);
	assert_string_equal(c->path, path);
	assert_null(c->conninfo);
	assert_int_equal(c->workers, 2);
	assert_non_null(config_queue(c, "default"));
	h = config_handler(c, "hello");
	assert_int_equal(h->type, HANDLER_EXEC);
	assert_string_equal(h->command.v[0], "/bin/echo");
	assert_string_equal(h->command.v[1], "{\"greeting\":\"hello\"}");
	h = config_handler(c, "sleep");
	assert_string_equal(h->command.v[0], "/bin/sleep");
	assert_string_equal(h->command.v[1], "1");
	h = config_handler(c, "noop");
	assert_int_equal(h->type, HANDLER_PLUGIN);
	/* By name, in the plugin directory: no variable to set. */
	assert_string_equal(h->library, "examples/pgjobd_example");
	assert_string_equal(h->symbol, "pgjobd_example");
	assert_int_equal(c->nschedules + c->ntasks, 0);
	config_free(c);
	free(path);
}

/* A file with many mistakes: every one, in order, with its place. */
static void
test_fixture_errors(void **state)
{
	char *path = source_path("PGJOBD_FIXTURES", "/config/errors.yaml");
	static const char *const want[] = {
		":2:10: workers: must be at least 1",
		":3:8: lease: bad duration \"30 seconds\" " HINT,
		":5:10: log.level: unknown log level \"verbose\" (use debug, "
		"info, warn or error)",
		":11:14: handlers.send_email.command: expected a list of "
		"strings",
		":12:14: handlers.send_email.timeout: bad duration "
		"\"5x\" " HINT,
		":16:12: handlers.charge.queue: unknown queue \"biling\"",
		":17:5: handlers.charge.url: url is only for http handlers",
		":18:3: handlers.resize: missing required key \"type\"",
		":21:39: schedules.nightly.kind: no handler for kind "
		"\"charges\"",
		":23:65: tasks.feed.partitions: must be at least 1",
		":24:1: workers: duplicate key \"workers\"",
	};
	const size_t n = sizeof(want) / sizeof(want[0]);
	struct config_errors errs = {0};
	const char *full[sizeof(want) / sizeof(want[0]) + 1] = {0};
	char *msgs[sizeof(want) / sizeof(want[0])];

	assert_null(config_load(path, &errs));
	for (size_t i = 0; i < n; i++) {
		msgs[i] = malloc(strlen(path) + strlen(want[i]) + 1);
		assert_non_null(msgs[i]);
		strcpy(msgs[i], path);
		strcat(msgs[i], want[i]);
		full[i] = msgs[i];
	}
	assert_errors(&errs, full, path);
	for (size_t i = 0; i < n; i++)
		free(msgs[i]);
	config_errors_free(&errs);
	free(path);
}

/* A file that cannot be read: its name and why. */
/* web: (pgjob web): its keys, defaults and the errors of its users. */
#define WEB_HASH                                                               \
	"$y$j9T$jtn7.St/p/sEPu3ZMIGdg1$UFYkRsE0fHCTV0fGPU05wolmQDSB4uTLhk."    \
	"KuP.ddZ4"

static void
test_web(void **state)
{
	struct config *c = load_ok("workers: 1\n");
	assert_null(c->web.listen);
	assert_int_equal(c->web.session_ttl_ms, 12 * 3600 * 1000LL);
	assert_false(c->web.cookie_secure);
	assert_int_equal(c->web.nusers, 0);
	config_free(c);

	c = load_ok("web:\n"
		    "  listen: \"[::1]:8443\"\n"
		    "  session_ttl: 30m\n"
		    "  cookie_secure: true\n"
		    "  public_url: https://jobs.example.com/\n"
		    "  users:\n"
		    "    - name: alice\n"
		    "      password_hash: \"" WEB_HASH "\"\n"
		    "      role: operator\n"
		    "    - {name: bob, password_hash: '" WEB_HASH "', "
		    "role: read-only}\n");
	assert_string_equal(c->web.listen, "[::1]:8443");
	assert_int_equal(c->web.session_ttl_ms, 30 * 60 * 1000);
	assert_true(c->web.cookie_secure);
	assert_string_equal(c->web.public_url, "https://jobs.example.com/");
	assert_int_equal(c->web.nusers, 2);
	assert_string_equal(c->web.users[0].name, "alice");
	assert_string_equal(c->web.users[0].password_hash, WEB_HASH);
	assert_true(c->web.users[0].operator);
	assert_int_equal(c->web.users[0].line, 7);
	assert_string_equal(c->web.users[1].name, "bob");
	assert_false(c->web.users[1].operator);
	config_free(c);

	static const struct {
		const char *yaml, *msg;
	} bad[] = {
		{"web: {listen: 8080}\n",
		 "t.yaml:1:15: web.listen: expected \"host:port\", e.g. "
		 "\"127.0.0.1:9188\", \"[::1]:9188\" or \":9188\""},
		{"web: {public_url: jobs.example.com}\n",
		 "t.yaml:1:19: web.public_url: must start with http:// or "
		 "https://"},
		{"web: {public_url: \"https://jobs.example.com/console\"}\n",
		 "t.yaml:1:19: web.public_url: must be scheme://host[:port] "
		 "only, with no path (the console is served at the root of "
		 "it)"},
		{"web: {public_url: \"https://u@jobs.example.com\"}\n",
		 "t.yaml:1:19: web.public_url: has a character no host name "
		 "has"},
		{"web: {session_ttl: 10s}\n",
		 "t.yaml:1:20: web.session_ttl: must be at least 1m"},
		{"web: {users: {alice: x}}\n",
		 "t.yaml:1:14: web.users: expected a list of users"},
		{"web:\n  users:\n    - name: alice\n      role: operator\n",
		 "t.yaml:3:7: web.users[0]: missing required key "
		 "\"password_hash\""},
		{"web:\n  users:\n    - {name: a, password_hash: secret, "
		 "role: operator}\n",
		 "t.yaml:3:32: web.users[0].password_hash: not a password hash "
		 "this system's crypt(3) checks (or a weak one): make one with "
		 "`pgjob web --hash-password`"},
		{"web:\n  users:\n    - {name: a, password_hash: '" WEB_HASH
		 "', role: admin}\n",
		 "t.yaml:3:115: web.users[0].role: unknown role \"admin\" (use "
		 "read-only or operator)"},
		{"web:\n  users:\n    - {name: \"a b\", password_hash: "
		 "'" WEB_HASH "', role: operator}\n",
		 "t.yaml:3:14: web.users[0].name: a user's name is 1 to 64 "
		 "letters, digits, _ . @ and -"},
		{"web:\n  users:\n"
		 "    - {name: a, password_hash: '" WEB_HASH
		 "', role: operator}\n"
		 "    - {name: a, password_hash: '" WEB_HASH
		 "', role: operator}\n",
		 "t.yaml:4:14: web.users[1].name: user \"a\" is already "
		 "defined "
		 "at line 3"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct config_errors errs = {0};
		assert_null(config_load_string("t.yaml", bad[i].yaml,
					       strlen(bad[i].yaml), &errs));
		assert_int_equal(errs.n, 1);
		assert_string_equal(errs.msg[0], bad[i].msg);
		config_errors_free(&errs);
	}
}

static void
test_unreadable(void **state)
{
	struct config_errors errs = {0};

	assert_null(config_load("/nonexistent/pgjobd.yaml", &errs));
	assert_int_equal(errs.n, 1);
	assert_string_equal(errs.msg[0], "/nonexistent/pgjobd.yaml: cannot "
					 "read: No such file or directory");
	config_errors_free(&errs);
	assert_null(config_load("/", &errs));
	assert_string_equal(errs.msg[0], "/: cannot read: Is a directory");
	config_errors_free(&errs);
	assert_null(config_load("/nonexistent", NULL));
}

int
main(void)
{
	/* As pgjobd and pgjob do: libpq judges database.conninfo. */
	config_set_conninfo_check(db_conninfo_valid);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_design_sketch),
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_inheritance),
		cmocka_unit_test(test_handler_keys),
		cmocka_unit_test(test_json),
		cmocka_unit_test(test_bad_configs),
		cmocka_unit_test(test_flow_limits),
		cmocka_unit_test(test_plugin_timeout),
		cmocka_unit_test(test_exec_limits),
		cmocka_unit_test(test_process_handler),
		cmocka_unit_test(test_sizes),
		cmocka_unit_test(test_run_as),
		cmocka_unit_test(test_scalars),
		cmocka_unit_test(test_aliases),
		cmocka_unit_test(test_durations),
		cmocka_unit_test(test_expand_env),
		cmocka_unit_test(test_expand_secrets),
		cmocka_unit_test(test_secrets_in_config),
		cmocka_unit_test(test_library_dotdot),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_example_file),
		cmocka_unit_test(test_fixture_errors),
		cmocka_unit_test(test_unreadable),
		cmocka_unit_test(test_databases),
		cmocka_unit_test(test_web),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
