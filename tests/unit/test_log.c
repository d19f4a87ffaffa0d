/* Unit tests for log: logfmt and JSON lines, quoting, levels, the slot and
 * job fields. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"

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
	log_set_worker(2, 3);
	log_debug("hidden");
	struct log_job j = {88121, "thumbnail", 2};
	log_job(LOG_INFO, &j, "exit status %d, retry in %s", 3, "30s");
	log_warnx("plain");
	log_errorx("quote \" and\nnewline");
	log_set_worker(0, 0);
}

static void
test_text(void **state)
{
	char *out = capture(emit_text);
	assert_string_equal(
		out, "level=info proc=worker worker=2 slot=3 job=88121 "
		     "kind=thumbnail attempt=2 msg=\"exit status 3, retry in "
		     "30s\"\n"
		     "level=warn proc=worker worker=2 slot=3 msg=plain\n"
		     "level=error proc=worker worker=2 slot=3 msg=\"quote \\\" "
		     "and\\nnewline\"\n");
	free(out);
}

static void
emit_errno(void)
{
	setenv("JOURNAL_STREAM", "1:2", 1);
	log_init("supervisor", LOG_INFO, 0);
	errno = ENOENT;
	log_warn("open %s", "x.yaml");
	errno = ENOENT;
	log_warnx("no errno here");
}

/* log_warn() adds the error of the call that just failed; log_warnx()
 * does not. */
static void
test_warn_pair(void **state)
{
	char *out = capture(emit_errno);
	assert_string_equal(out,
			    "level=warn proc=supervisor msg=\"open x.yaml: "
			    "No such file or directory\"\n"
			    "level=warn proc=supervisor msg=\"no errno "
			    "here\"\n");
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

/*
 * Fails when text holds anything a terminal acts on: a control character
 * other than the line ends (C0, DEL, or C1 U+0080..U+009F as UTF-8), or a
 * byte that is not valid UTF-8.
 */
static void
assert_terminal_safe(const char *text)
{
	const unsigned char *p = (const unsigned char *)text;
	for (size_t i = 0; p[i];) {
		size_t n = p[i] < 0x80			  ? 1
			   : p[i] >= 0xc2 && p[i] <= 0xdf ? 2
			   : p[i] >= 0xe0 && p[i] <= 0xef ? 3
			   : p[i] >= 0xf0 && p[i] <= 0xf4 ? 4
							  : 0;
		for (size_t k = 1; k < n; k++)
			if ((p[i + k] & 0xc0) != 0x80)
				n = 0;
		if (n == 0 || (p[i] < 0x20 && p[i] != '\n') || p[i] == 0x7f ||
		    (p[i] == 0xc2 && p[i + 1] < 0xa0))
			fail_msg("byte 0x%02x at %zu in:\n%s", p[i], i, text);
		i += n;
	}
}

/* A kind and a message without spaces, full of what terminals obey. */
static void
emit_hostile(void)
{
	setenv("JOURNAL_STREAM", "1:2", 1);
	struct log_job j = {7, "k\x1b[2J\r\x07\xff", 1};
	log_init("worker", LOG_INFO, 0);
	log_job(LOG_INFO, &j, "%s",
		"a\rb\x07"
		"c\xff\xc2\x9b"
		"d\x7f"
		"caf\xc3\xa9");
	log_set_json(1);
	log_job(LOG_INFO, &j, "%s",
		"a\rb\x07"
		"c\xff\xc2\x9b"
		"d\x7f"
		"caf\xc3\xa9");
	log_set_json(0);
}

static void
test_control_characters(void **state)
{
	char *out = capture(emit_hostile);
	assert_terminal_safe(out);
	assert_string_equal(
		out,
		"level=info proc=worker job=7 kind=\"k\\u001b[2J\\r\\u0007"
		"\\xff\" attempt=1 msg=\"a\\rb\\u0007c\\xff\\u009bd"
		"\\u007fcafé\"\n"
		"{\"level\":\"info\",\"proc\":\"worker\",\"job\":7,\"kind\":"
		"\"k\\u001b[2J\\r\\u0007\\ufffd\",\"attempt\":1,\"msg\":"
		"\"a\\rb\\u0007c\\ufffd\\u009bd\\u007fcafé\"}\n");
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
		cmocka_unit_test(test_warn_pair),
		cmocka_unit_test(test_json),
		cmocka_unit_test(test_time_and_pid_outside_journald),
		cmocka_unit_test(test_control_characters),
		cmocka_unit_test(test_level_parse),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
