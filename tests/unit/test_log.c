/* Unit tests for log: logfmt and JSON lines, quoting, levels, the slot and
 * job fields, journald's priority prefixes. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

/* Makes stderr (as it is now: capture()'s pipe) journald's stream, as
 * systemd does: JOURNAL_STREAM holds its device and inode. */
static void
journal_here(void)
{
	struct stat st;
	char v[64];
	assert_int_equal(fstat(2, &st), 0);
	snprintf(v, sizeof(v), "%llu:%llu", (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino);
	setenv("JOURNAL_STREAM", v, 1);
}

/* tmpl with every "@PID" replaced by this process's pid (caller frees). */
static char *
with_pid(const char *tmpl)
{
	char pid[16];
	char *out = calloc(1, strlen(tmpl) * 2 + 1), *o = out;
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	for (const char *p = tmpl; *p;) {
		if (strncmp(p, "@PID", 4) == 0) {
			o = stpcpy(o, pid);
			p += 4;
		} else {
			*o++ = *p++;
		}
	}
	return out;
}

static void
assert_lines(char *out, const char *tmpl)
{
	char *want = with_pid(tmpl);
	assert_string_equal(out, want);
	free(want);
	free(out);
}

static void
emit_text(void)
{
	journal_here(); /* no ts= */
	log_init("worker", LOG_INFO, 0);
	log_set_worker(2, 3);
	log_debug("hidden");
	struct log_job j = {88121, "thumbnail", 2};
	log_job(LOG_INFO, &j, "exit status %d, retry in %s", 3, "30s");
	log_warnx("plain");
	log_errorx("quote \" and\nnewline");
	log_set_worker(0, 0);
}

/* With databases:, a worker's lines name its database before its number. */
static void
emit_database(void)
{
	journal_here();
	log_init("worker", LOG_INFO, 0);
	log_set_database("eu-1");
	log_set_worker(2, 3);
	log_warnx("plain");
	log_set_database(NULL);
	log_set_worker(0, 0);
}

static void
test_database(void **state)
{
	assert_lines(capture(emit_database),
		     "<4>level=warn proc=worker pid=@PID db=eu-1 worker=2 "
		     "slot=3 msg=plain\n");
}

static void
test_text(void **state)
{
	assert_lines(capture(emit_text),
		     "<6>level=info proc=worker pid=@PID worker=2 slot=3 "
		     "job=88121 kind=thumbnail attempt=2 msg=\"exit status 3, "
		     "retry in 30s\"\n"
		     "<4>level=warn proc=worker pid=@PID worker=2 slot=3 "
		     "msg=plain\n"
		     "<3>level=error proc=worker pid=@PID worker=2 slot=3 "
		     "msg=\"quote \\\" and\\nnewline\"\n");
}

static void
emit_errno(void)
{
	journal_here();
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
	assert_lines(
		capture(emit_errno),
		"<4>level=warn proc=supervisor pid=@PID msg=\"open x.yaml: "
		"No such file or directory\"\n"
		"<4>level=warn proc=supervisor pid=@PID msg=\"no errno "
		"here\"\n");
}

static void
emit_json(void)
{
	journal_here();
	log_init("supervisor", LOG_DEBUG, 1);
	log_debug("a \"b\"");
	log_set_json(0);
}

static void
test_json(void **state)
{
	assert_lines(capture(emit_json),
		     "<7>{\"level\":\"debug\",\"proc\":\"supervisor\","
		     "\"pid\":@PID,\"msg\":\"a \\\"b\\\"\"}\n");
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
	journal_here();
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
	assert_lines(out,
		     "<6>level=info proc=worker pid=@PID job=7 "
		     "kind=\"k\\u001b[2J\\r\\u0007"
		     "\\xff\" attempt=1 msg=\"a\\rb\\u0007c\\xff\\u009bd"
		     "\\u007fcafé\"\n"
		     "<6>{\"level\":\"info\",\"proc\":\"worker\",\"pid\":@PID,"
		     "\"job\":7,\"kind\":"
		     "\"k\\u001b[2J\\r\\u0007\\ufffd\",\"attempt\":1,\"msg\":"
		     "\"a\\rb\\u0007c\\ufffd\\u009bd\\u007fcafé\"}\n");
}

/* JOURNAL_STREAM set, but naming another file than stderr (a wrapper
 * redirected it), or not "<dev>:<ino>": not journald, the plain format. */
static void
emit_not_journal(void)
{
	struct stat st;
	char v[64];
	assert_int_equal(stat("/", &st), 0);
	snprintf(v, sizeof(v), "%llu:%llu", (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino);
	setenv("JOURNAL_STREAM", v, 1);
	log_init("worker", LOG_INFO, 0);
	log_warnx("elsewhere");
	setenv("JOURNAL_STREAM", "garbage", 1);
	log_init("worker", LOG_INFO, 0);
	log_warnx("garbage");
}

static void
test_journal_stream_not_matching(void **state)
{
	char *out = capture(emit_not_journal);
	char *second = strchr(out, '\n') + 1;
	assert_int_equal(strncmp(out, "ts=20", 5), 0);
	assert_non_null(strstr(out, "Z level=warn proc=worker pid="));
	assert_int_equal(strncmp(second, "ts=20", 5), 0);
	assert_null(strchr(out, '<'));
	free(out);
}

/* stderr to a pipe whose read end does not block; restore_stderr() puts
 * it back.  journald's format: lines without a time, exact to compare. */
static int saved_stderr = -1;

static int
pipe_stderr(void)
{
	int p[2];
	assert_int_equal(pipe(p), 0);
	assert_int_equal(fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
	saved_stderr = dup(2);
	dup2(p[1], 2);
	close(p[1]);
	journal_here();
	log_init("worker", LOG_INFO, 0);
	return p[0];
}

static void
restore_stderr(int rd)
{
	dup2(saved_stderr, 2);
	close(saved_stderr);
	close(rd);
	unsetenv("JOURNAL_STREAM");
}

/* What the pipe holds now ("" for nothing; caller frees). */
static char *
drain(int rd)
{
	char *out = calloc(1, 65536);
	size_t n = 0;
	ssize_t r;
	while ((r = read(rd, out + n, 65535 - n)) > 0)
		n += (size_t)r;
	return out;
}

/* Buffered, a worker's loop: nothing is written until log_flush(); a line
 * at error writes the waiting lines, then itself, in their order; turning
 * it off writes what waits, and the lines after it go out one by one. */
static void
test_buffered_until_flush(void **state)
{
	int rd = pipe_stderr();
	log_set_buffered(1);
	log_info("one");
	log_warnx("two");
	assert_lines(drain(rd), "");
	log_flush();
	assert_lines(drain(rd), "<6>level=info proc=worker pid=@PID msg=one\n"
				"<4>level=warn proc=worker pid=@PID msg=two\n");
	log_info("three");
	log_errorx("four");
	assert_lines(drain(rd),
		     "<6>level=info proc=worker pid=@PID msg=three\n"
		     "<3>level=error proc=worker pid=@PID msg=four\n");
	log_info("five");
	log_set_buffered(0);
	assert_lines(drain(rd),
		     "<6>level=info proc=worker pid=@PID msg=five\n");
	log_info("six");
	assert_lines(drain(rd), "<6>level=info proc=worker pid=@PID msg=six\n");
	restore_stderr(rd);
}

/* More than one write's worth (4096 bytes) without a flush, 60 lines of
 * about 90 bytes: one write went out, of whole lines and at most 4096
 * bytes, and nothing is lost or doubled. */
static void
test_buffered_writes_whole_lines(void **state)
{
	int rd = pipe_stderr();
	log_set_buffered(1);
	for (int i = 0; i < 60; i++)
		log_info("line %03d of sixty, each about ninety bytes long", i);
	char *first = drain(rd);
	size_t n = strlen(first);
	assert_true(n > 0 && n <= 4096);
	assert_int_equal(first[n - 1], '\n');
	log_set_buffered(0);
	char *rest = drain(rd);
	int lines = 0;
	for (const char *s = first; (s = strchr(s, '\n')); s++)
		lines++;
	for (const char *s = rest; (s = strchr(s, '\n')); s++)
		lines++;
	assert_int_equal(lines, 60);
	assert_non_null(strstr(first, "msg=\"line 000 of"));
	assert_non_null(strstr(rest, "msg=\"line 059 of"));
	free(first);
	free(rest);
	restore_stderr(rd);
}

/* fork(): the parent's waiting lines are written before it, once; the
 * child writes its own at once, with its own pid. */
static void
test_fork_writes_before(void **state)
{
	int rd = pipe_stderr();
	log_set_buffered(1);
	log_info("parent");
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		log_info("child");
		_exit(0);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	char want[256];
	snprintf(want, sizeof(want),
		 "<6>level=info proc=worker pid=@PID msg=parent\n"
		 "<6>level=info proc=worker pid=%d msg=child\n",
		 (int)pid);
	assert_lines(drain(rd), want);
	log_set_buffered(0);
	assert_lines(drain(rd), "");
	restore_stderr(rd);
}

/* A worker that dies of a fatal signal (abort(), a segfault) writes the
 * lines it had not yet written, then dies of the signal as before. */
static void
test_fatal_signal_writes_pending(void **state)
{
	int rd = pipe_stderr();
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct rlimit none = {0, 0};
		setrlimit(RLIMIT_CORE, &none);
		log_set_buffered(1);
		log_warnx("the last words");
		abort();
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGABRT);
	char *out = drain(rd);
	assert_non_null(strstr(out, "msg=\"the last words\"\n"));
	free(out);
	restore_stderr(rd);
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
		cmocka_unit_test(test_database),
		cmocka_unit_test(test_warn_pair),
		cmocka_unit_test(test_json),
		cmocka_unit_test(test_time_and_pid_outside_journald),
		cmocka_unit_test(test_journal_stream_not_matching),
		cmocka_unit_test(test_control_characters),
		cmocka_unit_test(test_level_parse),
		cmocka_unit_test(test_buffered_until_flush),
		cmocka_unit_test(test_buffered_writes_whole_lines),
		cmocka_unit_test(test_fork_writes_before),
		cmocka_unit_test(test_fatal_signal_writes_pending),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
