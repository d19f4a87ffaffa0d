/* Unit tests for yaml: the guards that keep a load linear in the size of
 * the text (flow nesting, anchors and aliases, duplicate keys), with the
 * positions their errors report. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "common/yaml.h"

/* before, then n times unit, then after, as a new string. */
static char *
repeat(const char *before, const char *unit, size_t n, const char *after)
{
	struct buf b = {0};
	buf_append(&b, before, strlen(before));
	for (size_t i = 0; i < n; i++)
		buf_append(&b, unit, strlen(unit));
	buf_append(&b, after, strlen(after));
	return b.data;
}

/*
 * Loads text; want is the one error it must report, or NULL for none.
 */
static void
load(const char *text, const char *want)
{
	struct yaml_doc d;
	char **msgs;
	int rc = yaml_doc_load(&d, "t.yaml", text, strlen(text));
	size_t n = yaml_doc_take_errors(&d, &msgs);

	if (!want && (rc != 0 || n != 0))
		fail_msg("%.40s...: %s", text, n ? msgs[0] : "failed");
	if (want && (rc == 0 || n != 1 || strcmp(msgs[0], want) != 0))
		fail_msg("%.40s...: want %s, got %s", text, want,
			 n ? msgs[0] : "no error");
	for (size_t i = 0; i < n; i++)
		free(msgs[i]);
	free(msgs);
	yaml_doc_release(&d);
}

#define DEEP "syntax: collections nested more than 64 deep"

/*
 * Flow collections 65 deep are refused at the 65th, whatever comes before
 * them: an apostrophe in a plain scalar, or a quote in a block scalar or a
 * comment, starts nothing.
 */
static void
test_deep_flow_after_quotes(void **state)
{
	static const struct {
		const char *before;
		int line, column;
	} cases[] = {
		{"note: it's\ndeep: ", 2, 71},
		{"note: it's [x]\nlist:\n  - don't\n  - ", 4, 69},
		{"a: \"x\\\\\"\nb: ", 2, 68},
		{"a: 'it''s'\nb: ", 2, 68},
		{"a: |\n  it's\nb: ", 3, 68},
		{"a: >-\n  \"open\n\nb: ", 4, 68},
		{"# it's\nb: ", 2, 68},
		{"a: b # it's\nc: ", 2, 68},
		{"k: x'y\nz: ", 2, 68},
		{"", 1, 65},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char want[128];
		snprintf(want, sizeof(want), "t.yaml:%d:%d: " DEEP,
			 cases[i].line, cases[i].column);
		char *text = repeat(cases[i].before, "[", 100, "\n");
		load(text, want);
		free(text);
		/* 64 deep is fine. */
		text = repeat(cases[i].before, "[", 64, "");
		char *closed = repeat(text, "]", 64, "\n");
		load(closed, NULL);
		free(closed);
		free(text);
	}
}

/* Brackets in a quoted or plain scalar are text, not nesting. */
static void
test_brackets_in_scalars(void **state)
{
	static const char *const units[][2] = {
		{"a: '", "'\n"},    {"a: \"", "\"\n"},	{"a: x", "\n"},
		{"a: |\n  ", "\n"}, {"# ", "\nb: 1\n"},
	};
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		char *text = repeat(units[i][0], "[{", 100, units[i][1]);
		load(text, NULL);
		free(text);
	}
}

/*
 * A million brackets, on one line or many, are refused at once: the check
 * reads no further than the 65th (the test would time out otherwise).
 */
static void
test_deep_flow_huge(void **state)
{
	char *text = repeat("a: ", "[", 1000000, "\n");
	load(text, "t.yaml:1:68: " DEEP);
	free(text);
	text = repeat("a:\n", "  [\n", 1000000, "");
	load(text, "t.yaml:66:3: " DEEP);
	free(text);
}

/*
 * libyaml looks every anchor and alias up in a list of the anchors so far:
 * more than 1000 anchors, or 10000 aliases, are refused where they pass
 * the limit.
 */
static void
test_anchors_and_aliases(void **state)
{
	struct buf b = {0};
	for (int i = 0; i < 1001; i++)
		buf_appendf(&b, "a%d: &x%d 1\n", i, i);
	load(b.data, "t.yaml:1001:8: syntax: more than 1000 anchors");
	buf_free(&b);

	buf_appendf(&b, "a: &x 1\nb:\n");
	for (int i = 0; i < 10001; i++)
		buf_appendf(&b, "  - *x\n");
	load(b.data, "t.yaml:10003:5: syntax: more than 10000 aliases");
	buf_free(&b);

	buf_appendf(&b, "a: &x 1\nb:\n");
	for (int i = 0; i < 10000; i++)
		buf_appendf(&b, "  - *x\n");
	load(b.data, NULL);
	buf_free(&b);
}

#define NKEYS 100000

/*
 * The duplicate-key check of a map of NKEYS keys makes O(n log n) key
 * comparisons, not n^2 / 2 (5e9 here, minutes of CPU), and reports the
 * duplicates where they are, in document order.
 */
static void
test_duplicate_keys_linear(void **state)
{
	struct buf b = {0};
	struct yaml_doc d;
	char **msgs;

	for (int i = 0; i < NKEYS; i++)
		buf_appendf(&b, "k%d: %d\n", i, i);
	buf_appendf(&b, "k17: again\nk5: again\n\"k17\": thrice\n");
	assert_int_equal(yaml_doc_load(&d, "t.yaml", b.data, b.len), 0);
	assert_int_equal(d.root->n, NKEYS + 3);
	size_t ok = 0;
	for (size_t i = 0; i < d.root->n; i++)
		ok += yaml_entry_ok(&d, d.root, i, "");
	assert_int_equal(ok, NKEYS);
	if (d.key_compares > 40 * (size_t)NKEYS)
		fail_msg("%zu key comparisons for %d keys", d.key_compares,
			 NKEYS);
	assert_int_equal(yaml_doc_take_errors(&d, &msgs), 3);
	assert_string_equal(msgs[0], "t.yaml:100001:1: k17: duplicate key "
				     "\"k17\"");
	assert_string_equal(msgs[1], "t.yaml:100002:1: k5: duplicate key "
				     "\"k5\"");
	assert_string_equal(msgs[2], "t.yaml:100003:1: k17: duplicate key "
				     "\"k17\"");
	for (int i = 0; i < 3; i++)
		free(msgs[i]);
	free(msgs);
	yaml_doc_release(&d);
	buf_free(&b);
}

/* Keys that differ only after a NUL, or that are not strings, are not
 * duplicates; the same key in two maps is not either. */
static void
test_duplicate_keys_exact(void **state)
{
	static const char text[] = "a: {\"x\\0y\": 1, \"x\\0z\": 2, x: 3}\n"
				   "b: {x: 1, [x]: 2, [x]: 3, y: 4}\n";
	struct yaml_doc d;
	char **msgs;

	assert_int_equal(yaml_doc_load(&d, "t.yaml", text, strlen(text)), 0);
	const struct ynode *a = d.root->pairs[0].value;
	const struct ynode *bm = d.root->pairs[1].value;
	for (size_t i = 0; i < a->n; i++)
		assert_true(yaml_entry_ok(&d, a, i, "a"));
	assert_true(yaml_entry_ok(&d, bm, 0, "b"));
	assert_false(yaml_entry_ok(&d, bm, 1, "b"));
	assert_false(yaml_entry_ok(&d, bm, 2, "b"));
	assert_true(yaml_entry_ok(&d, bm, 3, "b"));
	assert_int_equal(yaml_doc_take_errors(&d, &msgs), 2);
	assert_string_equal(msgs[0], "t.yaml:2:11: b: keys must be strings");
	assert_string_equal(msgs[1], "t.yaml:2:19: b: keys must be strings");
	for (int i = 0; i < 2; i++)
		free(msgs[i]);
	free(msgs);
	yaml_doc_release(&d);
}

/*
 * Messages quote keys and values: what a terminal would act on shows as an
 * escape, the rest (UTF-8 included) as it is.
 */
static void
test_error_text(void **state)
{
	static const char text[] = "\"caf\u00e9\\e[2J\\r\\x9b\": 1\n"
				   "\"caf\u00e9\\e[2J\\r\\x9b\": 2\n";
	struct yaml_doc d;
	char **msgs;

	assert_int_equal(yaml_doc_load(&d, "t.yaml", text, strlen(text)), 0);
	assert_true(yaml_entry_ok(&d, d.root, 0, ""));
	assert_false(yaml_entry_ok(&d, d.root, 1, ""));
	assert_int_equal(yaml_doc_take_errors(&d, &msgs), 1);
	assert_string_equal(
		msgs[0], "t.yaml:2:1: caf\xc3\xa9\\x1b[2J\\x0d\\u009b: "
			 "duplicate key \"caf\xc3\xa9\\x1b[2J\\x0d\\u009b\"");
	free(msgs[0]);
	free(msgs);
	yaml_doc_release(&d);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_deep_flow_after_quotes),
		cmocka_unit_test(test_brackets_in_scalars),
		cmocka_unit_test(test_deep_flow_huge),
		cmocka_unit_test(test_anchors_and_aliases),
		cmocka_unit_test(test_duplicate_keys_linear),
		cmocka_unit_test(test_duplicate_keys_exact),
		cmocka_unit_test(test_error_text),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
