/* Unit tests for log: logfmt and JSON lines, quoting, levels, the slot and
 * job fields. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

/* Runs fn with stderr captured; returns what it wrote (caller frees). */
static char *
capture(void (*fn)(void))
{
	int p[2], saved = dup(2);
	char *out = calloc(1, 65536);
	assert_int_equal(pipe(p), 0);
	dup2(p[1], 2);
	fn();
	dup2(saved, 2);
	close(saved);
	close(p[1]);
	ssize_t n = read(p[0], out, 65535);
	assert_true(n >= 0);
	close(p[0]);
	return out;
}

static void
emit_text(void)
{
	setenv("JOURNAL_STREAM", "1:2", 1); /* no ts= and pid= */
	log_init("worker", LOG_INFO, 0);
	log_set_slot(3);
	log_debug("hidden");
	struct log_job j = {88121, "thumbnail", 2};
	log_job(LOG_INFO, &j, "exit status %d, retry in %s", 3, "30s");
	log_warn("plain");
	log_error("quote \" and\nnewline");
	log_set_slot(0);
}

static void
test_text(void **state)
{
	char *out = capture(emit_text);
	assert_string_equal(
		out, "level=info proc=worker slot=3 job=88121 kind=thumbnail "
		     "attempt=2 msg=\"exit status 3, retry in 30s\"\n"
		     "level=warn proc=worker slot=3 msg=plain\n"
		     "level=error proc=worker slot=3 msg=\"quote \\\" "
		     "and\\nnewline\"\n");
	free(out);
}

static void
emit_json(void)
{
	setenv("JOURNAL_STREAM", "1:2", 1);
	log_init("supervisor", LOG_DEBUG, 1);
	log_debug("a \"b\"");
	log_set_json(0);
}

static void
test_json(void **state)
{
	char *out = capture(emit_json);
	assert_string_equal(out, "{\"level\":\"debug\",\"proc\":\"supervisor\","
				 "\"msg\":\"a \\\"b\\\"\"}\n");
	free(out);
}

static void
emit_plain(void)
{
	unsetenv("JOURNAL_STREAM");
	log_init("pgjob", LOG_INFO, 0);
	log_info("x");
}

static void
test_time_and_pid_outside_journald(void **state)
{
	char *out = capture(emit_plain);
	assert_int_equal(strncmp(out, "ts=20", 5), 0);
	assert_non_null(strstr(out, "Z level=info proc=pgjob pid="));
	free(out);
}

static void
test_level_parse(void **state)
{
	assert_int_equal(log_level_parse("debug"), LOG_DEBUG);
	assert_int_equal(log_level_parse("warn"), LOG_WARN);
	assert_int_equal(log_level_parse("loud"), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_text),
		cmocka_unit_test(test_json),
		cmocka_unit_test(test_time_and_pid_outside_journald),
		cmocka_unit_test(test_level_parse),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
