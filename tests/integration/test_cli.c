/*
 * Integration: the operator commands of pgjob (status, jobs, show, retry,
 * cancel, prune, top) against a migrated database whose rows each test
 * builds in exact states with SQL, rather than running the daemon.
 */
#include "testlib.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

static char *ci;

static int
setup(void **state)
{
	/* Every pgjob here runs in time zone UTC, so that timestamps print
	 * the same everywhere. */
	setenv("PGTZ", "UTC", 1);
	ci = t_db_migrated("t_cli");
	return 0;
}

static int
teardown(void **state)
{
	free(ci);
	return 0;
}

/* Every test starts from empty tables, ids from 1. */
static int
empty(void **state)
{
	PGconn *c = t_connect(ci);
	/* The done jobs a real daemon moved to pgjob.jobs_done
	 * (test_status_running_heartbeat) and their attempts too. */
	t_exec(c, "truncate pgjob.jobs, pgjob.jobs_done, pgjob.attempts,"
		  " pgjob.workers, pgjob.leases, pgjob.history_minutes"
		  " restart identity");
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

/* 1 when text has a line that starts with prefix (blanks folded). */
static int
has_line(const char *text, const char *prefix)
{
	char *line = line_of(text, prefix);
	free(line);
	return line != NULL;
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

static cJSON *
parse_json(const char *text)
{
	cJSON *j = cJSON_Parse(text);
	if (!j)
		fail_msg("not JSON:\n%s", text);
	return j;
}

/* The length of the UTF-8 sequence at p, or 0 when it is not one (a lone
 * continuation byte, an overlong or truncated sequence). */
static size_t
utf8_len(const unsigned char *p)
{
	size_t n = p[0] < 0x80			  ? 1
		   : p[0] >= 0xc2 && p[0] <= 0xdf ? 2
		   : p[0] >= 0xe0 && p[0] <= 0xef ? 3
		   : p[0] >= 0xf0 && p[0] <= 0xf4 ? 4
						  : 0;
	for (size_t k = 1; k < n; k++)
		if ((p[k] & 0xc0) != 0x80)
			return 0;
	return n;
}

/* Fails unless text is valid UTF-8 (JSON text must be: RFC 8259). */
static void
assert_utf8(const char *what, const char *text)
{
	const unsigned char *p = (const unsigned char *)text;
	for (size_t i = 0; p[i];) {
		size_t n = utf8_len(p + i);
		if (n == 0)
			fail_msg("%s: byte 0x%02x at %zu is not UTF-8 in:\n%s",
				 what, p[i], i, text);
		i += n;
	}
}

/*
 * What --json promises: exit 0, nothing on stderr, and on stdout one line
 * that is one JSON value, valid UTF-8, and nothing else.  Returns the value
 * (caller deletes) and frees r.
 */
static cJSON *
json_of(struct t_run *r, const char *what)
{
	size_t n = strlen(r->out);
	if (r->status != 0 || *r->err)
		fail_msg("%s: exit %d: %s", what, r->status, r->err);
	if (n == 0 || r->out[n - 1] != '\n' ||
	    strchr(r->out, '\n') != r->out + n - 1)
		fail_msg("%s: not one line:\n%s", what, r->out);
	assert_utf8(what, r->out);
	r->out[n - 1] = '\0';
	const char *end = NULL;
	cJSON *j = cJSON_ParseWithOpts(r->out, &end, 1);
	if (!j)
		fail_msg("%s: not JSON:\n%s", what, r->out);
	t_run_free(r);
	return j;
}

/* Runs `pgjob --database ci ARGS... --json`; returns json_of() it. */
static cJSON *
pgjob_json(const char *const *args)
{
	struct t_run r;
	const char *argv[16];
	size_t n = 0;
	while (args[n] && n < 14) {
		argv[n] = args[n];
		n++;
	}
	argv[n++] = "--json";
	argv[n] = NULL;
	t_pgjobv(&r, ci, argv);
	return json_of(&r, args[0]);
}

static double
num(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!cJSON_IsNumber(v))
		fail_msg("\"%s\" is not a number", key);
	return v->valuedouble;
}

static const char *
str(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!cJSON_IsString(v))
		fail_msg("\"%s\" is not a string", key);
	return v->valuestring;
}

static const cJSON *
item(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!v)
		fail_msg("no \"%s\"", key);
	return v;
}

/*
 * Two instances on app1 (slots 1, 2) and app2 (slot 3, stale); jobs in every
 * state; three leases.  Kinds: email and thumbnail have live workers,
 * report only a stale one, charge none.
 */
static void
status_rows(PGconn *c)
{
	/* running: what each worker's heartbeat wrote (schema 41); slot 3's
	 * worker is older than that. */
	t_exec(c, "insert into pgjob.workers (slot, host, pid, supervisor_pid,"
		  " version, kinds, heartbeat_at, running) values"
		  " (1, 'app1', 4243, 4242, '0.1.0', '{email,thumbnail}',"
		  "  now() - interval '1 second', 2),"
		  " (2, 'app1', 4244, 4242, '0.1.0', '{email}', now(), 0),"
		  " (3, 'app2', 5101, 5100, '0.1.0', '{report}',"
		  "  now() - interval '2 hours', null)");
	t_exec(c, "insert into pgjob.jobs (queue, kind, state, run_at,"
		  " attempts, locked_by, finished_at) values"
		  " ('default', 'email', 'available', now() - interval "
		  "  '2 hours', 0, null, null),"
		  " ('default', 'email', 'available', now(), 0, null, null),"
		  " ('default', 'email', 'available', now() + interval "
		  "  '1 hour', 0, null, null),"
		  " ('default', 'email', 'running', now(), 1, 'app1:1', null),"
		  " ('default', 'thumbnail', 'running', now(), 1, 'app1:1',"
		  "  null),"
		  " ('default', 'email', 'running', now(), 1, 'app9:1', null),"
		  " ('default', 'email', 'done', now(), 1, null,"
		  "  now() - interval '10 seconds'),"
		  " ('default', 'email', 'done', now(), 1, null,"
		  "  now() - interval '20 seconds'),"
		  " ('default', 'email', 'done', now(), 1, null,"
		  "  now() - interval '5 minutes'),"
		  " ('default', 'email', 'dead', now(), 20, null, now()),"
		  " ('default', 'email', 'cancelled', now(), 0, null, now()),"
		  " ('billing', 'charge', 'available', now() - interval"
		  "  '1 hour', 1, null, null),"
		  " ('billing', 'charge', 'available', now() + interval"
		  "  '1 day', 0, null, null),"
		  " ('billing', 'report', 'available', now() - interval"
		  "  '3 hours', 0, null, null),"
		  " ('billing', 'thumbnail', 'dead', now(), 3, null, now())");
	/* What the workers' heartbeats wrote of the current minute: status
	 * reads its done jobs there (status --exact counts the rows above). */
	t_exec(c,
	       "insert into pgjob.history_minutes (at, queue, kind, done)"
	       " values (date_trunc('minute', now()), 'default', 'email', 5)");
	t_exec(c, "insert into pgjob.leases values"
		  " ('task:feed:0', 'app1:2', 7, now() + interval '1 hour'),"
		  " ('task:feed:1', null, 3, null),"
		  " ('duty:prune', 'app2:3', 12, now() - interval '2 hours')");
}

static void
test_status_text(void **state)
{
	struct t_run r;
	PGconn *c = t_connect(ci);
	status_rows(c);
	const char *args[] = {"status", NULL};
	pgjob_ok(&r, args);

	assert_line(r.out, "workers: 2 live, 1 stale");
	assert_line(r.out, "HOST INSTANCE SLOT PID VERSION HEARTBEAT RUNNING "
			   "KINDS");
	/* The heartbeat is 0s or 1s old by now; the rest is exact. */
	char *l = line_of(r.out, "app1 4242 1 4243 0.1.0 ");
	assert_non_null(l);
	assert_non_null(strstr(l, "s 2 email, thumbnail"));
	free(l);
	l = line_of(r.out, "2 4244 0.1.0 ");
	assert_non_null(l);
	assert_non_null(strstr(l, "s 0 email"));
	free(l);
	assert_line(r.out, "app2 5100 3 5101 0.1.0 2h00m (stale) - report");

	assert_line(r.out, "QUEUE DUE SCHEDULED RUNNING DEAD OLDEST DUE "
			   "DONE 1MIN");
	assert_line(r.out, "default 2 1 3 1 2h00m 5");
	assert_line(r.out, "billing 2 1 0 1 3h00m 0");

	assert_line(r.out, "waiting, no live worker serves them");
	assert_line(r.out, "KIND QUEUE JOBS DUE OLDEST DUE WHY");
	assert_line(r.out, "charge billing 2 1 1h00m no handler");
	assert_line(r.out, "report billing 1 1 3h00m no handler");
	assert_false(has_line(r.out, "email "));

	assert_line(r.out, "duty:prune app2:3 12 expired 2h00m ago");
	assert_line(r.out, "task:feed:1 - 3 -");
	l = line_of(r.out, "task:feed:0 app1:2 7 ");
	assert_non_null(l);
	assert_true(strstr(l, "59m") || strstr(l, "1h00m"));
	free(l);
	t_run_free(&r);
	PQfinish(c);
}

static void
check_instances(const cJSON *j)
{
	const cJSON *inst = item(j, "instances");
	assert_int_equal(cJSON_GetArraySize(inst), 2);
	const cJSON *a = cJSON_GetArrayItem(inst, 0);
	assert_string_equal(str(a, "host"), "app1");
	assert_int_equal(num(a, "supervisor_pid"), 4242);
	const cJSON *ws = item(a, "workers");
	assert_int_equal(cJSON_GetArraySize(ws), 2);
	const cJSON *w = cJSON_GetArrayItem(ws, 0);
	assert_int_equal(num(w, "slot"), 1);
	assert_int_equal(num(w, "pid"), 4243);
	assert_string_equal(str(w, "version"), "0.1.0");
	assert_int_equal(num(w, "running_jobs"), 2);
	assert_true(cJSON_IsFalse(item(w, "stale")));
	assert_true(num(w, "heartbeat_age_s") >= 1.0);
	assert_true(num(w, "heartbeat_age_s") < 30.0);
	const cJSON *kinds = item(w, "kinds");
	assert_int_equal(cJSON_GetArraySize(kinds), 2);
	assert_string_equal(cJSON_GetArrayItem(kinds, 1)->valuestring,
			    "thumbnail");
	assert_int_equal(num(cJSON_GetArrayItem(ws, 1), "running_jobs"), 0);
	assert_true(cJSON_IsNull(
		item(cJSON_GetArrayItem(
			     item(cJSON_GetArrayItem(inst, 1), "workers"), 0),
		     "running_jobs")));

	const cJSON *b = cJSON_GetArrayItem(inst, 1);
	assert_string_equal(str(b, "host"), "app2");
	w = cJSON_GetArrayItem(item(b, "workers"), 0);
	assert_int_equal(num(w, "slot"), 3);
	assert_true(cJSON_IsTrue(item(w, "stale")));
	assert_true(num(w, "heartbeat_age_s") >= 7200.0);
	/* Timestamps are RFC 3339. */
	assert_non_null(strchr(str(w, "heartbeat_at"), 'T'));
}

static void
check_queue(const cJSON *q, const char *name, int due, int scheduled,
	    int running, int dead, double oldest, int done)
{
	assert_string_equal(str(q, "queue"), name);
	assert_int_equal(num(q, "due"), due);
	assert_int_equal(num(q, "scheduled"), scheduled);
	assert_int_equal(num(q, "running"), running);
	assert_int_equal(num(q, "dead"), dead);
	assert_true(num(q, "oldest_due_age_s") >= oldest);
	assert_true(num(q, "oldest_due_age_s") < oldest + 60);
	assert_int_equal(num(q, "done_last_minute"), done);
}

static void
test_status_json(void **state)
{
	struct t_run r;
	PGconn *c = t_connect(ci);
	status_rows(c);
	const char *args[] = {"status", "--json", NULL};
	pgjob_ok(&r, args);
	cJSON *j = parse_json(r.out);

	assert_int_equal(num(j, "live_workers"), 2);
	assert_int_equal(num(j, "stale_workers"), 1);
	check_instances(j);

	const cJSON *qs = item(j, "queues");
	assert_int_equal(cJSON_GetArraySize(qs), 2);
	check_queue(cJSON_GetArrayItem(qs, 0), "billing", 2, 1, 0, 1, 10800, 0);
	check_queue(cJSON_GetArrayItem(qs, 1), "default", 2, 1, 3, 1, 7200, 5);

	const cJSON *nh = item(j, "no_handler");
	assert_int_equal(cJSON_GetArraySize(nh), 2);
	const cJSON *k = cJSON_GetArrayItem(nh, 0);
	assert_string_equal(str(k, "kind"), "charge");
	assert_int_equal(num(k, "jobs"), 2);
	assert_int_equal(num(k, "due"), 1);
	assert_true(num(k, "oldest_due_age_s") >= 3600);
	assert_string_equal(str(cJSON_GetArrayItem(nh, 1), "kind"), "report");

	const cJSON *ls = item(j, "leases");
	assert_int_equal(cJSON_GetArraySize(ls), 3);
	const cJSON *l = cJSON_GetArrayItem(ls, 0);
	assert_string_equal(str(l, "name"), "duty:prune");
	assert_string_equal(str(l, "holder"), "app2:3");
	assert_int_equal(num(l, "token"), 12);
	assert_true(num(l, "expires_in_s") <= -7200);
	l = cJSON_GetArrayItem(ls, 2);
	assert_string_equal(str(l, "name"), "task:feed:1");
	assert_true(cJSON_IsNull(item(l, "holder")));
	assert_true(cJSON_IsNull(item(l, "expires_in_s")));
	cJSON_Delete(j);
	t_run_free(&r);
	PQfinish(c);
}

/*
 * A real worker writes the jobs it holds with each heartbeat (every third
 * of the lease, at most 10 s), and `pgjob status` shows that count; once
 * they end, the next heartbeat writes 0.
 */
static void
test_status_running_heartbeat(void **state)
{
	PGconn *c = t_connect(ci);
	char mark[4096];
	snprintf(mark, sizeof(mark), "%s/held.done", t_tmpdir());
	unlink(mark);
	/* Each job waits for the mark, so they are held until the test
	 * says; no shell: the test's own file, checked by test -e. */
	pid_t d = t_start("heartbeat", ci,
			  "workers: 1\n"
			  "lease: 3s\n"
			  "handlers:\n"
			  "  held: { type: exec, command: [\"/bin/sh\", \"-c\","
			  " \"while [ ! -e \\\"$0\\\" ]; do sleep 0.1; done\","
			  " \"%s\"] }\n",
			  mark);
	t_exec(c, "select pgjob.enqueue('held') from generate_series(1, 3)");
	t_wait_until(c, 30, "select running = 3 from pgjob.workers");
	struct t_run r;
	const char *args[] = {"status", NULL};
	pgjob_ok(&r, args);
	if (!strstr(r.out, " 3  held") && !strstr(r.out, " 3 held"))
		fail_msg("no worker with 3 running jobs:\n%s", r.out);
	t_run_free(&r);
	FILE *f = fopen(mark, "w");
	assert_non_null(f);
	fclose(f);
	t_wait_until(c, 30,
		     "select count(*) = 3 from pgjob.all_jobs"
		     " where state = 'done'");
	t_wait_until(c, 30, "select running = 0 from pgjob.workers");
	t_stop_clean(d);
	PQfinish(c);
}

/*
 * --exact counts every job, and each worker's running jobs from the jobs
 * table, not from what its heartbeat wrote.
 */
static void
test_status_exact(void **state)
{
	struct t_run r;
	PGconn *c = t_connect(ci);
	status_rows(c);
	t_exec(c, "update pgjob.workers set running = 9 where slot = 1");
	const char *args[] = {"status", NULL};
	pgjob_ok(&r, args);
	char *l = line_of(r.out, "app1 4242 1 4243 0.1.0 ");
	assert_non_null(strstr(l, "s 9 email, thumbnail"));
	free(l);
	t_run_free(&r);

	const char *exact[] = {"status", "--exact", NULL};
	pgjob_ok(&r, exact);
	l = line_of(r.out, "app1 4242 1 4243 0.1.0 ");
	assert_non_null(strstr(l, "s 2 email, thumbnail"));
	free(l);
	assert_line(r.out, "app2 5100 3 5101 0.1.0 2h00m (stale) 0 report");
	assert_line(r.out, "default 2 1 3 1 2h00m 2");
	assert_line(r.out, "charge billing 2 1 1h00m no handler");
	t_run_free(&r);

	const char *json[] = {"status", "--exact", "--json", NULL};
	pgjob_ok(&r, json);
	cJSON *j = parse_json(r.out);
	const cJSON *qs = item(j, "queues");
	check_queue(cJSON_GetArrayItem(qs, 1), "default", 2, 1, 3, 1, 7200, 2);
	assert_int_equal(
		cJSON_GetArraySize(item(cJSON_GetArrayItem(qs, 1), "at_least")),
		0);
	assert_true(cJSON_IsFalse(item(j, "unserved_partial")));
	cJSON_Delete(j);
	t_run_free(&r);
	PQfinish(c);
}

/*
 * A queue of more than a thousand jobs: without --exact, no count goes
 * past a thousand, a figure that stopped there reads "1000+" (at_least
 * in JSON), and the jobs no worker serves are looked for among each
 * queue's first thousand available jobs in the claim's order; --exact
 * counts them all.
 */
static void
test_status_capped(void **state)
{
	struct t_run r;
	PGconn *c = t_connect(ci);
	t_exec(c, "insert into pgjob.workers (slot, host, pid, supervisor_pid,"
		  " version, kinds, heartbeat_at, running) values"
		  " (1, 'app1', 4243, 4242, '0.1.0', '{email}', now(), 0)");
	/* 1,500 due jobs no worker handles in big; in wide, 1,200 that a
	 * worker handles, then 2 of a kind none does, behind them. */
	t_exec(c, "insert into pgjob.jobs (queue, kind, run_at)"
		  " select 'big', 'x', now() - interval '1 hour'"
		  " from generate_series(1, 1500)");
	t_exec(c, "insert into pgjob.jobs (queue, kind, run_at)"
		  " select 'wide', 'email', now() - interval '1 hour'"
		  " from generate_series(1, 1200)");
	t_exec(c, "insert into pgjob.jobs (queue, kind, run_at)"
		  " select 'wide', 'y', now() from generate_series(1, 2)");
	t_exec(c, "insert into pgjob.jobs (queue, kind, run_at)"
		  " values ('small', 'y', now() - interval '2 hours')");
	/* The history of big: 600 done in the previous minute, 30 in this
	 * one; "in the last minute" weighs the previous by its share still
	 * within the last 60 s. */
	t_exec(c, "insert into pgjob.history_minutes (at, queue, kind, done)"
		  " values (date_trunc('minute', now()) - interval '1 minute',"
		  "  'big', 'x', 600),"
		  " (date_trunc('minute', now()), 'big', 'x', 30)");

	const char *args[] = {"status", NULL};
	pgjob_ok(&r, args);
	char *l = line_of(r.out, "big 1000+ 0 0+ 0 1h00m+ ");
	assert_non_null(l);
	free(l);
	assert_line(r.out, "small 1 0 0 0 2h00m 0");
	assert_line(r.out, "x big 1000+ 1000+ 1h00m+ no handler");
	assert_line(r.out, "y small 1 1 2h00m no handler");
	/* Behind wide's 1,200 served jobs: not looked at. */
	assert_false(has_line(r.out, "y wide"));
	t_run_free(&r);

	const char *json[] = {"status", "--json", NULL};
	pgjob_ok(&r, json);
	cJSON *j = parse_json(r.out);
	const cJSON *big = cJSON_GetArrayItem(item(j, "queues"), 0);
	assert_string_equal(str(big, "queue"), "big");
	assert_int_equal(num(big, "due"), 1000);
	long long want = t_long(c, "select round(30 + 600 * (1 - extract("
				   "epoch from now() - date_trunc('minute',"
				   " now())) / 60))");
	long long got = (long long)num(big, "done_last_minute");
	/* A second apart at most: 10 jobs of the 600. */
	if (got < want - 10 || got > want + 10)
		fail_msg("done_last_minute %lld, want about %lld", got, want);
	const cJSON *atl = item(big, "at_least");
	assert_int_equal(cJSON_GetArraySize(atl), 3);
	assert_string_equal(cJSON_GetArrayItem(atl, 0)->valuestring, "due");
	assert_true(cJSON_IsTrue(item(j, "unserved_partial")));
	const cJSON *u = cJSON_GetArrayItem(item(j, "unserved"), 0);
	assert_string_equal(str(u, "kind"), "x");
	assert_int_equal(num(u, "jobs"), 1000);
	assert_int_equal(cJSON_GetArraySize(item(u, "at_least")), 3);
	const cJSON *nh = item(j, "no_handler");
	assert_int_equal(cJSON_GetArraySize(nh), 2);
	assert_int_equal(num(cJSON_GetArrayItem(nh, 1), "jobs"), 1);
	cJSON_Delete(j);
	t_run_free(&r);

	const char *exact[] = {"status", "--exact", NULL};
	pgjob_ok(&r, exact);
	/* --exact: the jobs done in the last minute, counted: none. */
	assert_line(r.out, "big 1500 0 0 0 1h00m 0");
	assert_line(r.out, "wide 1202 0 0 0 1h00m 0");
	assert_line(r.out, "x big 1500 1500 1h00m no handler");
	assert_true(has_line(r.out, "y wide 2 2 "));
	t_run_free(&r);
	PQfinish(c);
}

static void
test_status_empty(void **state)
{
	struct t_run r;
	const char *args[] = {"status", NULL};
	pgjob_ok(&r, args);
	assert_line(r.out, "workers: 0 live, 0 stale");
	assert_line(r.out, "no jobs");
	t_run_free(&r);

	const char *json[] = {"status", "--json", NULL};
	pgjob_ok(&r, json);
	cJSON *j = parse_json(r.out);
	assert_int_equal(num(j, "live_workers"), 0);
	assert_int_equal(cJSON_GetArraySize(item(j, "instances")), 0);
	assert_int_equal(cJSON_GetArraySize(item(j, "queues")), 0);
	assert_int_equal(cJSON_GetArraySize(item(j, "leases")), 0);
	cJSON_Delete(j);
	t_run_free(&r);
}

/* Jobs 1..6: kinds a and b in queues q1 and q2, in several states. */
static void
jobs_rows(PGconn *c)
{
	t_exec(c, "insert into pgjob.jobs (queue, kind, state, attempts,"
		  " max_attempts, run_at, last_error, finished_at) values"
		  " ('q1', 'a', 'available', 0, null, '2030-01-02 03:04:05+00',"
		  "  null, null),"
		  " ('q1', 'a', 'dead', 3, 3, '2030-01-02 03:04:05+00',"
		  "  repeat('x', 100) || E'\\nsecond line', now()),"
		  " ('q2', 'b', 'done', 1, null, '2030-01-02 03:04:05+00',"
		  "  null, now()),"
		  " ('q2', 'a', 'dead', 1, 1, '2030-01-02 03:04:05+00',"
		  "  E'boom\\n', now()),"
		  " ('q1', 'b', 'running', 1, 5, '2030-01-02 03:04:05+00',"
		  "  null, null),"
		  " ('q1', 'a', 'available', 2, 5, '2030-01-02 03:04:05+00',"
		  "  'timeout', null)");
}

static void
test_jobs(void **state)
{
	struct t_run r;
	PGconn *c = t_connect(ci);
	jobs_rows(c);

	const char *all[] = {"jobs", NULL};
	pgjob_ok(&r, all);
	assert_line(r.out, "ID QUEUE KIND STATE ATTEMPTS RUN AT LAST ERROR");
	/* Newest first. */
	assert_non_null(strstr(r.out, " 6  q1"));
	assert_true(strstr(r.out, " 6  q1") < strstr(r.out, " 1  q1"));
	assert_line(r.out, "5 q1 b running 1/5 2030-01-02 03:04:05+00 -");
	/* last_error on one line, cut to 60 characters. */
	char want[128];
	snprintf(want, sizeof(want),
		 "2 q1 a dead 3/3 2030-01-02 03:04:05+00 "
		 "%.57s...",
		 "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
	assert_line(r.out, want);
	assert_line(r.out, "4 q2 a dead 1/1 2030-01-02 03:04:05+00 boom");
	assert_line(r.out, "3 q2 b done 1/- 2030-01-02 03:04:05+00 -");
	assert_null(strstr(r.out, "--limit"));
	t_run_free(&r);

	const char *lim[] = {"jobs", "--limit", "2", NULL};
	pgjob_ok(&r, lim);
	assert_true(has_line(r.out, "6 q1 a available 2/5"));
	assert_true(has_line(r.out, "5 q1 b running"));
	assert_false(has_line(r.out, "4 "));
	assert_line(r.out, "(the newest 2; --limit shows more)");
	t_run_free(&r);
	PQfinish(c);
}

/* The ids of a `jobs --json` answer, as "6,5,...". */
static char *
json_ids(const char *out)
{
	cJSON *j = parse_json(out), *e;
	char buf[256] = "";
	assert_true(cJSON_IsArray(j));
	cJSON_ArrayForEach(e, j)
	{
		snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "%s%d",
			 *buf ? "," : "", (int)num(e, "id"));
	}
	cJSON_Delete(j);
	return strdup(buf);
}

static void
test_jobs_filters_json(void **state)
{
	static const struct {
		const char *args[10];
		const char *ids;
	} cases[] = {
		{{"jobs", "--json", NULL}, "6,5,4,3,2,1"},
		{{"jobs", "--state", "dead", "--json", NULL}, "4,2"},
		{{"jobs", "--queue", "q1", "--json", NULL}, "6,5,2,1"},
		{{"jobs", "--kind", "b", "--json", NULL}, "5,3"},
		{{"jobs", "--json", "--queue", "q1", "--kind", "a", "--state",
		  "dead"},
		 "2"},
		{{"jobs", "--limit", "3", "--json", NULL}, "6,5,4"},
		{{"jobs", "--state", "cancelled", "--json", NULL}, ""},
	};
	PGconn *c = t_connect(ci);
	jobs_rows(c);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct t_run r;
		pgjob_ok(&r, cases[i].args);
		char *ids = json_ids(r.out);
		assert_string_equal(ids, cases[i].ids);
		free(ids);
		t_run_free(&r);
	}

	struct t_run r;
	const char *one[] = {"jobs",	"--state", "dead",   "--kind", "a",
			     "--queue", "q1",	   "--json", NULL};
	pgjob_ok(&r, one);
	cJSON *j = parse_json(r.out);
	cJSON *o = cJSON_GetArrayItem(j, 0);
	assert_string_equal(str(o, "queue"), "q1");
	assert_string_equal(str(o, "kind"), "a");
	assert_string_equal(str(o, "state"), "dead");
	assert_int_equal(num(o, "attempts"), 3);
	assert_int_equal(num(o, "max_attempts"), 3);
	assert_string_equal(str(o, "run_at"), "2030-01-02T03:04:05+00:00");
	/* In full: 100 x, a newline, "second line". */
	assert_int_equal(strlen(str(o, "last_error")), 112);
	cJSON_Delete(j);
	t_run_free(&r);
	PQfinish(c);
}

static void
test_show(void **state)
{
	struct t_run r;
	PGconn *c = t_connect(ci);
	t_exec(c, "insert into pgjob.jobs (kind, payload, state, attempts,"
		  " last_error, result, unique_key, lease_token,"
		  " finished_at) values ('mail', '{\"to\": \"a@b\","
		  " \"big\": 12345678901234567890}', 'done', 2,"
		  " E'first line\\nsecond line', '{\"sent\": true}', 'u-1',"
		  " 9007199254740993, now())");

	const char *args[] = {"show", "1", NULL};
	pgjob_ok(&r, args);
	assert_line(r.out, "id 1");
	assert_line(r.out, "kind mail");
	assert_line(r.out, "state done");
	assert_line(r.out, "unique_key u-1");
	assert_line(r.out, "last_error first line");
	assert_line(r.out, "second line");
	assert_line(r.out, "result {\"sent\": true}");
	assert_line(r.out, "locked_by -");
	assert_true(has_line(r.out, "finished_at 20"));
	t_run_free(&r);

	const char *json[] = {"show", "--json", "1", NULL};
	pgjob_ok(&r, json);
	/* Numbers as PostgreSQL printed them, not rounded through a double. */
	assert_non_null(strstr(r.out, "\"lease_token\":9007199254740993"));
	assert_non_null(strstr(r.out, "\"big\": 12345678901234567890"));
	cJSON *j = parse_json(r.out);
	assert_int_equal(num(j, "id"), 1);
	assert_string_equal(str(j, "state"), "done");
	assert_int_equal(num(j, "attempts"), 2);
	assert_string_equal(str(j, "last_error"), "first line\nsecond line");
	assert_string_equal(str(item(j, "payload"), "to"), "a@b");
	assert_true(cJSON_IsTrue(item(item(j, "result"), "sent")));
	assert_true(cJSON_IsNull(item(j, "max_attempts")));
	assert_non_null(strchr(str(j, "created_at"), 'T'));
	cJSON_Delete(j);
	t_run_free(&r);

	const char *none[] = {"show", "123", NULL};
	t_pgjobv(&r, ci, none);
	assert_int_equal(r.status, 1);
	assert_string_equal(r.err, "pgjob: no job 123\n");
	assert_string_equal(r.out, "");
	t_run_free(&r);
	const char *none_json[] = {"show", "123", "--json", NULL};
	t_pgjobv(&r, ci, none_json);
	assert_int_equal(r.status, 1);
	assert_string_equal(r.err, "pgjob: no job 123\n");
	assert_string_equal(r.out, "");
	t_run_free(&r);
	PQfinish(c);
}

/* Runs pgjob args; checks exit status, stdout and stderr exactly. */
static void
expect(const char *const *args, int status, const char *out, const char *err)
{
	struct t_run r;
	t_pgjobv(&r, ci, args);
	if (r.status != status || strcmp(r.out, out) || strcmp(r.err, err))
		fail_msg("pgjob %s %s: exit %d, stdout \"%s\", stderr \"%s\"; "
			 "expected %d, \"%s\", \"%s\"",
			 args[0], args[1] ? args[1] : "", r.status, r.out,
			 r.err, status, out, err);
	t_run_free(&r);
}

/* Jobs 1..7: dead, cancelled, failed and waiting, running, done, never
 * run, and a dead job whose unique_key another job holds now. */
static void
retry_rows(PGconn *c)
{
	t_exec(c, "insert into pgjob.jobs (kind, state, attempts, run_at,"
		  " last_error, finished_at, locked_by, unique_key) values"
		  " ('k', 'dead', 20, now() - interval '1 day', 'boom',"
		  "  now(), null, null),"
		  " ('k', 'cancelled', 0, now(), null, now(), null, null),"
		  " ('k', 'available', 3, now() + interval '1 hour', 'slow',"
		  "  null, null, null),"
		  " ('k', 'running', 1, now(), null, null, 'h:1', null),"
		  " ('k', 'done', 1, now(), null, now(), null, null),"
		  " ('k', 'available', 0, now() + interval '1 hour', null,"
		  "  null, null, null),"
		  " ('k', 'dead', 5, now(), 'x', now(), null, 'key-1'),"
		  " ('k', 'available', 0, now(), null, null, null, 'key-1')");
}

static void
test_retry(void **state)
{
	PGconn *c = t_connect(ci);
	PGconn *listener = t_connect(ci);
	t_exec(listener, "listen pgjob");
	retry_rows(c);
	/* Its workers died in some of its attempts: a retry starts those
	 * over too. */
	t_exec(c, "update pgjob.jobs set lost_attempts = 4 where id = 1");
	t_notifications(listener); /* the insert's own */

	const char *r1[] = {"retry", "1", NULL};
	expect(r1, 0, "retried job 1 (was dead)\n", "");
	t_assert_job(c, 1,
		     "concat_ws('|', state, attempts, lost_attempts, "
		     "last_error, finished_at is null, run_at <= now())",
		     "available|0|0|boom|t|t");
	assert_int_equal(t_notifications(listener), 1);

	const char *r2[] = {"retry", "2", NULL};
	expect(r2, 0, "retried job 2 (was cancelled)\n", "");
	const char *r3[] = {"retry", "3", NULL};
	expect(r3, 0, "retried job 3 (was available)\n", "");
	t_assert_job(c, 3,
		     "concat_ws('|', state, attempts, last_error, run_at <= "
		     "now())",
		     "available|0|slow|t");
	assert_int_equal(t_notifications(listener), 2);

	const char *r4[] = {"retry", "4", NULL};
	expect(r4, 1, "",
	       "pgjob: job 4 is running: only dead, cancelled, done or failed "
	       "jobs can be retried\n");
	const char *r6[] = {"retry", "6", NULL};
	expect(r6, 1, "",
	       "pgjob: job 6 has not failed: it waits for its first "
	       "attempt\n");
	const char *r7[] = {"retry", "7", NULL};
	expect(r7, 1, "",
	       "pgjob: job 7 cannot be retried: job 8 holds its unique_key "
	       "\"key-1\"\n");
	const char *r9[] = {"retry", "99", NULL};
	expect(r9, 1, "", "pgjob: no job 99\n");
	/* Refusals change nothing and wake nobody. */
	for (int id = 4; id <= 7; id++) {
		static const char *const was[] = {"running|1", "done|1",
						  "available|0", "dead|5"};
		t_assert_job(c, id, "state || '|' || attempts", was[id - 4]);
	}
	assert_int_equal(t_notifications(listener), 0);

	/* A done job runs again, as from the console (before schema 33
	 * pgjob retry refused it); so does a plain job done, kept in
	 * pgjob.jobs_done, which goes back to pgjob.jobs first. */
	const char *r5[] = {"retry", "5", NULL};
	expect(r5, 0, "retried job 5 (was done)\n", "");
	t_assert_job(c, 5, "state || '|' || attempts", "available|0");
	t_exec(c, "insert into pgjob.jobs_done (id, kind, state, attempts,"
		  " finished_at, ring) values (50, 'k', 'done', 1, now(), 0)");
	const char *r50[] = {"retry", "50", NULL};
	expect(r50, 0, "retried job 50 (was done)\n", "");
	t_assert_value(c, "available 0",
		       "select (select state from pgjob.jobs where id = 50)"
		       " || ' ' || (select count(*) from pgjob.jobs_done)");
	assert_int_equal(t_notifications(listener), 2);
	assert_int_equal(t_notifications(listener), 0);
	PQfinish(listener);
	PQfinish(c);
}

static void
test_retry_dead(void **state)
{
	PGconn *c = t_connect(ci);
	t_exec(c,
	       "insert into pgjob.jobs (kind, state, attempts,"
	       " finished_at, unique_key) values"
	       " ('a', 'dead', 3, now(), null), ('a', 'dead', 3, now(), null),"
	       " ('b', 'dead', 3, now(), null), ('a', 'done', 1, now(), null),"
	       " ('c', 'dead', 3, now(), 'u'), ('c', 'dead', 3, now(), 'u'),"
	       " ('d', 'dead', 3, now(), 'v'), ('d', 'running', 1, null, 'v')");

	const char *a[] = {"retry", "--dead", "--kind", "a", NULL};
	expect(a, 0, "retried 2 dead jobs of kind a\n", "");
	assert_int_equal(t_long(c, "select count(*) from pgjob.all_jobs where"
				   " kind = 'a' and state = 'available'"
				   " and attempts = 0"),
			 2);
	t_assert_job(c, 3, "state || '|' || attempts", "dead|3");

	const char *none[] = {"retry", "--dead", "--kind", "zzz", NULL};
	expect(none, 0, "retried 0 dead jobs of kind zzz\n", "");

	/* Of two dead jobs with key u the newer comes back; v is held by a
	 * running job. */
	const char *all[] = {"retry", "--dead", NULL};
	expect(all, 0,
	       "retried 2 dead jobs; 2 left dead: another job holds their "
	       "unique_key\n",
	       "");
	t_assert_value(c,
		       "3:available,4:done,5:dead,6:available,7:dead,"
		       "8:running",
		       "select string_agg(id || ':' || state, ',' order by id) "
		       "from pgjob.all_jobs where id >= 3");
	PQfinish(c);
}

static void
test_cancel(void **state)
{
	PGconn *c = t_connect(ci);
	t_exec(c, "insert into pgjob.jobs (kind, state, attempts, finished_at,"
		  " locked_by) values ('k', 'available', 0, null, null),"
		  " ('k', 'running', 1, null, 'h:1'), ('k', 'done', 1, now(),"
		  " null), ('k', 'dead', 3, now(), null),"
		  " ('k', 'cancelled', 0, now(), null)");

	const char *c1[] = {"cancel", "1", NULL};
	expect(c1, 0, "cancelled job 1\n", "");
	t_assert_job(c, 1,
		     "state || '|' || (finished_at between now() - interval "
		     "'1 minute' and now())",
		     "cancelled|true");

	const char *c2[] = {"cancel", "2", NULL};
	expect(c2, 0,
	       "cancelled job 2 (running: its worker stops it at its next "
	       "lease renewal)\n",
	       "");
	const char *c3[] = {"cancel", "3", NULL};
	expect(c3, 1, "",
	       "pgjob: job 3 is done: only waiting, available or running jobs "
	       "can be "
	       "cancelled\n");
	const char *c4[] = {"cancel", "4", NULL};
	expect(c4, 1, "",
	       "pgjob: job 4 is dead: only waiting, available or running jobs "
	       "can be "
	       "cancelled\n");
	const char *c5[] = {"cancel", "5", NULL};
	expect(c5, 1, "", "pgjob: job 5 is already cancelled\n");
	expect(c1, 1, "", "pgjob: job 1 is already cancelled\n");
	const char *c9[] = {"cancel", "9", NULL};
	expect(c9, 1, "", "pgjob: no job 9\n");
	t_assert_value(c, "cancelled,cancelled,done,dead,cancelled",
		       "select string_agg(state, ',' order by id) from "
		       "pgjob.all_jobs");
	PQfinish(c);
}

static void
test_prune(void **state)
{
	PGconn *c = t_connect(ci);
	/* 1-3 are older than 7 days; 4-6 younger; 7-8 unfinished (and old). */
	t_exec(c,
	       "insert into pgjob.jobs (kind, state, finished_at,"
	       " created_at) values"
	       " ('k', 'done', now() - interval '30 days', now()),"
	       " ('k', 'dead', now() - interval '8 days', now()),"
	       " ('k', 'cancelled', now() - interval '7 days 1 hour', now()),"
	       " ('k', 'done', now() - interval '6 days', now()),"
	       " ('k', 'dead', now() - interval '1 day', now()),"
	       " ('k', 'done', now(), now()),"
	       " ('k', 'available', null, now() - interval '60 days'),"
	       " ('k', 'running', null, now() - interval '60 days')");
	struct t_run r;
	const char *def[] = {"prune", NULL};
	pgjob_ok(&r, def);
	assert_non_null(strstr(r.out, "pruned 3 jobs finished before "));
	t_run_free(&r);
	t_assert_value(c, "4,5,6,7,8",
		       "select string_agg(id::text, ',' order by id) from "
		       "pgjob.all_jobs");

	const char *h[] = {"prune", "--older-than", "12h", NULL};
	pgjob_ok(&r, h);
	assert_non_null(strstr(r.out, "pruned 2 jobs finished before "));
	t_run_free(&r);
	t_assert_value(c, "6,7,8",
		       "select string_agg(id::text, ',' order by id) from "
		       "pgjob.all_jobs");

	/* More than one batch of 10,000. */
	t_exec(c, "insert into pgjob.jobs (kind, state, finished_at)"
		  " select 'bulk', 'done', now() - interval '9 days'"
		  " from generate_series(1, 25003)");
	pgjob_ok(&r, def);
	assert_non_null(strstr(r.out, "pruned 25003 jobs finished before "));
	t_run_free(&r);
	pgjob_ok(&r, def);
	assert_non_null(strstr(r.out, "pruned 0 jobs finished before "));
	t_run_free(&r);
	assert_int_equal(t_long(c, "select count(*) from pgjob.all_jobs"), 3);
	PQfinish(c);
}

/* Without --older-than, the config's retention decides. */
static void
test_prune_retention(void **state)
{
	PGconn *c = t_connect(ci);
	t_exec(c, "insert into pgjob.jobs (kind, state, finished_at) values"
		  " ('k', 'done', now() - interval '3 days'),"
		  " ('k', 'done', now() - interval '1 day')");
	const char *cfg = t_config("retention", ci, "retention: 2d\n");
	const char *argv[] = {t_bin("pgjob"), "-c", cfg, "prune", NULL};
	struct t_run r;
	t_run(&r, 60, NULL, argv);
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, "pruned 1 job finished before "));
	t_run_free(&r);
	assert_int_equal(t_long(c, "select count(*) from pgjob.all_jobs"), 1);
	PQfinish(c);
}

/*
 * With databases: in the config, --database is a name of one, or a
 * conninfo; a name that is not there is refused with the names.
 */
static void
test_database_names(void **state)
{
	char cfg[600], text[2600], want[800];
	snprintf(cfg, sizeof(cfg), "%s/names.yaml", t_tmpdir());
	snprintf(text, sizeof(text),
		 "databases:\n"
		 "  alpha: { conninfo: \"%s\" }\n"
		 "  beta: { conninfo: \"%s\" }\n",
		 ci, ci);
	t_write_file(cfg, text);
	struct t_run r;
	const char *const picks[] = {"alpha", ci};
	for (int i = 0; i < 2; i++) {
		const char *argv[] = {t_bin("pgjob"), "-c",   cfg, "--database",
				      picks[i],	      "jobs", NULL};
		t_run(&r, 60, NULL, argv);
		assert_int_equal(r.status, 0);
		t_run_free(&r);
	}
	const char *argv[] = {t_bin("pgjob"), "-c",   cfg, "--database",
			      "gamma",	      "jobs", NULL};
	t_run(&r, 60, NULL, argv);
	assert_int_equal(r.status, 2);
	snprintf(want, sizeof(want),
		 "pgjob: no database gamma in %s (names: alpha, beta)\n", cfg);
	assert_string_equal(r.err, want);
	t_run_free(&r);

	/* status of each: one that cannot be reached is named. */
	snprintf(text, sizeof(text),
		 "databases:\n"
		 "  alpha: { conninfo: \"%s\" }\n"
		 "  beta: { conninfo: \"host=127.0.0.1 port=1 dbname=x\" }\n",
		 ci);
	t_write_file(cfg, text);
	const char *status[] = {t_bin("pgjob"), "-c",	  cfg,
				"status",	"--json", NULL};
	t_run(&r, 60, NULL, status);
	assert_int_equal(r.status, 1);
	assert_non_null(strstr(r.err, "pgjob: status: database beta: not "
				      "reachable"));
	cJSON *j = cJSON_Parse(r.out);
	assert_non_null(j);
	const cJSON *dbs = item(j, "databases");
	assert_int_equal(cJSON_GetArraySize(dbs), 2);
	assert_true(
		cJSON_IsTrue(item(cJSON_GetArrayItem(dbs, 0), "reachable")));
	assert_true(
		cJSON_IsFalse(item(cJSON_GetArrayItem(dbs, 1), "reachable")));
	cJSON_Delete(j);
	t_run_free(&r);
}

static void
test_top_once(void **state)
{
	PGconn *c = t_connect(ci);
	t_exec(c,
	       "insert into pgjob.jobs (kind, queue, state, run_at,"
	       " finished_at) values"
	       " ('resize', 'img', 'done', now(), now()),"
	       " ('resize', 'img', 'done', now(), now()),"
	       " ('resize', 'img', 'done', now(), now() - interval '1 hour'),"
	       " ('resize', 'img', 'dead', now(), now()),"
	       " ('resize', 'img', 'running', now(), null),"
	       " ('email', 'default', 'available', now(), null),"
	       " ('email', 'default', 'available', now() + interval '1 day',"
	       "  null),"
	       " ('old', 'default', 'done', now(), now() - interval '1 day')");
	/* The queues' done jobs of the last minute: the workers' history. */
	t_exec(c, "insert into pgjob.history_minutes (at, queue, kind, done)"
		  " values (date_trunc('minute', now()), 'img', 'resize', 2)");
	struct t_run r;
	const char *args[] = {"top", "--once", "--interval", "10m", NULL};
	pgjob_ok(&r, args);
	assert_true(has_line(r.out, "pgjob top "));
	assert_line(r.out, "KIND DONE DONE/S DEAD RUNNING DUE");
	assert_line(r.out, "email 0 0.0 0 0 1");
	assert_line(r.out, "resize 2 0.0 1 1 0");
	assert_false(has_line(r.out, "old "));
	assert_true(has_line(r.out, "default 1 1 0 0 "));
	assert_true(has_line(r.out, "img 0 0 1 1 - 2"));
	/* One frame, no clearing. */
	assert_null(strchr(r.out, '\033'));
	t_run_free(&r);
	PQfinish(c);
}

/* Without --once, top refreshes until SIGINT or SIGTERM, then exits 0;
 * into a file it writes plain frames. */
static void
test_top_signals(void **state)
{
	static const int sigs[] = {SIGINT, SIGTERM};
	for (size_t i = 0; i < 2; i++) {
		const char *log = i ? "top_term" : "top_int";
		const char *argv[] = {t_bin("pgjob"), "--database", ci,	 "top",
				      "--interval",   "100ms",	    NULL};
		pid_t pid = t_spawn(t_log(log), NULL, argv);
		t_wait_log(log, "pgjob top", 2, 5);
		assert_int_equal(t_stop(pid, sigs[i], 10), 0);
		assert_int_equal(t_log_count(log, "pgjob:"), 0);
		/* Not a terminal: frames one after another, no escape
		 * codes. */
		assert_int_equal(t_log_count(log, "\033"), 0);
	}
}

static void
test_usage(void **state)
{
	static const struct {
		const char *args[6];
		const char *err;
	} cases[] = {
		{{"status", "--bogus"}, "status: unknown option \"--bogus\""},
		{{"status", "extra"}, "status: unexpected argument \"extra\""},
		{{"jobs", "--state", "weird"}, "jobs: bad --state \"weird\""},
		{{"jobs", "--limit", "0"}, "jobs: bad --limit \"0\""},
		{{"jobs", "--limit"}, "jobs: option \"--limit\" needs a value"},
		{{"jobs", "-x"}, "jobs: unknown option \"-x\""},
		{{"show"}, "show: missing job ID"},
		{{"show", "abc"}, "show: bad job id \"abc\""},
		{{"show", "1", "2"}, "show: unexpected argument \"2\""},
		{{"retry"}, "retry: missing job ID (or --dead)"},
		{{"retry", "--dead", "3"}, "retry: give a job ID or --dead"},
		{{"retry", "--kind", "k"}, "retry: --kind goes with --dead"},
		{{"cancel"}, "cancel: missing job ID"},
		{{"cancel", "0"}, "cancel: bad job id \"0\""},
		{{"prune", "--older-than", "5x"},
		 "prune: bad --older-than \"5x\" (unknown unit"},
		{{"prune", "--older-than", "-1d"},
		 "prune: bad --older-than \"-1d\""},
		{{"top", "--interval", "10ms"},
		 "top: bad --interval \"10ms\" (from 100ms to 1d)"},
		{{"top", "--interval", "soon"}, "top: bad --interval \"soon\""},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct t_run r;
		t_pgjobv(&r, ci, cases[i].args);
		if (r.status != 2 || strncmp(r.err, "pgjob: ", 7) ||
		    strncmp(r.err + 7, cases[i].err, strlen(cases[i].err)) ||
		    strchr(r.err, '\n') != r.err + strlen(r.err) - 1)
			fail_msg("pgjob %s: exit %d, \"%s\"", cases[i].args[0],
				 r.status, r.err);
		assert_string_equal(r.out, "");
		t_run_free(&r);
	}
}

static void
test_help(void **state)
{
	static const char *const commands[] = {
		"migrate", "enqueue", "status",	  "jobs",   "show",
		"retry",   "cancel",  "prune",	  "top",    "pause",
		"resume",  "limits",  "workflow", "version"};
	struct t_run r;
	const char *argv[] = {t_bin("pgjob"), "--help", NULL};
	t_run(&r, 30, NULL, argv);
	assert_int_equal(r.status, 0);
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		char want[32];
		snprintf(want, sizeof(want), "\n  %s", commands[i]);
		if (!strstr(r.out, want))
			fail_msg("--help does not list %s", commands[i]);
	}
	t_run_free(&r);
	/* COMMAND --help: that command's lines only, for every command. */
	for (size_t i = 0; i + 1 < sizeof(commands) / sizeof(commands[0]);
	     i++) {
		const char *sub[] = {commands[i], "--help", NULL};
		t_pgjobv(&r, ci, sub);
		assert_int_equal(r.status, 0);
		assert_non_null(strstr(r.out, "usage: pgjob"));
		char want[32];
		snprintf(want, sizeof(want), "\n  %s", commands[i]);
		if (!strstr(r.out, want))
			fail_msg("%s --help does not show it", commands[i]);
		const char *other = strcmp(commands[i], "migrate")
					    ? "\n  migrate"
					    : "\n  enqueue";
		if (strstr(r.out, other))
			fail_msg("%s --help shows other commands too",
				 commands[i]);
		t_run_free(&r);
	}
}

/* Fails unless ps shows pid without the secrets, the rest still there. */
static void
assert_scrubbed(pid_t pid)
{
	char *cmd = t_cmdline(pid);
	if (!cmd)
		fail_msg("pid %d is gone", (int)pid);
	if (strstr(cmd, "s3cret") || strstr(cmd, "first1") ||
	    strstr(cmd, "k3y") || !strstr(cmd, "dbname=t_cli") ||
	    !strstr(cmd, "password=****** "))
		fail_msg("pid %d shows: %s", (int)pid, cmd);
	free(cmd);
}

/*
 * A password given with -d/--database is hidden from ps in pgjobd's
 * supervisor and its workers, and in a pgjob command that runs long, while
 * they use it: the config's conninfo leads nowhere, so the workers are
 * connected with the -d given last.
 */
static void
test_password_not_in_ps(void **state)
{
	PGconn *c = t_connect(ci);
	char *db = NULL;
	if (asprintf(&db, "%s password=s3cret sslpassword='k3y x'", ci) < 0)
		fail_msg("asprintf");
	const char *cfg =
		t_config("ps", "dbname=t_cli_nowhere",
			 "handlers:\n"
			 "  x: { type: exec, command: [\"/bin/true\"] }\n");
	const char *argv[] = {t_bin("pgjobd"),
			      "-c",
			      cfg,
			      "-w",
			      "1",
			      "-d",
			      "dbname=x password=first1",
			      "--database",
			      db,
			      NULL};
	pid_t sup = t_spawn(t_log("ps"), NULL, argv);
	pid_t worker = t_worker_pid(c, sup);
	assert_scrubbed(sup);
	assert_scrubbed(worker);
	t_stop_clean(sup);

	const char *top[] = {
		t_bin("pgjob"), "--database=dbname=x password=first1",
		"--database",	db,
		"top",		"--interval",
		"100ms",	NULL};
	pid_t pid = t_spawn(t_log("ps_top"), NULL, top);
	t_wait_log("ps_top", "pgjob top", 1, 5);
	assert_scrubbed(pid);
	assert_int_equal(t_stop(pid, SIGTERM, 10), 0);
	free(db);
	PQfinish(c);
}

/*
 * Fails when text holds anything a terminal acts on: a control character
 * other than a line break (C0, DEL, or C1 U+0080..U+009F as UTF-8), or a
 * byte that is not valid UTF-8 (a lone 0x9b is CSI to an 8-bit terminal).
 */
static void
assert_terminal_safe(const char *what, const char *text)
{
	const unsigned char *p = (const unsigned char *)text;
	for (size_t i = 0; p[i];) {
		size_t n = utf8_len(p + i);
		int bad = n == 0 || (p[i] < 0x20 && p[i] != '\n') ||
			  p[i] == 0x7f || (p[i] == 0xc2 && p[i + 1] < 0xa0);
		if (bad)
			fail_msg("%s: byte 0x%02x at %zu in:\n%s", what, p[i],
				 i, text);
		i += n;
	}
}

#define HOSTILE_KIND "k\x1b[2J\r\x07\xff"
/* The same in --json output: the byte that is not UTF-8 is U+FFFD. */
#define HOSTILE_KIND_JSON "k\x1b[2J\r\x07\xef\xbf\xbd"

/*
 * A database in SQL_ASCII, where text columns keep any bytes, migrated:
 * what a client wrote there reaches pgjob as it is.  Returns its conninfo
 * (caller frees).
 */
static char *
ascii_db(void)
{
	PGconn *c = t_connect(t_server_conninfo());
	t_exec(c, "drop database if exists t_cli_ascii with (force)");
	t_exec(c, "create database t_cli_ascii encoding 'SQL_ASCII'"
		  " locale 'C' template template0");
	PQfinish(c);
	char *db = NULL;
	if (asprintf(&db, "%s dbname=t_cli_ascii", t_server_conninfo()) < 0)
		fail_msg("asprintf");
	t_migrate(db);
	return db;
}

/* Runs `pgjob --database db ARGS...` and checks what it printed. */
static void
pgjob_safe(struct t_run *r, const char *db, int status, const char *const *args)
{
	t_pgjobv(r, db, args);
	if (r->status != status)
		fail_msg("pgjob %s: exit %d: %s", args[0], r->status, r->err);
	assert_terminal_safe(args[0], r->out);
	assert_terminal_safe(args[0], r->err);
}

/*
 * Escape sequences, CR, BEL, C1 controls and bytes that are not UTF-8 in a
 * job's columns reach the terminal from no command: show, jobs, status,
 * top and retry's messages print them as visible escapes.  --json keeps
 * them exact (JSON escapes control characters), but for bytes that are not
 * UTF-8, which become U+FFFD: JSON text is UTF-8.
 */
static void
test_hostile_text(void **state)
{
	char *db = ascii_db();
	PGconn *c = t_connect(db);
	t_exec(c, "insert into pgjob.jobs (kind, queue, payload, state,"
		  " last_error, unique_key, locked_by, finished_at) values"
		  " (E'k\\x1b[2J\\r\\x07\\xff', E'q\\x1b]0;t\\x07',"
		  "  E'{\"a\": \"\\xc2\\x9b2J\\x7f\\xff\"}', 'dead',"
		  "  E'err\\x1b[31m\\r\\nline2\\x07\\xfe', E'u\\x1bk',"
		  "  E'h\\x1b:1', now()),"
		  " (E'k\\x1b[2J\\r\\x07\\xff', 'default', '{}', 'available',"
		  "  null, E'u\\x1bk', null, null)");
	PQfinish(c);
	struct t_run r;

	const char *show[] = {"show", "1", NULL};
	pgjob_safe(&r, db, 0, show);
	assert_line(r.out, "kind k\\x1b[2J\\x0d\\x07\\xff");
	assert_line(r.out, "queue q\\x1b]0;t\\x07");
	assert_line(r.out, "payload {\"a\": \"\\u009b2J\\x7f\\xff\"}");
	assert_line(r.out, "last_error err\\x1b[31m\\x0d");
	assert_line(r.out, "line2\\x07\\xfe");
	assert_line(r.out, "unique_key u\\x1bk");
	assert_line(r.out, "locked_by h\\x1b:1");
	t_run_free(&r);

	t_pgjob(&r, db, "show", "1", "--json", NULL);
	cJSON *j = json_of(&r, "show --json");
	assert_string_equal(str(j, "kind"), HOSTILE_KIND_JSON);
	assert_string_equal(str(j, "last_error"),
			    "err\x1b[31m\r\nline2\x07\xef\xbf\xbd");
	/* In the payload too, which is JSON from the database. */
	assert_string_equal(str(item(j, "payload"), "a"), "\xc2\x9b"
							  "2J\x7f\xef\xbf\xbd");
	cJSON_Delete(j);
	/* Every --json that prints the kind or queue: valid UTF-8. */
	static const char *const json_cmds[][5] = {
		{"jobs", "--json"},
		{"status", "--json"},
		{"top", "--once", "--json"},
		{"retry", "--dead", "--kind", HOSTILE_KIND, "--json"},
	};
	for (size_t i = 0; i < 4; i++) {
		const char *args[6] = {NULL};
		memcpy(args, json_cmds[i], sizeof(json_cmds[i]));
		t_pgjobv(&r, db, args);
		cJSON_Delete(json_of(&r, args[0]));
	}
	t_pgjob(&r, db, "retry", "--dead", "--kind", HOSTILE_KIND, "--json",
		NULL);
	j = json_of(&r, "retry --dead --json");
	assert_string_equal(str(j, "kind"), HOSTILE_KIND_JSON);
	cJSON_Delete(j);

	const char *jobs[] = {"jobs", NULL};
	pgjob_safe(&r, db, 0, jobs);
	assert_non_null(strstr(r.out, "k\\x1b[2J \\x07\\xff"));
	t_run_free(&r);
	const char *status[] = {"status", NULL};
	pgjob_safe(&r, db, 0, status);
	assert_non_null(strstr(r.out, "k\\x1b[2J \\x07\\xff"));
	t_run_free(&r);
	const char *top[] = {"top", "--once", NULL};
	pgjob_safe(&r, db, 0, top);
	assert_non_null(strstr(r.out, "k\\x1b[2J \\x07\\xff"));
	t_run_free(&r);

	/* Job 2 holds the unique_key: the refusal quotes it. */
	const char *retry[] = {"retry", "1", NULL};
	pgjob_safe(&r, db, 1, retry);
	assert_string_equal(r.err, "pgjob: job 1 cannot be retried: job 2 "
				   "holds its unique_key \"u\\x1bk\"\n");
	t_run_free(&r);
	const char *dead[] = {"retry", "--dead", "--kind", HOSTILE_KIND, NULL};
	pgjob_safe(&r, db, 0, dead);
	assert_string_equal(r.out, "retried 0 dead jobs of kind "
				   "k\\x1b[2J \\x07\\xff; 1 left dead: another "
				   "job holds their unique_key\n");
	t_run_free(&r);
	const char *bad[] = {"show", "\x1b[2J", NULL};
	pgjob_safe(&r, db, 2, bad);
	assert_string_equal(r.err, "pgjob: show: bad job id \"\\x1b[2J\" (a "
				   "positive integer)\n");
	t_run_free(&r);
	free(db);
}

/* The number at key of o, which must be a number, as a long long. */
static long long
lnum(const cJSON *o, const char *key)
{
	return (long long)num(o, key);
}

/*
 * retry, retry --dead and cancel with --json: one object each, whose
 * values are the database's after the command.
 */
static void
test_json_state(void **state)
{
	PGconn *c = t_connect(ci);
	t_exec(c, "insert into pgjob.jobs (kind, state, attempts, finished_at,"
		  " locked_by, unique_key) values"
		  " ('charge', 'dead', 3, now(), null, null),"
		  " ('charge', 'dead', 3, now(), null, null),"
		  " ('mail', 'cancelled', 0, now(), null, null),"
		  " ('mail', 'available', 0, null, null, null),"
		  " ('mail', 'running', 1, null, 'h:1', null),"
		  " ('charge', 'dead', 3, now(), null, 'u'),"
		  " ('charge', 'running', 1, null, 'h:1', 'u')");

	const char *r3[] = {"retry", "3", NULL};
	cJSON *j = pgjob_json(r3);
	assert_int_equal(lnum(j, "id"), 3);
	assert_string_equal(str(j, "state"), "available");
	assert_string_equal(str(j, "was"), "cancelled");
	t_assert_job(c, 3, "state", "available");
	cJSON_Delete(j);

	const char *dead[] = {"retry", "--dead", "--kind", "charge", NULL};
	j = pgjob_json(dead);
	assert_int_equal(lnum(j, "retried"), 2);
	assert_int_equal(lnum(j, "left_dead"), 1);
	assert_string_equal(str(j, "kind"), "charge");
	char *ids = cJSON_PrintUnformatted(item(j, "ids"));
	char *want = t_value(c, "select json_agg(id order by id)::text"
				" from pgjob.all_jobs where kind = 'charge'"
				" and state = 'available'");
	assert_string_equal(ids, "[1,2]");
	assert_string_equal(want, "[1, 2]");
	free(want);
	free(ids);
	cJSON_Delete(j);
	const char *none[] = {"retry", "--dead", NULL};
	j = pgjob_json(none);
	assert_int_equal(lnum(j, "retried"), 0);
	assert_int_equal(cJSON_GetArraySize(item(j, "ids")), 0);
	assert_true(cJSON_IsNull(item(j, "kind")));
	cJSON_Delete(j);

	static const char *const was[] = {"available", "running"};
	for (int id = 4; id <= 5; id++) {
		char n[8];
		snprintf(n, sizeof(n), "%d", id);
		const char *cancel[] = {"cancel", n, NULL};
		j = pgjob_json(cancel);
		assert_int_equal(lnum(j, "id"), id);
		assert_string_equal(str(j, "state"), "cancelled");
		assert_string_equal(str(j, "was"), was[id - 4]);
		t_assert_job(c, id, "state", "cancelled");
		cJSON_Delete(j);
	}
	PQfinish(c);
}

/*
 * enqueue --json: the id, and whether it is the job that already held the
 * unique key (nothing inserted); prune --json: the count and the cutoff.
 */
static void
test_json_enqueue_prune(void **state)
{
	PGconn *c = t_connect(ci);
	const char *first[] = {"enqueue",      "mail", "{\"to\": 1}",
			       "--unique-key", "k1",   NULL};
	cJSON *j = pgjob_json(first);
	long long id = lnum(j, "id");
	assert_true(cJSON_IsFalse(item(j, "existing")));
	cJSON_Delete(j);
	assert_int_equal(t_long(c, "select id from pgjob.all_jobs"
				   " where unique_key = 'k1'"),
			 id);
	j = pgjob_json(first);
	assert_int_equal(lnum(j, "id"), id);
	assert_true(cJSON_IsTrue(item(j, "existing")));
	cJSON_Delete(j);
	assert_int_equal(t_long(c, "select count(*) from pgjob.all_jobs"), 1);
	const char *plain[] = {"enqueue", "mail", NULL};
	j = pgjob_json(plain);
	assert_true(cJSON_IsFalse(item(j, "existing")));
	assert_int_equal(t_long(c, "select max(id) from pgjob.all_jobs"),
			 lnum(j, "id"));
	assert_true(lnum(j, "id") != id);
	cJSON_Delete(j);

	t_exec(c, "insert into pgjob.jobs (kind, state, finished_at) values"
		  " ('k', 'done', now() - interval '3 days'),"
		  " ('k', 'dead', now() - interval '2 days'),"
		  " ('k', 'done', now())");
	const char *prune[] = {"prune", "--older-than", "1d", NULL};
	j = pgjob_json(prune);
	assert_int_equal(lnum(j, "pruned"), 2);
	char *day = t_value(c, "select to_char(now() - interval '1 day',"
			       " 'YYYY-MM-DD\"T\"HH24')");
	assert_int_equal(strncmp(str(j, "finished_before"), day, 13), 0);
	assert_non_null(strstr(str(j, "finished_before"), "+00:00"));
	free(day);
	cJSON_Delete(j);
	assert_int_equal(t_long(c, "select count(*) from pgjob.all_jobs"
				   " where kind = 'k'"),
			 1);
	PQfinish(c);
}

/*
 * enqueue --json under the enqueue-only role of docs/security.md (usage on
 * the schema, execute on pgjob.enqueue, no right on pgjob.jobs): the job is
 * enqueued; "existing" is false without --unique-key and null with it (the
 * role cannot look).  workflow submit --json is all or nothing.
 */
static void
test_json_enqueue_role(void **state)
{
	PGconn *c = t_connect(ci);
	char role[64], ce[1200];
	snprintf(role, sizeof(role), "cli_enqueue_%d", (int)getpid());
	t_exec(c, "create role %s login", role);
	t_exec(c, "grant usage on schema pgjob to %s", role);
	t_exec(c, "grant execute on function pgjob.enqueue to %s", role);
	snprintf(ce, sizeof(ce), "%s user=%s", ci, role);

	struct t_run r;
	const char *plain[] = {"enqueue", "mail", "--json", NULL};
	t_pgjobv(&r, ce, plain);
	cJSON *j = json_of(&r, "enqueue");
	assert_true(cJSON_IsFalse(item(j, "existing")));
	assert_int_equal(t_long(c, "select max(id) from pgjob.all_jobs"),
			 lnum(j, "id"));
	cJSON_Delete(j);
	const char *keyed[] = {"enqueue", "mail",   "{}", "--unique-key",
			       "r1",	  "--json", NULL};
	t_pgjobv(&r, ce, keyed);
	j = json_of(&r, "enqueue");
	assert_true(cJSON_IsNull(item(j, "existing")));
	assert_int_equal(t_long(c, "select id from pgjob.all_jobs"
				   " where unique_key = 'r1'"),
			 lnum(j, "id"));
	cJSON_Delete(j);
	assert_int_equal(t_long(c, "select count(*) from pgjob.all_jobs"), 2);

	/* workflow submit --json reads the steps' jobs, which this role may
	 * not: the command fails, and leaves no workflow behind. */
	t_exec(c, "grant execute on function pgjob.enqueue_workflow to %s",
	       role);
	const char *submit[] = {"workflow", "submit",
				t_src("examples/workflows/publish.json"),
				"--json", NULL};
	long long workflows = t_long(c, "select count(*) from pgjob.workflows");
	t_pgjobv(&r, ce, submit);
	assert_int_equal(r.status, 1);
	assert_non_null(strstr(r.err, "permission denied"));
	t_run_free(&r);
	assert_int_equal(t_long(c, "select count(*) from pgjob.all_jobs"), 2);
	assert_int_equal(t_long(c, "select count(*) from pgjob.workflows"),
			 workflows);

	t_exec(c, "drop owned by %s", role);
	t_exec(c, "drop role %s", role);
	PQfinish(c);
}

/* top --once --json: one frame whose counts are the database's. */
static void
test_json_top(void **state)
{
	PGconn *c = t_connect(ci);
	t_exec(c, "insert into pgjob.jobs (kind, queue, state, finished_at,"
		  " run_at) values"
		  " ('img', 'default', 'done', now(), now()),"
		  " ('img', 'default', 'done', now(), now()),"
		  " ('img', 'default', 'running', null, now()),"
		  " ('mail', 'out', 'available', null, now()),"
		  " ('mail', 'out', 'dead', now(), now()),"
		  " ('mail', 'out', 'available', null,"
		  "  now() + interval '1 hour')");
	const char *top[] = {"top", "--once", "--interval", "1h", NULL};
	cJSON *j = pgjob_json(top);
	assert_int_equal(lnum(j, "interval_ms"), 3600000);
	assert_non_null(strstr(str(j, "time"), "+00:00"));
	const cJSON *kinds = item(j, "kinds");
	assert_int_equal(cJSON_GetArraySize(kinds), 2);
	const cJSON *img = cJSON_GetArrayItem(kinds, 0);
	assert_string_equal(str(img, "kind"), "img");
	assert_int_equal(lnum(img, "done"), 2);
	assert_int_equal(lnum(img, "running"), 1);
	assert_int_equal(lnum(img, "due"), 0);
	/* 2 jobs in an hour. */
	assert_true(fabs(num(img, "done_per_s") - 2.0 / 3600) < 1e-12);
	const cJSON *mail = cJSON_GetArrayItem(kinds, 1);
	assert_int_equal(lnum(mail, "dead"), 1);
	assert_int_equal(lnum(mail, "due"), 1);
	const cJSON *qs = item(j, "queues");
	assert_int_equal(cJSON_GetArraySize(qs), 2);
	const cJSON *out = cJSON_GetArrayItem(qs, 1);
	assert_string_equal(str(out, "queue"), "out");
	assert_int_equal(lnum(out, "due"), 1);
	assert_int_equal(lnum(out, "scheduled"), 1);
	assert_int_equal(lnum(out, "dead"), 1);
	cJSON_Delete(j);
	PQfinish(c);
}

/*
 * top --json without --once: one JSON object per line per refresh (JSON
 * Lines) until SIGTERM, no escape codes, no blank lines between them.
 */
static void
test_json_top_lines(void **state)
{
	const char *argv[] = {t_bin("pgjob"), "--database", ci,	      "top",
			      "--interval",   "100ms",	    "--json", NULL};
	pid_t pid = t_spawn(t_log("top_json"), NULL, argv);
	t_wait_log("top_json", "\"interval_ms\":100,", 3, 10);
	assert_int_equal(t_stop(pid, SIGTERM, 10), 0);
	char *log = t_read_file(t_log("top_json"));
	assert_utf8("top --json", log);
	int lines = 0;
	for (char *line = log, *end; *line; line = end + 1) {
		end = strchr(line, '\n');
		if (!end)
			fail_msg("top --json: a line without its end:\n%s",
				 line);
		*end = '\0';
		cJSON *j = parse_json(line);
		assert_int_equal(lnum(j, "interval_ms"), 100);
		assert_true(cJSON_IsArray(item(j, "queues")));
		cJSON_Delete(j);
		lines++;
	}
	assert_true(lines >= 3);
	free(log);
}

/* version --json: this build's version and schema version. */
static void
test_json_version(void **state)
{
	PGconn *c = t_connect(ci);
	const char *version[] = {"version", NULL};
	cJSON *j = pgjob_json(version);
	struct t_run r;
	const char *v[] = {t_bin("pgjob"), "-V", NULL};
	t_run(&r, 30, NULL, v);
	char want[128];
	snprintf(want, sizeof(want), "pgjob %s (schema version %lld)\n",
		 str(j, "version"), lnum(j, "schema_version"));
	assert_string_equal(r.out, want);
	t_run_free(&r);
	assert_int_equal(lnum(j, "schema_version"),
			 t_long(c, "select max(version) from"
				   " pgjob.schema_version"));
	cJSON_Delete(j);
	PQfinish(c);
}

/*
 * migrate --json on an empty database: every migration applied, in order;
 * again: none.  --status --json lists each with applied true or false.
 */
static void
test_json_migrate(void **state)
{
	char *db = strdup(t_db_create("t_cli_migrate"));
	struct t_run r;
	t_pgjob(&r, db, "migrate", "--status", "--json", NULL);
	cJSON *j = json_of(&r, "migrate --status");
	assert_int_equal(lnum(j, "schema_version"), 0);
	long long latest = lnum(j, "latest");
	assert_true(cJSON_IsFalse(item(j, "database_newer")));
	const cJSON *m;
	cJSON_ArrayForEach(m, item(j, "migrations"))
		assert_true(cJSON_IsFalse(item(m, "applied")));
	assert_int_equal(cJSON_GetArraySize(item(j, "migrations")), latest);
	cJSON_Delete(j);

	t_pgjob(&r, db, "migrate", "--json", NULL);
	j = json_of(&r, "migrate");
	assert_int_equal(lnum(j, "schema_version"), latest);
	const cJSON *applied = item(j, "applied");
	assert_int_equal(cJSON_GetArraySize(applied), latest);
	PGconn *c = t_connect(db);
	int i = 0;
	/* Each as pgjob.schema_version has it now, in order. */
	cJSON_ArrayForEach(m, applied)
	{
		assert_int_equal(lnum(m, "version"), ++i);
		char *name = t_value(c,
				     "select name from pgjob.schema_version"
				     " where version = %lld",
				     lnum(m, "version"));
		assert_string_equal(str(m, "name"), name);
		free(name);
	}
	assert_int_equal(t_long(c, "select max(version) from"
				   " pgjob.schema_version"),
			 latest);
	cJSON_Delete(j);

	t_pgjob(&r, db, "migrate", "--json", NULL);
	j = json_of(&r, "migrate again");
	assert_int_equal(cJSON_GetArraySize(item(j, "applied")), 0);
	cJSON_Delete(j);
	t_pgjob(&r, db, "migrate", "--status", "--json", NULL);
	j = json_of(&r, "migrate --status again");
	assert_int_equal(lnum(j, "schema_version"), latest);
	cJSON_ArrayForEach(m, item(j, "migrations"))
		assert_true(cJSON_IsTrue(item(m, "applied")));
	cJSON_Delete(j);

	/* --dry-run prints SQL, never JSON. */
	t_pgjob(&r, db, "migrate", "--dry-run", "--json", NULL);
	assert_int_equal(r.status, 2);
	assert_string_equal(r.out, "");
	assert_string_equal(r.err, "pgjob: migrate: --dry-run prints SQL: it "
				   "has no --json\n");
	t_run_free(&r);
	PQfinish(c);
	free(db);
}

/*
 * workflow submit --json: the workflow's id and its steps' jobs; cancel
 * --json: how many steps it cancelled.
 */
static void
test_json_workflow(void **state)
{
	PGconn *c = t_connect(ci);
	const char *submit[] = {"workflow", "submit",
				t_src("examples/workflows/publish.json"), NULL};
	cJSON *j = pgjob_json(submit);
	long long wf = lnum(j, "id");
	const cJSON *steps = item(j, "steps"), *s;
	assert_int_equal(cJSON_GetArraySize(steps),
			 t_long(c,
				"select count(*) from pgjob.all_jobs"
				" where workflow_id = %lld",
				wf));
	cJSON_ArrayForEach(s, steps)
	{
		char *step = t_job(c, lnum(s, "id"), "step");
		assert_string_equal(step, str(s, "step"));
		free(step);
		assert_int_equal(t_long(c,
					"select workflow_id from pgjob.all_jobs"
					" where id = %lld",
					lnum(s, "id")),
				 wf);
	}
	cJSON_Delete(j);

	char id[24];
	snprintf(id, sizeof(id), "%lld", wf);
	const char *cancel[] = {"workflow", "cancel", id, NULL};
	j = pgjob_json(cancel);
	assert_int_equal(lnum(j, "id"), wf);
	assert_int_equal(lnum(j, "cancelled"),
			 t_long(c,
				"select count(*) from pgjob.all_jobs where"
				" workflow_id = %lld and state = 'cancelled'",
				wf));
	assert_true(lnum(j, "cancelled") > 0);
	cJSON_Delete(j);
	PQfinish(c);
}

/*
 * With --json, a command that fails prints nothing on stdout, its error on
 * stderr as without it, and exits as without it.
 */
static void
test_json_errors(void **state)
{
	static const struct {
		const char *args[6];
		int status;
		const char *err;
	} cases[] = {
		{{"cancel", "4242", "--json"}, 1, "pgjob: no job 4242\n"},
		{{"retry", "4242", "--json"}, 1, "pgjob: no job 4242\n"},
		{{"show", "4242", "--json"}, 1, "pgjob: no job 4242\n"},
		{{"workflow", "cancel", "4242", "--json"},
		 1,
		 "pgjob: workflow cancel: no workflow 4242\n"},
		{{"enqueue", "k", "[1]", "--json"},
		 2,
		 "pgjob: enqueue: payload must be a JSON object: [1]\n"},
		{{"top", "--interval", "1ms", "--json"},
		 2,
		 "pgjob: top: bad --interval \"1ms\" (from 100ms to 1d)\n"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct t_run r;
		t_pgjobv(&r, ci, cases[i].args);
		if (r.status != cases[i].status || *r.out ||
		    strcmp(r.err, cases[i].err))
			fail_msg("pgjob %s --json: exit %d\nstdout: %s\n"
				 "stderr: %s",
				 cases[i].args[0], r.status, r.out, r.err);
		t_run_free(&r);
	}
}

/*
 * Every command that `pgjob --help` lists takes --json, so that none can
 * drift: its own --help shows it, and `COMMAND [SUB] --json --bogus-zz`
 * gets past --json to refuse --bogus-zz (exit 2, nothing sent).  A
 * command's name is the first word of a line "  name ..." of the usage,
 * with the next word too when it is a lowercase subcommand (workflow).
 */
static void
test_json_everywhere(void **state)
{
	struct t_run help;
	const char *argv[] = {t_bin("pgjob"), "--help", NULL};
	t_run(&help, 30, NULL, argv);
	assert_int_equal(help.status, 0);
	int checked = 0;
	for (char *line = strstr(help.out, "\ncommands:\n"); line;
	     line = strchr(line + 1, '\n')) {
		char cmd[32] = "", sub[32] = "";
		if (strncmp(line, "\n  ", 3) != 0 || line[3] == ' ')
			continue;
		if (sscanf(line + 3, "%31[a-z] %31[a-z-]", cmd, sub) < 1)
			continue;
		/* "  migrate ... | migrate --dry-run": --dry-run is SQL. */
		if (strchr(sub, '-'))
			sub[0] = '\0';
		/* web is a server: it prints no answer to put in JSON. */
		if (strcmp(cmd, "web") == 0)
			continue;
		const char *args[] = {cmd, "--help", NULL};
		struct t_run r;
		t_pgjobv(&r, ci, args);
		assert_int_equal(r.status, 0);
		if (!strstr(r.out, "--json"))
			fail_msg("%s --help has no --json:\n%s", cmd, r.out);
		t_run_free(&r);

		const char *bogus[] = {cmd, "--json", "--bogus-zz", NULL};
		const char *bogus_sub[] = {cmd, sub, "--json", "--bogus-zz",
					   NULL};
		t_pgjobv(&r, ci, *sub ? bogus_sub : bogus);
		if (r.status != 2 || *r.out ||
		    !strstr(r.err, "unknown option \"--bogus-zz\""))
			fail_msg("pgjob %s %s --json: exit %d: %s", cmd, sub,
				 r.status, r.err);
		t_run_free(&r);
		checked++;
	}
	t_run_free(&help);
	/* The walk found the commands (the usage's shape did not change
	 * under it). */
	assert_true(checked >= 16);
}

/* A database without schema pgjob: exit 78 and what to do. */
static void
test_no_schema(void **state)
{
	struct t_run r;
	char *conninfo = strdup(t_db_create("t_cli_empty"));
	t_pgjob(&r, conninfo, "status", NULL);
	assert_int_equal(r.status, 78);
	assert_string_equal(r.err, "pgjob: schema pgjob is not installed in "
				   "this database: run `pgjob migrate`\n");
	t_run_free(&r);
	free(conninfo);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_status_text, empty),
		cmocka_unit_test_setup(test_status_json, empty),
		cmocka_unit_test_setup(test_status_empty, empty),
		cmocka_unit_test_setup(test_status_exact, empty),
		cmocka_unit_test_setup(test_status_capped, empty),
		cmocka_unit_test_setup(test_status_running_heartbeat, empty),
		cmocka_unit_test_setup(test_jobs, empty),
		cmocka_unit_test_setup(test_jobs_filters_json, empty),
		cmocka_unit_test_setup(test_show, empty),
		cmocka_unit_test_setup(test_retry, empty),
		cmocka_unit_test_setup(test_retry_dead, empty),
		cmocka_unit_test_setup(test_cancel, empty),
		cmocka_unit_test_setup(test_prune, empty),
		cmocka_unit_test_setup(test_prune_retention, empty),
		cmocka_unit_test_setup(test_top_once, empty),
		cmocka_unit_test_setup(test_top_signals, empty),
		cmocka_unit_test_setup(test_password_not_in_ps, empty),
		cmocka_unit_test(test_hostile_text),
		cmocka_unit_test(test_usage),
		cmocka_unit_test(test_help),
		cmocka_unit_test(test_no_schema),
		cmocka_unit_test_setup(test_json_state, empty),
		cmocka_unit_test_setup(test_json_enqueue_prune, empty),
		cmocka_unit_test_setup(test_json_enqueue_role, empty),
		cmocka_unit_test(test_database_names),
		cmocka_unit_test_setup(test_json_top, empty),
		cmocka_unit_test_setup(test_json_top_lines, empty),
		cmocka_unit_test(test_json_version),
		cmocka_unit_test(test_json_migrate),
		cmocka_unit_test_setup(test_json_workflow, empty),
		cmocka_unit_test(test_json_errors),
		cmocka_unit_test(test_json_everywhere),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
