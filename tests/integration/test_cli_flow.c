/*
 * Integration: the flow control commands of pgjob (pause, resume, limits),
 * the FLOW column of status and enqueue's --limit-key and --cost, against
 * a migrated database whose rows each test builds with SQL.  What the
 * commands did is read back from pgjob.limits and the other tables, not
 * only from what they print.
 */
#include "testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

static char *ci;

static int
setup(void **state)
{
	setenv("PGTZ", "UTC", 1);
	ci = t_db_migrated("t_cli_flow");
	return 0;
}

static int
teardown(void **state)
{
	free(ci);
	return 0;
}

/* Every test starts from empty tables and one known queue, exports. */
static int
empty(void **state)
{
	PGconn *c = t_connect(ci);
	t_exec(c, "truncate pgjob.jobs, pgjob.limits, pgjob.queues,"
		  " pgjob.limit_weights, pgjob.limit_keys restart identity");
	t_exec(c, "insert into pgjob.queues (name) values ('exports')");
	PQfinish(c);
	return 0;
}

/* Runs `pgjob --database ci ARGS...` (args NULL-terminated); the command
 * must succeed with nothing on stderr. */
static void
pgjob_ok(struct t_run *r, const char *const *args)
{
	t_pgjobv(r, ci, args);
	if (r->status != 0 || *r->err)
		fail_msg("pgjob %s: exit %d: %s", args[0], r->status, r->err);
}

/* Runs pgjob ARGS...; asserts its exit status, stdout and stderr. */
static void
expect(int status, const char *out, const char *err, const char *const *args)
{
	struct t_run r;
	t_pgjobv(&r, ci, args);
	if (r.status != status || strcmp(r.out, out) || strcmp(r.err, err))
		fail_msg("pgjob %s: exit %d\nstdout: %s\nstderr: %s\n"
			 "wanted exit %d\nstdout: %s\nstderr: %s",
			 args[0], r.status, r.out, r.err, status, out, err);
	t_run_free(&r);
}

/*
 * The first line of text that, with runs of blanks made one space and the
 * ends trimmed, starts with prefix; as a new string, or NULL.
 */
static char *
line_of(const char *text, const char *prefix)
{
	for (const char *p = text; *p;) {
		size_t n = strcspn(p, "\n");
		char *line = calloc(1, n + 1), *o = line;
		for (size_t i = 0; i < n; i++) {
			int blank = p[i] == ' ' || p[i] == '\t';
			if (blank && (o == line || o[-1] == ' '))
				continue;
			*o++ = blank ? ' ' : p[i];
		}
		if (o > line && o[-1] == ' ')
			o[-1] = '\0';
		if (strncmp(line, prefix, strlen(prefix)) == 0)
			return line;
		free(line);
		p += n + (p[n] == '\n');
	}
	return NULL;
}

/* Asserts that text has a line that reads exactly want (blanks folded). */
static void
assert_line(const char *text, const char *want)
{
	char *line = line_of(text, want);
	if (!line || strcmp(line, want) != 0)
		fail_msg("no line \"%s\" in:\n%s", want, text);
	free(line);
}

static void
test_pause_resume(void **state)
{
	PGconn *c = t_connect(ci);
	const char *pause[] = {"pause", "exports", NULL};
	expect(0, "paused queue exports\n", "", pause);
	t_assert_value(c, "true|{}",
		       "select paused || '|' || paused_kinds::text"
		       " from pgjob.limits where queue = 'exports'");

	const char *kind[] = {"pause", "exports", "--kind", "report", NULL};
	expect(0, "paused kind report of queue exports\n", "", kind);
	t_assert_value(c, "true|{report}",
		       "select paused || '|' || paused_kinds::text"
		       " from pgjob.limits where queue = 'exports'");

	const char *resume_kind[] = {"resume", "exports", "--kind", "report",
				     NULL};
	expect(0, "resumed kind report of queue exports\n", "", resume_kind);
	t_assert_value(c, "true|{}",
		       "select paused || '|' || paused_kinds::text"
		       " from pgjob.limits where queue = 'exports'");

	/* A kind paused on its own stays paused when the queue resumes:
	 * each pause has its own resume. */
	const char *resume[] = {"resume", "exports", NULL};
	expect(0, "paused kind report of queue exports\n", "", kind);
	expect(0, "resumed queue exports\n", "", resume);
	t_assert_value(c, "false|{report}",
		       "select paused || '|' || paused_kinds::text"
		       " from pgjob.limits where queue = 'exports'");
	expect(0, "resumed kind report of queue exports\n", "", resume_kind);
	/* Nothing left to limit: the row is gone. */
	assert_int_equal(t_long(c, "select count(*) from pgjob.limits"), 0);
	PQfinish(c);
}

/* A queue that no config defines and no job uses is refused, with the
 * known queues as the hint; a bad kind with the function's message. */
static void
test_pause_refused(void **state)
{
	const char *unknown[] = {"pause", "exprots", NULL};
	expect(1, "",
	       "pgjob: pause: 42704: unknown queue 'exprots'\n"
	       "pgjob: hint: Known queues: 'exports'.  A queue is known once "
	       "a worker whose config defines it has connected, or a job "
	       "uses it.\n",
	       unknown);
	const char *resume[] = {"resume", "exprots", "--kind", "k", NULL};
	struct t_run r;
	t_pgjobv(&r, ci, resume);
	assert_int_equal(r.status, 1);
	assert_non_null(strstr(r.err, "pgjob: resume: 42704: unknown queue "
				      "'exprots'\npgjob: hint: Known queues: "
				      "'exports'."));
	t_run_free(&r);
	const char *empty_kind[] = {"pause", "exports", "--kind", "", NULL};
	expect(1, "",
	       "pgjob: pause: 22023: pgjob.pause: the kind must not be "
	       "empty\n",
	       empty_kind);

	PGconn *c = t_connect(ci);
	assert_int_equal(t_long(c, "select count(*) from pgjob.limits"), 0);
	PQfinish(c);
}

/* A job of queue exports that runs under a lease of an hour; its id. */
static long long
running_job(PGconn *c, const char *kind)
{
	return t_long(c,
		      "insert into pgjob.jobs (queue, kind, state, attempts,"
		      " locked_by, locked_until, lease_token) values"
		      " ('exports', '%s', 'running', 1, 'vm:1',"
		      "  now() + interval '1 hour', 1) returning id",
		      kind);
}

/*
 * pause --wait returns once the running job has finished, having said
 * how many still ran; jobs of other kinds, and jobs whose lease has
 * expired (their worker is gone), are not waited for.
 */
static void
test_pause_wait(void **state)
{
	PGconn *c = t_connect(ci);
	long long id = running_job(c, "report");
	running_job(c, "other");
	t_exec(c, "insert into pgjob.jobs (queue, kind, state, locked_until)"
		  " values ('exports', 'report', 'running',"
		  "  now() - interval '1 minute')");
	const char *argv[] = {t_bin("pgjob"), "--database", ci,
			      "pause",	      "exports",    "--kind",
			      "report",	      "--wait",	    NULL};
	pid_t pid = t_spawn(t_log("wait"), NULL, argv);
	t_wait_log("wait",
		   "1 job of kind report of queue exports still "
		   "running",
		   1, 10);
	/* In its loop now, which it leaves only once it sees no such job
	 * running ("no job ... is running", below): the update's doing, not
	 * the end of a fixed wait. */
	assert_true(t_alive(pid));
	t_exec(c,
	       "update pgjob.jobs set state = 'done', finished_at = now(),"
	       " locked_by = null, locked_until = null where id = %lld",
	       id);
	assert_int_equal(t_wait(pid, 10), 0);
	char *log = t_read_file(t_log("wait"));
	assert_non_null(strstr(log, "paused kind report of queue exports\n"));
	assert_non_null(strstr(log, "no job of kind report of queue exports "
				    "is running\n"));
	assert_null(strstr(log, "pgjob:"));
	free(log);
	PQfinish(c);
}

/* With --timeout, a job that does not end makes pause --wait fail; the
 * queue stays paused. */
static void
test_pause_wait_timeout(void **state)
{
	PGconn *c = t_connect(ci);
	running_job(c, "report");
	struct t_run r;
	const char *args[] = {"pause",	   "exports", "--wait",
			      "--timeout", "1s",      NULL};
	t_pgjobv(&r, ci, args);
	assert_int_equal(r.status, 1);
	assert_non_null(strstr(r.out, "paused queue exports\n"
				      "1 job of queue exports still "
				      "running\n"));
	assert_string_equal(r.err, "pgjob: pause: 1 job of queue exports "
				   "still running after 1s (it stays paused: "
				   "`pgjob resume` undoes that)\n");
	t_run_free(&r);
	t_assert_value(c, "t", "select paused from pgjob.limits");

	/* Nothing running: it returns at once. */
	t_exec(c, "update pgjob.jobs set state = 'done', finished_at = now()");
	const char *none[] = {"pause",	   "exports", "--wait",
			      "--timeout", "0s",      NULL};
	pgjob_ok(&r, none);
	assert_string_equal(r.out, "paused queue exports\n"
				   "no job of queue exports is running\n");
	t_run_free(&r);
	PQfinish(c);
}

/* What `pgjob limits` shows of the row pgjob.limits has for exports. */
static char *
limits_row(PGconn *c)
{
	return t_value(c, "select concat_ws(' ', global_concurrency,"
			  " per_key_concurrency, rate, rate_period_ms, burst,"
			  " fair, source) from pgjob.limits"
			  " where queue = 'exports'");
}

/*
 * --set types each value by its spelling (numbers, strings, true/false,
 * none for null), which the schema accepts for the right keys only: the
 * round trip through pgjob.set_limits() and pgjob.queue_limits.
 */
static void
test_limits_set(void **state)
{
	PGconn *c = t_connect(ci);
	const char *none[] = {"limits", NULL};
	expect(0, "no queue has limits or is paused\n", "", none);
	const char *one[] = {"limits", "exports", NULL};
	expect(0, "queue exports has no limits and is not paused\n", "", one);

	const char *set[] = {"limits", "exports",
			     "--set",  "global_concurrency=5",
			     "--set",  "rate=10/s",
			     "--set",  "fair=true",
			     "--set",  "per_key_concurrency=3",
			     "--set",  "per_key_concurrency=2",
			     NULL};
	expect(0,
	       "limits of queue exports: global_concurrency=5 "
	       "per_key_concurrency=2 rate=10/s burst=10 fair=true\n",
	       "", set);
	char *row = limits_row(c);
	assert_string_equal(row, "5 2 10 1000 t sql");
	free(row);

	struct t_run r;
	pgjob_ok(&r, none);
	assert_line(r.out, "QUEUE PAUSED LIMITS SOURCE RUNNING TOKENS "
			   "THROTTLED UNTIL");
	assert_line(r.out, "exports no global_concurrency=5 "
			   "per_key_concurrency=2 rate=10/s burst=10 "
			   "fair=true sql 0 10.0 -");
	t_run_free(&r);

	/* Keys left out keep their values; none removes one. */
	const char *more[] = {
		"limits",   "exports",	  "--set",
		"burst=20", "--set",	  "per_key_concurrency=none",
		"--set",    "fair=false", NULL};
	expect(0,
	       "limits of queue exports: global_concurrency=5 rate=10/s "
	       "burst=20\n",
	       "", more);
	const char *json[] = {"limits", "exports", "--json", NULL};
	pgjob_ok(&r, json);
	assert_string_equal(r.out,
			    "[{\"queue\":\"exports\",\"paused\":false,"
			    "\"paused_kinds\":[],\"global_concurrency\":5,"
			    "\"per_key_concurrency\":null,\"rate\":\"10/s\","
			    "\"burst\":20,\"rate_per_key\":null,"
			    "\"burst_per_key\":null,\"fair\":false,"
			    "\"source\":\"sql\",\"running\":0,"
			    "\"tokens\":20.000,\"throttled_until\":null}]\n");
	t_run_free(&r);

	/* Nothing left: the row goes, and the queue is as before. */
	const char *off[] = {
		"limits", "exports",	"--set", "rate=none",
		"--set",  "burst=none", "--set", "global_concurrency=none",
		NULL};
	expect(0, "limits of queue exports: none\n", "", off);
	assert_int_equal(t_long(c, "select count(*) from pgjob.limits"), 0);
	expect(0, "queue exports has no limits and is not paused\n", "", one);
	const char *empty_json[] = {"limits", "--json", NULL};
	expect(0, "[]\n", "", empty_json);
	PQfinish(c);
}

/* What the schema refuses, it says why, and nothing changes. */
static void
test_limits_refused(void **state)
{
	static const struct {
		const char *args[6];
		const char *err;
	} cases[] = {
		{{"limits", "exports", "--set", "rate=10/x"},
		 "pgjob: limits: 22023: rate \"10/x\": unknown unit \"x\" "
		 "(ms, s, min, h, d)\n"},
		{{"limits", "exports", "--set", "global_concurrency=lots"},
		 "pgjob: limits: 22023: limit \"global_concurrency\" must be "
		 "a whole number from 1, not \"lots\"\n"},
		{{"limits", "exports", "--set", "rate=10"},
		 "pgjob: limits: 22023: limit \"rate\" must be a string like "
		 "\"10/s\", not 10\n"},
		{{"limits", "exports", "--set", "burst=5"},
		 "pgjob: limits: 22023: \"burst\" needs a \"rate\"\n"},
		{{"limits", "exports", "--set", "speed=9"},
		 "pgjob: limits: 22023: unknown limit \"speed\"\n"
		 "pgjob: hint: Limits are global_concurrency, "
		 "per_key_concurrency, rate, burst, rate_per_key, "
		 "burst_per_key and fair.\n"},
		{{"limits", "exprots", "--set", "rate=1/s"},
		 "pgjob: limits: 42704: unknown queue 'exprots'\n"
		 "pgjob: hint: Known queues: 'exports'.  A queue is known "
		 "once a worker whose config defines it has connected, or a "
		 "job uses it.\n"},
		{{"limits", "exprots"},
		 "pgjob: limits: 42704: unknown queue 'exprots'\n"
		 "pgjob: hint: Known queues: 'exports'.  A queue is known "
		 "once a worker whose config defines it has connected, or a "
		 "job uses it.\n"},
	};
	PGconn *c = t_connect(ci);
	const char *set[] = {"limits", "exports", "--set",
			     "global_concurrency=2", NULL};
	struct t_run r;
	pgjob_ok(&r, set);
	t_run_free(&r);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		expect(1, "", cases[i].err, cases[i].args);
	char *row = limits_row(c);
	assert_string_equal(row, "2 f sql");
	free(row);
	PQfinish(c);
}

/* --reset gives the queue back to the configs; a pause stays. */
static void
test_limits_reset(void **state)
{
	PGconn *c = t_connect(ci);
	struct t_run r;
	const char *set[] = {"limits", "exports", "--set", "rate=5/min", NULL};
	pgjob_ok(&r, set);
	t_run_free(&r);
	const char *pause[] = {"pause", "exports", NULL};
	pgjob_ok(&r, pause);
	t_run_free(&r);

	const char *reset[] = {"limits", "exports", "--reset", NULL};
	expect(0,
	       "reset the limits of queue exports: the configs' limits apply "
	       "again\n",
	       "", reset);
	t_assert_value(c, "t|config",
		       "select concat_ws('|', paused, rate, source)"
		       " from pgjob.limits where queue = 'exports'");
	const char *show[] = {"limits", NULL};
	pgjob_ok(&r, show);
	assert_line(r.out, "exports yes - - 0 - -");
	t_run_free(&r);
	PQfinish(c);
}

/* --weight sets the weights of keys for fair claims; 1 is the default
 * and removes the row.  A key may hold "=". */
static void
test_limits_weight(void **state)
{
	PGconn *c = t_connect(ci);
	const char *weight[] = {"limits",   "exports", "--weight", "acme=3",
				"--weight", "a=b=2",   NULL};
	expect(0,
	       "weight of key acme in queue exports: 3\n"
	       "weight of key a=b in queue exports: 2\n",
	       "", weight);
	t_assert_value(c, "a=b:2 acme:3",
		       "select string_agg(key || ':' || weight, ' '"
		       " order by key) from pgjob.limit_weights"
		       " where queue = 'exports'");
	const char *again[] = {"limits", "exports", "--weight", "acme=1", NULL};
	expect(0, "weight of key acme in queue exports: 1\n", "", again);
	t_assert_value(c, "a=b:2",
		       "select string_agg(key || ':' || weight, ' ')"
		       " from pgjob.limit_weights");
	PQfinish(c);
}

/* Paused kinds, running jobs and a throttle, as limits shows them. */
static void
test_limits_show(void **state)
{
	PGconn *c = t_connect(ci);
	running_job(c, "report");
	struct t_run r;
	const char *kind[] = {"pause", "exports", "--kind", "report", NULL};
	pgjob_ok(&r, kind);
	t_run_free(&r);
	const char *kind2[] = {"pause", "exports", "--kind", "export", NULL};
	pgjob_ok(&r, kind2);
	t_run_free(&r);
	const char *show[] = {"limits", NULL};
	pgjob_ok(&r, show);
	assert_line(r.out, "exports kinds report, export - - 1 - -");
	t_run_free(&r);

	t_exec(c, "insert into pgjob.queues (name) values ('api')");
	t_exec(c, "select pgjob.throttle('api', 3600000)");
	pgjob_ok(&r, show);
	char *l = line_of(r.out, "api no - - 0 - ");
	assert_non_null(l);
	/* A time without fractions of a second, in PGTZ (UTC). */
	assert_non_null(strstr(l, "+00"));
	assert_null(strchr(l, '.'));
	free(l);
	t_run_free(&r);
	PQfinish(c);
}

/*
 * status has a FLOW column once a queue is paused, limited or throttled,
 * and lists such a queue even when it has no jobs; --json has the same
 * as keys of each queue.
 */
static void
test_status(void **state)
{
	PGconn *c = t_connect(ci);
	t_exec(c, "insert into pgjob.jobs (queue, kind, run_at) values"
		  " ('billing', 'charge', now() + interval '1 hour'),"
		  " ('mail', 'send', now() + interval '1 hour')");
	struct t_run r;
	const char *status[] = {"status", NULL};
	pgjob_ok(&r, status);
	assert_line(r.out, "QUEUE DUE SCHEDULED RUNNING DEAD OLDEST DUE "
			   "DONE 1MIN");
	assert_line(r.out, "billing 0 1 0 0 - 0");
	t_run_free(&r);

	const char *const steps[][7] = {
		{"pause", "exports", NULL},
		{"limits", "billing", "--set", "global_concurrency=1", NULL},
		{"pause", "billing", NULL},
		{"pause", "mail", "--kind", "send", NULL},
		{"pause", "mail", "--kind", "digest", NULL},
	};
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		pgjob_ok(&r, steps[i]);
		t_run_free(&r);
	}
	t_exec(c, "insert into pgjob.queues (name) values ('api')");
	t_exec(c, "select pgjob.throttle('api', 3600000)");

	pgjob_ok(&r, status);
	assert_line(r.out, "QUEUE DUE SCHEDULED RUNNING DEAD OLDEST DUE "
			   "DONE 1MIN FLOW");
	assert_line(r.out, "api 0 0 0 0 - 0 throttled");
	assert_line(r.out, "billing 0 1 0 0 - 0 paused; limited");
	assert_line(r.out, "exports 0 0 0 0 - 0 paused");
	assert_line(r.out, "mail 0 1 0 0 - 0 paused: send, digest");
	t_run_free(&r);

	const char *json[] = {"status", "--json", NULL};
	pgjob_ok(&r, json);
	assert_non_null(strstr(
		r.out, "{\"queue\":\"mail\",\"due\":0,\"scheduled\":1,"
		       "\"running\":0,\"dead\":0,\"oldest_due_age_s\":null,"
		       "\"done_last_minute\":0,\"paused\":false,"
		       "\"paused_kinds\":[\"send\",\"digest\"],"
		       "\"limited\":false,\"throttled_until\":null,"
		       "\"waiting\":0,\"at_least\":[]}"));
	assert_non_null(strstr(r.out, "\"queue\":\"billing\",\"due\":0,"
				      "\"scheduled\":1,\"running\":0,"
				      "\"dead\":0,\"oldest_due_age_s\":null,"
				      "\"done_last_minute\":0,"
				      "\"paused\":true,\"paused_kinds\":[],"
				      "\"limited\":true,"));
	/* api's throttle is a time. */
	const char *api = strstr(r.out, "{\"queue\":\"api\",");
	assert_non_null(api);
	assert_non_null(strstr(api, "\"throttled_until\":\"20"));
	assert_true(strstr(api, "\"throttled_until\":\"20") < strchr(api, '}'));
	t_run_free(&r);
	PQfinish(c);
}

/* Fails when text holds an escape, a CR or another C0 control but a line
 * break: what a terminal would act on. */
static void
assert_no_controls(const char *what, const char *text)
{
	for (const unsigned char *p = (const unsigned char *)text; *p; p++)
		if ((*p < 0x20 && *p != '\n') || *p == 0x7f)
			fail_msg("%s: byte 0x%02x in:\n%s", what, *p, text);
}

/* Runs pgjob ARGS... on a hostile queue; asserts the exit status and that
 * nothing it printed acts on a terminal.  r is the caller's to free. */
static void
hostile(struct t_run *r, int status, const char *const *args)
{
	t_pgjobv(r, ci, args);
	if (r->status != status)
		fail_msg("pgjob %s: exit %d: %s", args[0], r->status, r->err);
	assert_no_controls(args[0], r->out);
	assert_no_controls(args[0], r->err);
}

#define HOSTILE_QUEUE "q\x1b[2J\nx"
#define HOSTILE_KIND  "k\x1b]0;t\x07"
#define SAFE_QUEUE    "q\\x1b[2J x"
#define SAFE_KIND     "k\\x1b]0;t\\x07"

/*
 * A queue and a kind that an application named with escape sequences,
 * BEL and a line break: every command prints them as visible escapes, on
 * one line.
 */
static void
test_hostile_names(void **state)
{
	PGconn *c = t_connect(ci);
	t_exec(c, "insert into pgjob.jobs (queue, kind) values"
		  " (E'q\\x1b[2J\\nx', E'k\\x1b]0;t\\x07')");
	struct t_run r;
	const char *pause[] = {"pause", HOSTILE_QUEUE, "--kind", HOSTILE_KIND,
			       NULL};
	hostile(&r, 0, pause);
	assert_string_equal(r.out, "paused kind " SAFE_KIND
				   " of queue " SAFE_QUEUE "\n");
	t_run_free(&r);
	t_assert_value(c, "1",
		       "select count(*) from pgjob.limits where queue ="
		       " E'q\\x1b[2J\\nx'"
		       " and paused_kinds = array[E'k\\x1b]0;t\\x07']");

	const char *set[] = {"limits",	 HOSTILE_QUEUE,	    "--set", "rate=1/s",
			     "--weight", HOSTILE_KIND "=2", NULL};
	hostile(&r, 0, set);
	assert_string_equal(r.out,
			    "limits of queue " SAFE_QUEUE ": rate=1/s burst=1\n"
			    "weight of key " SAFE_KIND " in queue " SAFE_QUEUE
			    ": 2\n");
	t_run_free(&r);

	const char *limits[] = {"limits", NULL};
	hostile(&r, 0, limits);
	assert_line(r.out, SAFE_QUEUE " kinds " SAFE_KIND
				      " rate=1/s burst=1 sql 0 1.0 -");
	t_run_free(&r);
	const char *status[] = {"status", NULL};
	hostile(&r, 0, status);
	char *l = line_of(r.out, SAFE_QUEUE " 1 0 0 0 ");
	assert_non_null(l);
	assert_non_null(strstr(l, " 0 paused: " SAFE_KIND "; limited"));
	free(l);
	t_run_free(&r);

	/* The server's message and its hint quote the names too. */
	t_exec(c, "insert into pgjob.queues (name) values"
		  " (E'q\\x1b[2J\\nx')");
	const char *unknown[] = {"pause", "\x1b[31mnope", NULL};
	hostile(&r, 1, unknown);
	assert_non_null(strstr(r.err, "pgjob: pause: 42704: unknown queue "
				      "'\\x1b[31mnope'\n"));
	assert_non_null(strstr(r.err, "pgjob: hint: Known queues: "
				      "'exports', '" SAFE_QUEUE "'."));
	t_run_free(&r);
	PQfinish(c);
}

/* enqueue --limit-key and --cost land in the job's row. */
static void
test_enqueue(void **state)
{
	PGconn *c = t_connect(ci);
	struct t_run r;
	const char *keyed[] = {"enqueue", "export",	 "--queue",
			       "exports", "--limit-key", "acme",
			       "--cost",  "5",		 NULL};
	pgjob_ok(&r, keyed);
	long long id = atoll(r.out);
	t_run_free(&r);
	t_assert_job(c, id, "concat_ws(' ', queue, limit_key, cost)",
		     "exports acme 5");

	const char *plain[] = {"enqueue", "export", "--cost", "0", NULL};
	pgjob_ok(&r, plain);
	t_assert_job(c, atoll(r.out), "concat_ws(' ', queue, limit_key, cost)",
		     "default 0");
	t_run_free(&r);
	const char *bare[] = {"enqueue", "export", NULL};
	pgjob_ok(&r, bare);
	t_assert_job(c, atoll(r.out), "coalesce(limit_key, '-') || cost", "-1");
	t_run_free(&r);
	PQfinish(c);
}

/*
 * --json: expect() the exact line out, which must also be one JSON value
 * that cJSON reads whole.
 */
static void
expect_json(const char *out, const char *const *args)
{
	expect(0, out, "", args);
	size_t n = strlen(out);
	char *line = strndup(out, n - 1);
	const char *end;
	cJSON *j = cJSON_ParseWithOpts(line, &end, 1);
	if (!j || out[n - 1] != '\n')
		fail_msg("pgjob %s: not one line of JSON: %s", args[0], out);
	cJSON_Delete(j);
	free(line);
}

/*
 * pause and resume --json: the queue's state after the command, as
 * pgjob.limits has it, and its running jobs (of the kind).  --wait says
 * nothing on the way; one that times out prints nothing on stdout.
 */
static void
test_json_pause_resume(void **state)
{
	PGconn *c = t_connect(ci);
	running_job(c, "report");
	const char *pause[] = {"pause", "exports", "--json", NULL};
	expect_json("{\"queue\":\"exports\",\"kind\":null,\"paused\":true,"
		    "\"paused_kinds\":[],\"running\":1}\n",
		    pause);
	t_assert_value(c, "true|{}",
		       "select paused || '|' || paused_kinds::text"
		       " from pgjob.limits where queue = 'exports'");
	const char *kind[] = {"pause",	"exports", "--kind",
			      "export", "--json",  NULL};
	expect_json("{\"queue\":\"exports\",\"kind\":\"export\",\"paused\":"
		    "true,\"paused_kinds\":[\"export\"],\"running\":0}\n",
		    kind);
	const char *resume[] = {"resume", "exports", "--json", NULL};
	expect_json("{\"queue\":\"exports\",\"kind\":null,\"paused\":false,"
		    "\"paused_kinds\":[\"export\"],\"running\":1}\n",
		    resume);
	t_assert_value(c, "false|{export}",
		       "select paused || '|' || paused_kinds::text"
		       " from pgjob.limits where queue = 'exports'");
	const char *resume_kind[] = {"resume", "exports", "--kind",
				     "export", "--json",  NULL};
	expect_json("{\"queue\":\"exports\",\"kind\":\"export\",\"paused\":"
		    "false,\"paused_kinds\":[],\"running\":0}\n",
		    resume_kind);
	assert_int_equal(t_long(c, "select count(*) from pgjob.limits"), 0);

	const char *wait[] = {"pause",	"exports", "--kind",
			      "export", "--wait",  "--timeout",
			      "0s",	"--json",  NULL};
	expect_json("{\"queue\":\"exports\",\"kind\":\"export\",\"paused\":"
		    "false,\"paused_kinds\":[\"export\"],\"running\":0}\n",
		    wait);
	const char *timeout[] = {"pause", "exports", "--wait", "--timeout",
				 "0s",	  "--json",  NULL};
	expect(1, "",
	       "pgjob: pause: 1 job of queue exports still running after 0s "
	       "(it stays paused: `pgjob resume` undoes that)\n",
	       timeout);
	t_assert_value(c, "t", "select paused from pgjob.limits");
	PQfinish(c);
}

/*
 * limits QUEUE --set/--reset/--weight --json: the queue's limits after
 * the change, the same object `limits QUEUE --json` lists, and its key
 * weights.
 */
static void
test_json_limits_change(void **state)
{
	PGconn *c = t_connect(ci);
	const char *set[] = {"limits",	  "exports", "--set",
			     "rate=10/s", "--set",   "global_concurrency=4",
			     "--weight",  "acme=3",  "--json",
			     NULL};
	const char *row = "{\"queue\":\"exports\",\"paused\":false,"
			  "\"paused_kinds\":[],\"global_concurrency\":4,"
			  "\"per_key_concurrency\":null,\"rate\":\"10/s\","
			  "\"burst\":10,\"rate_per_key\":null,"
			  "\"burst_per_key\":null,\"fair\":false,"
			  "\"source\":\"sql\",\"running\":0,"
			  "\"tokens\":10.000,\"throttled_until\":null}";
	char want[1024];
	snprintf(want, sizeof(want),
		 "{\"queue\":\"exports\",\"limits\":%s,"
		 "\"weights\":{\"acme\": 3}}\n",
		 row);
	expect_json(want, set);
	char *db = limits_row(c);
	assert_string_equal(db, "4 10 1000 f sql");
	free(db);
	/* The same row as showing them. */
	const char *show[] = {"limits", "exports", "--json", NULL};
	snprintf(want, sizeof(want), "[%s]\n", row);
	expect_json(want, show);

	/* Nothing left after --reset: limits null; the weight stays. */
	const char *reset[] = {"limits", "exports", "--reset", "--json", NULL};
	expect_json("{\"queue\":\"exports\",\"limits\":null,"
		    "\"weights\":{\"acme\": 3}}\n",
		    reset);
	assert_int_equal(t_long(c, "select count(*) from pgjob.limits"), 0);
	const char *weight[] = {"limits", "exports", "--weight",
				"acme=1", "--json",  NULL};
	expect_json("{\"queue\":\"exports\",\"limits\":null,"
		    "\"weights\":{}}\n",
		    weight);
	assert_int_equal(t_long(c, "select count(*) from pgjob.limit_weights"),
			 0);
	PQfinish(c);
}

static void
test_usage(void **state)
{
	static const struct {
		const char *args[8];
		const char *err;
	} cases[] = {
		{{"pause"}, "pause: missing QUEUE\n"},
		{{"resume"}, "resume: missing QUEUE\n"},
		{{"pause", "a", "b"}, "pause: unexpected argument \"b\"\n"},
		{{"pause", "a", "--timeout", "5s"},
		 "pause: --timeout goes with --wait\n"},
		{{"pause", "a", "--wait", "--timeout", "soon"},
		 "pause: bad --timeout \"soon\" (not a number; use 30s, 5m, "
		 "2h)\n"},
		{{"pause", "a", "--kind"},
		 "pause: option \"--kind\" needs a value\n"},
		{{"resume", "a", "--wait"},
		 "resume: unknown option \"--wait\"\n"},
		{{"limits", "a", "--set", "rate"},
		 "limits: bad --set \"rate\" (KEY=VALUE, such as rate=10/s, "
		 "or rate=none to remove it)\n"},
		{{"limits", "a", "--set", "=5"}, "limits: bad --set \"=5\""},
		{{"limits", "a", "--weight", "acme=0"},
		 "limits: bad --weight \"acme=0\" (KEY=N, N from 1 to 1000; "
		 "1 is the default)\n"},
		{{"limits", "a", "--weight", "acme"},
		 "limits: bad --weight \"acme\""},
		{{"limits", "--set", "rate=1/s"},
		 "limits: --set, --reset and --weight need a QUEUE\n"},
		{{"limits", "a", "--reset", "--set", "rate=1/s"},
		 "limits: --set and --reset exclude each other\n"},
		{{"limits", "a", "b"}, "limits: unexpected argument \"b\"\n"},
		{{"enqueue", "k", "--cost", "-1"},
		 "enqueue: bad --cost \"-1\" (an integer from 0 to "
		 "1000000)\n"},
	};
	/* Exit 2, stdout empty, and one line on stderr that starts with
	 * the message. */
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct t_run r;
		t_pgjobv(&r, ci, cases[i].args);
		if (r.status != 2 || strncmp(r.err, "pgjob: ", 7) ||
		    strncmp(r.err + 7, cases[i].err, strlen(cases[i].err)) ||
		    strchr(r.err, '\n') != r.err + strlen(r.err) - 1 || *r.out)
			fail_msg("pgjob %s: exit %d, \"%s\"", cases[i].args[0],
				 r.status, r.err);
		t_run_free(&r);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_pause_resume, empty),
		cmocka_unit_test_setup(test_pause_refused, empty),
		cmocka_unit_test_setup(test_pause_wait, empty),
		cmocka_unit_test_setup(test_pause_wait_timeout, empty),
		cmocka_unit_test_setup(test_limits_set, empty),
		cmocka_unit_test_setup(test_limits_refused, empty),
		cmocka_unit_test_setup(test_limits_reset, empty),
		cmocka_unit_test_setup(test_limits_weight, empty),
		cmocka_unit_test_setup(test_limits_show, empty),
		cmocka_unit_test_setup(test_status, empty),
		cmocka_unit_test_setup(test_hostile_names, empty),
		cmocka_unit_test_setup(test_enqueue, empty),
		cmocka_unit_test_setup(test_json_pause_resume, empty),
		cmocka_unit_test_setup(test_json_limits_change, empty),
		cmocka_unit_test(test_usage),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
