/*
 * test_handler_process_proto: protocol 1 of process handlers, line by
 * line: what pgjobd writes, and every check of what a program writes, with
 * the exact words the job's error carries.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cjson/cJSON.h>

#include "handlers/handler_process_proto.h"

static int
parse(const char *line, struct proto_msg *m, char **why)
{
	return handler_process_proto_parse(line, strlen(line), "resize", m,
					   why);
}

/* Asserts that line breaks the protocol with the message want. */
static void
assert_refused(const char *line, const char *want)
{
	struct proto_msg m;
	char *why = NULL;

	if (parse(line, &m, &why) == 0)
		fail_msg("accepted: %s", line);
	assert_non_null(why);
	if (strcmp(why, want) != 0)
		fail_msg("line %s\n got: %s\nwant: %s", line, why, want);
	free(why);
}

static void
test_writes(void **state)
{
	struct job j = {.id = 88121,
			.kind = "re\"size",
			.queue = "default",
			.payload = "{\"a\": \"x\\ny\",\n \"b\": 1}",
			.attempt = 2,
			.max_attempts = 5};
	struct buf b = {0};

	handler_process_proto_job(&b, &j, 1500, 1765008000000, 30000);
	handler_process_proto_cancel(&b, 88121, "time\nout");
	handler_process_proto_shutdown(&b);
	assert_string_equal(
		b.data,
		"{\"type\":\"job\",\"id\":88121,\"kind\":\"re\\\"size\","
		"\"queue\":\"default\",\"attempt\":2,\"max_attempts\":5,"
		"\"timeout_ms\":1500,\"deadline_ms\":1765008000000,"
		"\"lease_ms\":30000,\"payload\":{\"a\": \"x\\ny\",  \"b\": "
		"1}}\n"
		"{\"type\":\"cancel\",\"id\":88121,\"reason\":\"time\\nout\"}\n"
		"{\"type\":\"shutdown\"}\n");
	/* Each line one JSON object. */
	char *line = strtok(b.data, "\n");
	for (; line; line = strtok(NULL, "\n")) {
		cJSON *o = cJSON_Parse(line);
		assert_true(cJSON_IsObject(o));
		cJSON_Delete(o);
	}
	buf_free(&b);
}

static void
test_answers(void **state)
{
	struct proto_msg m;
	char *why = NULL;

	assert_int_equal(parse("{\"type\":\"hello\",\"protocol\":1,\"kinds\":"
			       "[\"x\",\"resize\"],\"name\":\"extra\"}",
			       &m, &why),
			 0);
	assert_int_equal(m.type, PROTO_HELLO);
	handler_process_proto_free(&m);

	assert_int_equal(parse("{\"type\":\"done\",\"id\":7,\"result\":{\"w\":"
			       " 256}}  ",
			       &m, &why),
			 0);
	assert_int_equal(m.type, PROTO_DONE);
	assert_int_equal(m.id, 7);
	assert_string_equal(m.result, "{\"w\":256}");
	handler_process_proto_free(&m);

	/* A result jsonb would refuse is dropped, not a violation. */
	assert_int_equal(
		parse("{\"type\":\"done\",\"id\":7,\"result\":\"a\\u0000b\"}",
		      &m, &why),
		0);
	assert_null(m.result);
	assert_true(m.result_refused);
	handler_process_proto_free(&m);
	/* An escaped backslash before u0000 is no NUL. */
	assert_int_equal(parse("{\"type\":\"done\",\"id\":7,\"result\":"
			       "\"a\\\\u0000\"}",
			       &m, &why),
			 0);
	assert_string_equal(m.result, "\"a\\\\u0000\"");
	handler_process_proto_free(&m);

	assert_int_equal(parse("{\"type\":\"failed\",\"id\":8,\"error\":"
			       "\"boom\\n\\n\",\"retry_in\":\"2m\"}",
			       &m, &why),
			 0);
	assert_int_equal(m.type, PROTO_FAILED);
	assert_string_equal(m.error, "boom");
	assert_int_equal(m.delay_ms, 120000);
	assert_false(m.dead);
	handler_process_proto_free(&m);

	assert_int_equal(parse("{\"type\":\"failed\",\"id\":8,\"error\":\"x\","
			       "\"retry_in\":null,\"dead\":true}",
			       &m, &why),
			 0);
	assert_int_equal(m.delay_ms, -1);
	assert_true(m.dead);
	handler_process_proto_free(&m);

	assert_int_equal(
		parse("{\"type\":\"snooze\",\"id\":9,\"in\":0.5}", &m, &why),
		0);
	assert_int_equal(m.type, PROTO_SNOOZE);
	assert_int_equal(m.delay_ms, 500);
	handler_process_proto_free(&m);

	assert_int_equal(parse("{\"type\":\"progress\",\"id\":9,\"progress\":"
			       "[1, 2]}",
			       &m, &why),
			 0);
	assert_string_equal(m.progress, "[1,2]");
	handler_process_proto_free(&m);
}

/* A long error keeps its end, as valid text. */
static void
test_long_error(void **state)
{
	size_t n = 40000;
	char *line = malloc(n + 100);
	struct proto_msg m;
	char *why;

	strcpy(line, "{\"type\":\"failed\",\"id\":1,\"error\":\"");
	size_t at = strlen(line);
	memset(line + at, 'a', n);
	strcpy(line + at + n - 4, "\\u00ffEND\"}");
	assert_int_equal(parse(line, &m, &why), 0);
	assert_int_equal(strlen(m.error), 3 + 16384);
	assert_memory_equal(m.error, "...", 3);
	assert_string_equal(m.error + strlen(m.error) - 5, "\xc3\xbf"
							   "END");
	handler_process_proto_free(&m);
	free(line);
}

static void
test_violations(void **state)
{
	assert_refused("not json", "a line that is not one JSON object (not "
				   "json)");
	assert_refused("[1]", "a line that is not one JSON object ([1])");
	assert_refused("{} {}", "a line that is not one JSON object ({} {})");
	assert_refused("\"\xff\x1b[31m\"",
		       "a line that is not one JSON object (\"?\x1b[31m\")");
	assert_refused("{\"id\":1}", "a message without a type");
	assert_refused("{\"type\":\"job\",\"id\":1}",
		       "unknown message type job");
	assert_refused("{\"type\":\"done\"}", "done without a numeric id");
	assert_refused("{\"type\":\"done\",\"id\":\"1\"}",
		       "done without a numeric id");
	assert_refused("{\"type\":\"done\",\"id\":1.5}",
		       "done without a numeric id");
	assert_refused("{\"type\":\"failed\",\"id\":1}",
		       "failed without an error string");
	assert_refused("{\"type\":\"failed\",\"id\":1,\"error\":\"x\","
		       "\"retry_in\":-1}",
		       "retry_in is not seconds or a duration");
	assert_refused("{\"type\":\"failed\",\"id\":1,\"error\":\"x\","
		       "\"dead\":1}",
		       "dead is not true or false");
	assert_refused("{\"type\":\"snooze\",\"id\":1,\"in\":\"soon\"}",
		       "snooze without \"in\" as seconds or a duration");
	assert_refused("{\"type\":\"hello\",\"protocol\":\"1\",\"kinds\":[]}",
		       "hello without a numeric protocol");
	assert_refused("{\"type\":\"hello\",\"protocol\":2,\"kinds\":[]}",
		       "protocol 2 is not one this pgjobd speaks (1)");
	assert_refused("{\"type\":\"hello\",\"protocol\":1}",
		       "hello without a list of kinds");
	assert_refused("{\"type\":\"hello\",\"protocol\":1,\"kinds\":[1]}",
		       "hello's kinds are not strings");
	assert_refused("{\"type\":\"hello\",\"protocol\":1,\"kinds\":[\"x\"]}",
		       "the program does not handle kind resize (its hello "
		       "does not list it)");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_writes),
		cmocka_unit_test(test_answers),
		cmocka_unit_test(test_long_error),
		cmocka_unit_test(test_violations),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
