/* Unit tests for text: the strict UTF-8 decoder and the escaping of what a
 * terminal would act on. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "common/text.h"

static void
test_char(void **state)
{
	static const struct {
		const char *s;
		size_t n;
		uint32_t cp;
	} cases[] = {
		{"a", 1, 'a'},
		{"\xc3\xa9", 2, 0xe9},
		{"\xc2\x9b", 2, 0x9b},
		{"\xe2\x82\xac", 3, 0x20ac},
		{"\xf0\x9f\x98\x80", 4, 0x1f600},
		{"\xf4\x8f\xbf\xbf", 4, 0x10ffff},
		{"", 0, 0},
		{"\x80", 0, 0}, /* a stray continuation byte */
		{"\xff", 0, 0},
		{"\xc0\xaf", 0, 0},	    /* overlong */
		{"\xe0\x80\xaf", 0, 0},	    /* overlong */
		{"\xed\xa0\x80", 0, 0},	    /* a surrogate */
		{"\xf4\x90\x80\x80", 0, 0}, /* past U+10FFFF */
		{"\xe2\x82", 0, 0},	    /* cut short by the end */
		{"\xc3"
		 "a",
		 0, 0},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint32_t cp = 0;
		size_t n = text_char(cases[i].s, &cp);
		if (n != cases[i].n || (n && cp != cases[i].cp))
			fail_msg("case %zu: %zu, U+%04X", i, n, (unsigned)cp);
	}
}

static void
test_safe(void **state)
{
	static const struct {
		const char *s, *keep, *blank, *want;
	} cases[] = {
		{"plain café €", NULL, NULL, "plain café €"},
		{"a\x1b[2Jb", NULL, NULL, "a\\x1b[2Jb"},
		{"\r\n\t\x07\x7f", NULL, NULL, "\\x0d\\x0a\\x09\\x07\\x7f"},
		{"\r\n\t\x07", "\n\t", NULL, "\\x0d\n\t\\x07"},
		{"\r\n\t\x07", NULL, "\n\r\t", "   \\x07"},
		{"\xc2\x9b"
		 "2J\xc2\x85",
		 NULL, NULL, "\\u009b2J\\u0085"},
		{"\xff\xfe"
		 "ok\xe2\x82",
		 NULL, NULL, "\\xff\\xfeok\\xe2\\x82"},
		{"", NULL, NULL, ""},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *s = text_safe(cases[i].s, cases[i].keep, cases[i].blank);
		assert_string_equal(s, cases[i].want);
		free(s);
	}
}

/* A quoted string's inside for logfmt and JSON: the same escapes, but a
 * byte that is not UTF-8 is \xXX in logfmt and U+FFFD in JSON, whose
 * parsers must get valid UTF-8 (the OTLP exporter's requests). */
static void
test_escape(void **state)
{
	static const struct {
		const char *s, *logfmt, *json;
	} cases[] = {
		{"plain é", "plain é", "plain é"},
		{"runs: a=\"1\"\tb=\\2 é end",
		 "runs: a=\\\"1\\\"\\tb=\\\\2 é end",
		 "runs: a=\\\"1\\\"\\tb=\\\\2 é end"},
		{"q\"uo\\te", "q\\\"uo\\\\te", "q\\\"uo\\\\te"},
		{"\n\r\t\x01\x1f\x7f", "\\n\\r\\t\\u0001\\u001f\\u007f",
		 "\\n\\r\\t\\u0001\\u001f\\u007f"},
		{"\xc2\x9b"
		 "2J",
		 "\\u009b2J", "\\u009b2J"},
		{"a\xff"
		 "b\xe2\x82",
		 "a\\xffb\\xe2\\x82", "a\\ufffdb\\ufffd\\ufffd"},
		{"", "", ""},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		for (int json = 0; json < 2; json++) {
			struct buf b = {0};
			text_escape_append(&b, cases[i].s, json);
			assert_string_equal(b.data ? b.data : "",
					    json ? cases[i].json
						 : cases[i].logfmt);
			buf_free(&b);
		}
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_char),
		cmocka_unit_test(test_safe),
		cmocka_unit_test(test_escape),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
