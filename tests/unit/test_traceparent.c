/* Unit tests for trace: the W3C traceparent check, which must take what
 * pgjob.trace_context() takes, an attempt's traceparent, and the span ids
 * of the exported spans. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/trace.h"

#define TP "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

static void
test_valid(void **state)
{
	assert_true(trace_valid(TP));
	assert_true(trace_valid(
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-ff"));
	static const char *const bad[] = {
		NULL,
		"",
		"01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
		"00-00000000000000000000000000000000-b7ad6b7169203331-01",
		"00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-1",
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-",
		"00-0af7651916cd43dd8448eb211c80319c_b7ad6b7169203331-01",
		"00-0af7651916cd43dd8448eb211c80319g-b7ad6b7169203331-01",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		assert_false(trace_valid(bad[i]));
}

/* The job's trace id and flags, a new span id each time. */
static void
test_attempt(void **state)
{
	char a[TRACE_LEN + 1], b[TRACE_LEN + 1];
	assert_true(trace_attempt(TP, a));
	assert_true(trace_attempt(TP, b));
	assert_true(trace_valid(a));
	assert_int_equal(memcmp(a, TP, 36), 0);
	assert_string_equal(a + 52, "-01");
	assert_memory_not_equal(a + 36, TP + 36, 16);
	assert_memory_not_equal(a + 36, b + 36, 16);
	assert_false(trace_attempt(NULL, a));
	assert_string_equal(a, "");
	assert_false(trace_attempt("garbage", a));
	assert_string_equal(a, "");
}

/* Span ids: 16 lowercase hex digits; the enqueue's the same for the same
 * trace and job, another for another job or trace. */
static void
test_span_ids(void **state)
{
	char a[17], b[17], c[17], d[17];
	trace_span_id(a);
	trace_span_id(b);
	assert_int_equal(strlen(a), 16);
	assert_int_equal(strspn(a, "0123456789abcdef"), 16);
	assert_string_not_equal(a, b);
	trace_enqueue_span_id("0af7651916cd43dd8448eb211c80319c", 42, a);
	trace_enqueue_span_id("0af7651916cd43dd8448eb211c80319c", 42, b);
	trace_enqueue_span_id("0af7651916cd43dd8448eb211c80319c", 43, c);
	trace_enqueue_span_id("1af7651916cd43dd8448eb211c80319c", 42, d);
	assert_int_equal(strspn(a, "0123456789abcdef"), 16);
	assert_string_not_equal(a, "0000000000000000");
	assert_string_equal(a, b);
	assert_string_not_equal(a, c);
	assert_string_not_equal(a, d);
}

/* A child of fork() does not repeat its parent's span ids (the worker
 * forks from the supervisor, and the ids come from a generator seeded once
 * per process): the child's next ids, written to a pipe, are none of the
 * parent's next ones; and 10,000 of a process's are all distinct. */
static void
test_span_ids_after_fork(void **state)
{
	enum { N = 64, MANY = 10000 };
	char mine[N][17], theirs[N][17];
	char first[17];
	trace_span_id(first); /* seeded here, before the fork */
	int fd[2];
	assert_int_equal(pipe(fd), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char id[17];
		for (int i = 0; i < N; i++) {
			trace_span_id(id);
			if (write(fd[1], id, 16) != 16)
				_exit(1);
		}
		_exit(0);
	}
	close(fd[1]);
	for (int i = 0; i < N; i++)
		trace_span_id(mine[i]);
	for (int i = 0; i < N; i++) {
		size_t got = 0;
		while (got < 16) {
			ssize_t r = read(fd[0], theirs[i] + got, 16 - got);
			assert_true(r > 0);
			got += (size_t)r;
		}
		theirs[i][16] = '\0';
	}
	close(fd[0]);
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	for (int i = 0; i < N; i++)
		for (int j = 0; j < N; j++)
			assert_string_not_equal(mine[i], theirs[j]);
	static char many[MANY][17];
	for (int i = 0; i < MANY; i++)
		trace_span_id(many[i]);
	qsort(many, MANY, 17, (int (*)(const void *, const void *))strcmp);
	for (int i = 1; i < MANY; i++)
		assert_string_not_equal(many[i - 1], many[i]);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid),
		cmocka_unit_test(test_attempt),
		cmocka_unit_test(test_span_ids),
		cmocka_unit_test(test_span_ids_after_fork),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
