/*
 * Integration: idempotency keys for the application's own requests
 * (pgjob.request_begin / request_finish / prune_request_keys, schema
 * version 4), on a real server with several connections at once.
 *
 * Requests are served as docs/idempotency.md serves them: the statements
 * are those of tests/fixtures/idempotency/pattern.sql, read at run time and
 * found verbatim in the doc, and handle() below is the doc's HTTP handler
 * in C.  Threads only talk libpq and record what they saw; every check
 * runs on the main thread (cmocka's asserts are not thread-safe).
 */
#include "testlib.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static char *ci;

/* --- pattern.sql ------------------------------------------------------- */

#define MAX_STMTS 16

static struct {
	char *name;
	char *sql;
} stmts[MAX_STMTS];
static int nstmts;

/* Splits pattern.sql at its "-- name: NAME" lines, as the doc's loader. */
static void
load_pattern(void)
{
	char *text = t_read_file(t_src("tests/fixtures/idempotency/"
				       "pattern.sql"));
	assert_non_null(text);
	char *line = text;
	while (*line) {
		char *eol = strchr(line, '\n');
		size_t len = eol ? (size_t)(eol - line) : strlen(line);
		if (strncmp(line, "-- name: ", 9) == 0) {
			assert_true(nstmts < MAX_STMTS);
			stmts[nstmts].name = strndup(line + 9, len - 9);
			stmts[nstmts].sql = strdup("");
			nstmts++;
		} else if (nstmts > 0) {
			char *prev = stmts[nstmts - 1].sql;
			size_t plen = strlen(prev);
			char *s = malloc(plen + len + 2);
			memcpy(s, prev, plen);
			memcpy(s + plen, line, len);
			s[plen + len] = '\n';
			s[plen + len + 1] = '\0';
			free(prev);
			stmts[nstmts - 1].sql = s;
		}
		line += len + (eol != NULL);
	}
	free(text);
}

static const char *
sql_of(const char *name)
{
	for (int i = 0; i < nstmts; i++)
		if (strcmp(stmts[i].name, name) == 0)
			return stmts[i].sql;
	fail_msg("pattern.sql has no statement named %s", name);
	return NULL;
}

/* --- the handler --------------------------------------------------------- */

/* One POST /orders. */
struct req {
	const char *key;
	const char *customer;
	const char *item;
	int qty;
	const char *body;      /* NULL: {"item":ITEM,"qty":QTY} */
	const char *take_sql;  /* NULL: pattern.sql's take_key */
	const char *begin_sql; /* NULL: "begin" */
	int hold_ms;	       /* pg_sleep between the change and the commit */
	int leave_open;	       /* return before commit, with the response */
};

/* What the handler answered, and what it saw on the way. */
struct resp {
	char state[16];	  /* take_key's answer, or "" after an error */
	char sqlstate[6]; /* of the error, if any */
	int status;	  /* the HTTP status */
	char body[256];	  /* the response body */
	long long order;  /* the order this request created, or 0 */
	char error[512];  /* the error message, if any */
};

static PGresult *
run(PGconn *c, const char *sql, int n, const char *const *params)
{
	return PQexecParams(c, sql, n, NULL, params, NULL, NULL, 0);
}

static int
ok(PGresult *res)
{
	ExecStatusType st = PQresultStatus(res);
	return st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
}

/* Records res's error in out, rolls back, answers 422 for PJ422, else 500. */
static void
fail_req(PGconn *c, PGresult *res, struct resp *out)
{
	const char *st = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	snprintf(out->sqlstate, sizeof(out->sqlstate), "%s", st ? st : "");
	snprintf(out->error, sizeof(out->error), "%s",
		 PQresultErrorMessage(res));
	out->status = strcmp(out->sqlstate, "PJ422") == 0 ? 422 : 500;
	snprintf(out->body, sizeof(out->body), "{\"error\":\"%s\"}",
		 out->status == 422 ? "key reused" : "internal");
	PQclear(res);
	PQclear(PQexec(c, "rollback"));
}

/*
 * Serves r on connection c as the doc's handler does: begin; take the key;
 * 'done': answer the stored response; 'in_progress': 409; 'new': create
 * the order, enqueue its receipt, store the response, commit, answer 201.
 * Thread-safe (no cmocka calls).
 */
static void
handle(PGconn *c, const struct req *r, struct resp *out)
{
	char body[256], request[512], id[32];
	memset(out, 0, sizeof(*out));
	if (r->body)
		snprintf(body, sizeof(body), "%s", r->body);
	else
		snprintf(body, sizeof(body), "{\"item\":\"%s\",\"qty\":%d}",
			 r->item, r->qty);
	snprintf(request, sizeof(request), "POST /orders\n%s", body);

	PGresult *res = PQexec(c, r->begin_sql ? r->begin_sql : "begin");
	if (!ok(res)) {
		fail_req(c, res, out);
		return;
	}
	PQclear(res);
	const char *take[] = {r->key, request, r->customer};
	res = run(c, r->take_sql ? r->take_sql : sql_of("take_key"), 3, take);
	if (!ok(res) || PQntuples(res) != 1) {
		fail_req(c, res, out);
		return;
	}
	snprintf(out->state, sizeof(out->state), "%s", PQgetvalue(res, 0, 0));
	if (strcmp(out->state, "done") == 0) {
		out->status = atoi(PQgetvalue(res, 0, 2));
		snprintf(out->body, sizeof(out->body), "%s",
			 PQgetvalue(res, 0, 1));
		PQclear(res);
		PQclear(PQexec(c, "commit"));
		return;
	}
	if (strcmp(out->state, "in_progress") == 0) {
		out->status = 409;
		snprintf(out->body, sizeof(out->body),
			 "{\"error\":\"in progress\"}");
		PQclear(res);
		PQclear(PQexec(c, "rollback"));
		return;
	}
	PQclear(res);

	char qty[16];
	snprintf(qty, sizeof(qty), "%d", r->qty);
	const char *order[] = {r->customer, r->item, qty};
	res = run(c, sql_of("create_order"), 3, order);
	if (!ok(res)) {
		fail_req(c, res, out);
		return;
	}
	snprintf(id, sizeof(id), "%s", PQgetvalue(res, 0, 0));
	PQclear(res);
	if (r->hold_ms > 0) {
		char sleep[64];
		snprintf(sleep, sizeof(sleep), "select pg_sleep(%g)",
			 r->hold_ms / 1000.0);
		PQclear(PQexec(c, sleep));
	}
	const char *job[] = {id};
	res = run(c, sql_of("enqueue_receipt"), 1, job);
	if (!ok(res)) {
		fail_req(c, res, out);
		return;
	}
	PQclear(res);
	snprintf(out->body, sizeof(out->body),
		 "{\"status\": \"created\", \"order_id\": %s}", id);
	const char *store[] = {r->key, out->body, "201", r->customer};
	res = run(c, sql_of("store_response"), 4, store);
	if (!ok(res)) {
		fail_req(c, res, out);
		return;
	}
	PQclear(res);
	out->order = atoll(id);
	out->status = 201;
	if (r->leave_open)
		return;
	res = PQexec(c, "commit");
	if (!ok(res)) {
		out->order = 0;
		{
			fail_req(c, res, out);
			return;
		}
	}
	PQclear(res);
}

/* handle() on a thread, on a connection of its own. */
struct worker {
	pthread_t thread;
	PGconn *conn;
	struct req req;
	struct resp resp;
	pthread_barrier_t *start; /* NULL: go at once */
};

static void *
worker_main(void *arg)
{
	struct worker *w = arg;
	if (w->start)
		pthread_barrier_wait(w->start);
	handle(w->conn, &w->req, &w->resp);
	return NULL;
}

static void
worker_start(struct worker *w)
{
	assert_int_equal(pthread_create(&w->thread, NULL, worker_main, w), 0);
}

static void
worker_join(struct worker *w)
{
	assert_int_equal(pthread_join(w->thread, NULL), 0);
}

/* Waits until backend pid waits for a lock (the holder of a key). */
static void
wait_for_lock_wait(PGconn *c, int pid)
{
	t_wait_lock_wait(c, pid, 20);
}

/*
 * Serves r (committing) on connection b, on a thread, as a retry of a
 * request whose key another connection holds: returns once b waits for
 * the holder, as watch sees it.  worker_join(w) then waits for its answer.
 */
static void
retry_behind_holder(struct worker *w, PGconn *b, PGconn *watch,
		    const struct req *r)
{
	memset(w, 0, sizeof(*w));
	w->conn = b;
	w->req = *r;
	w->req.leave_open = 0;
	worker_start(w);
	wait_for_lock_wait(watch, PQbackendPID(b));
}

/* n copies of r at once, each on a connection of its own: w[i].resp is
 * what each answered. */
static void
race(struct worker *w, int n, const struct req *r)
{
	pthread_barrier_t start;
	pthread_barrier_init(&start, NULL, (unsigned)n);
	for (int i = 0; i < n; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].conn = t_connect(ci);
		w[i].start = &start;
		w[i].req = *r;
	}
	for (int i = 0; i < n; i++)
		worker_start(&w[i]);
	for (int i = 0; i < n; i++)
		worker_join(&w[i]);
	pthread_barrier_destroy(&start);
	for (int i = 0; i < n; i++)
		PQfinish(w[i].conn);
}

static long long
orders(PGconn *c, const char *customer)
{
	return t_long(c,
		      "select count(*) from shop_orders where customer = '%s'",
		      customer);
}

static long long
receipts(PGconn *c, long long order)
{
	return t_long(c,
		      "select count(*) from pgjob.all_jobs where kind = "
		      "'send_receipt' and payload->>'order_id' = '%lld'",
		      order);
}

/* --- setup ------------------------------------------------------------- */

static int
setup(void **state)
{
	ci = t_db_migrated("t_request_keys");
	load_pattern();
	PGconn *c = t_connect(ci);
	t_exec(c, "%s", sql_of("create_tables"));
	PQfinish(c);
	return 0;
}

static int
teardown(void **state)
{
	for (int i = 0; i < nstmts; i++) {
		free(stmts[i].name);
		free(stmts[i].sql);
	}
	free(ci);
	return 0;
}

/* --- tests ------------------------------------------------------------- */

/* The doc shows pattern.sql and grants.sql as they are. */
static void
test_doc_has_the_tested_sql(void **state)
{
	char *doc = t_read_file(t_src("docs/idempotency.md"));
	assert_non_null(doc);
	const char *files[] = {"tests/fixtures/idempotency/pattern.sql",
			       "tests/fixtures/idempotency/grants.sql"};
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		char *sql = t_read_file(t_src(files[i]));
		assert_non_null(sql);
		if (!strstr(doc, sql))
			fail_msg("docs/idempotency.md does not show %s as "
				 "it is",
				 files[i]);
		free(sql);
	}
	/* Every statement that the handler runs. */
	const char *names[] = {"take_key", "create_order", "enqueue_receipt",
			       "store_response"};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char call[64];
		snprintf(call, sizeof(call), "sql.%s", names[i]);
		if (!strstr(doc, call))
			fail_msg("the doc's handler does not run %s", call);
	}
	free(doc);
}

/* A request, then its retry: the retry gets the stored response. */
static void
test_new_then_done(void **state)
{
	PGconn *c = t_connect(ci);
	struct req r = {
		.key = "k-basic", .customer = "basic", .item = "tea", .qty = 2};
	struct resp a, b;
	handle(c, &r, &a);
	assert_string_equal(a.state, "new");
	assert_int_equal(a.status, 201);
	assert_true(a.order > 0);

	handle(c, &r, &b);
	assert_string_equal(b.state, "done");
	assert_int_equal(b.status, 201);
	assert_string_equal(b.body, a.body);
	assert_int_equal(b.order, 0);
	assert_int_equal(orders(c, "basic"), 1);
	assert_int_equal(receipts(c, a.order), 1);

	/* The row: done, the response, 24 hours from the first request. */
	char want[128];
	snprintf(want, sizeof(want), "done|201|%lld|t|t|64", a.order);
	t_assert_value(c, want,
		       "select concat_ws('|', status, response_status, "
		       "response->>'order_id', finished_at is not null, "
		       "expires_at = created_at + interval '24 hours', "
		       "length(fingerprint)) from pgjob.request_keys where "
		       "scope = 'basic' and key = 'k-basic'");
	PQfinish(c);
}

/* Eight requests with the same key at once: one order, one receipt, and
 * every request answers with its response. */
static void
test_concurrent_same_key(void **state)
{
	enum { N = 8 };
	struct worker w[N];
	race(w, N,
	     &(struct req){.key = "k-race",
			   .customer = "race",
			   .item = "coffee",
			   .qty = 1,
			   .hold_ms = 300});

	int fresh = 0;
	long long order = 0;
	const char *body = NULL;
	for (int i = 0; i < N; i++) {
		if (w[i].resp.status != 201)
			fail_msg("request %d: %d %s %s", i, w[i].resp.status,
				 w[i].resp.body, w[i].resp.error);
		if (strcmp(w[i].resp.state, "new") == 0) {
			fresh++;
			order = w[i].resp.order;
			body = w[i].resp.body;
		} else {
			assert_string_equal(w[i].resp.state, "done");
		}
	}
	assert_int_equal(fresh, 1);
	for (int i = 0; i < N; i++)
		assert_string_equal(w[i].resp.body, body);
	PGconn *c = t_connect(ci);
	assert_int_equal(orders(c, "race"), 1);
	assert_int_equal(receipts(c, order), 1);
	PQfinish(c);
}

/* The same with nowait: one request makes the change, the others answer
 * 409 while it runs (or its response once it committed). */
static void
test_concurrent_nowait(void **state)
{
	enum { N = 8 };
	static const char take_nowait[] =
		"select state, response, response_status from "
		"pgjob.request_begin($1, encode(sha256(convert_to($2, "
		"'UTF8')), 'hex'), scope => $3, nowait => true)";
	struct worker w[N];
	race(w, N,
	     &(struct req){.key = "k-race-nowait",
			   .customer = "race-nowait",
			   .item = "coffee",
			   .qty = 1,
			   .take_sql = take_nowait,
			   .hold_ms = 500});
	int fresh = 0, busy = 0;
	for (int i = 0; i < N; i++) {
		if (strcmp(w[i].resp.state, "new") == 0) {
			fresh++;
			assert_int_equal(w[i].resp.status, 201);
		} else if (strcmp(w[i].resp.state, "in_progress") == 0) {
			busy++;
			assert_int_equal(w[i].resp.status, 409);
		} else if (strcmp(w[i].resp.state, "done") == 0) {
			assert_int_equal(w[i].resp.status, 201);
		} else {
			fail_msg("request %d: %d %s", i, w[i].resp.status,
				 w[i].resp.error);
		}
	}
	assert_int_equal(fresh, 1);
	assert_true(busy >= 1);
	PGconn *c = t_connect(ci);
	assert_int_equal(orders(c, "race-nowait"), 1);
	PQfinish(c);
}

/* A holds the key uncommitted.  B with nowait: 'in_progress' at once, and
 * its lock_timeout untouched.  B without nowait: waits for A's commit,
 * then gets A's response. */
static void
test_waits_for_the_holder(void **state)
{
	PGconn *a = t_connect(ci);
	PGconn *b = t_connect(ci);
	PGconn *watch = t_connect(ci);
	struct req r = {.key = "k-wait",
			.customer = "wait",
			.item = "cake",
			.qty = 1,
			.leave_open = 1};
	struct resp ra;
	handle(a, &r, &ra);
	assert_string_equal(ra.state, "new");

	/* With nowait it answers while a's transaction still holds the key:
	 * waiting for it would wait for ever, which statement_timeout turns
	 * into an error (no clock read, which a loaded machine would
	 * stretch). */
	t_exec(b, "begin");
	t_exec(b, "set local statement_timeout = '60s'");
	char *st = t_value(b, "select state from pgjob.request_begin("
			      "'k-wait', 'x', scope => 'wait', "
			      "nowait => true)");
	assert_string_equal(st, "in_progress");
	free(st);
	t_assert_value(b, "0", "show lock_timeout");
	t_exec(b, "rollback");

	struct worker w;
	retry_behind_holder(&w, b, watch, &r);
	t_sleep_ms(200);
	wait_for_lock_wait(watch, PQbackendPID(b)); /* still waiting */
	t_exec(a, "commit");
	worker_join(&w);
	assert_string_equal(w.resp.state, "done");
	assert_int_equal(w.resp.status, 201);
	assert_string_equal(w.resp.body, ra.body);
	assert_int_equal(orders(watch, "wait"), 1);
	PQfinish(a);
	PQfinish(b);
	PQfinish(watch);
}

/* A holds the key and rolls back: the waiting B takes it and makes the
 * change itself. */
static void
test_holder_rolls_back(void **state)
{
	PGconn *a = t_connect(ci);
	PGconn *b = t_connect(ci);
	PGconn *watch = t_connect(ci);
	struct req r = {.key = "k-rb",
			.customer = "rb",
			.item = "pie",
			.qty = 1,
			.leave_open = 1};
	struct resp ra;
	handle(a, &r, &ra);
	assert_string_equal(ra.state, "new");
	struct worker w;
	retry_behind_holder(&w, b, watch, &r);
	t_exec(a, "rollback");
	worker_join(&w);
	assert_string_equal(w.resp.state, "new");
	assert_int_equal(w.resp.status, 201);
	assert_int_equal(orders(watch, "rb"), 1);
	assert_int_equal(receipts(watch, w.resp.order), 1);
	assert_int_equal(receipts(watch, ra.order), 0);
	PQfinish(a);
	PQfinish(b);
	PQfinish(watch);
}

/* The connection dies between the change and the commit: nothing of the
 * request stays, and its retry makes the change once. */
static void
test_crash_before_commit(void **state)
{
	PGconn *c = t_connect(ci);

	/* The client's connection closes (the server process, too). */
	PGconn *a = t_connect(ci);
	struct req r = {.key = "k-crash",
			.customer = "crash",
			.item = "jam",
			.qty = 3,
			.leave_open = 1};
	struct resp ra, rb, rc;
	handle(a, &r, &ra);
	assert_string_equal(ra.state, "new");
	PQfinish(a);
	assert_int_equal(t_long(c, "select count(*) from pgjob.request_keys "
				   "where scope = 'crash'"),
			 0);
	r.leave_open = 0;
	handle(c, &r, &rb);
	assert_string_equal(rb.state, "new");
	assert_int_equal(rb.status, 201);
	handle(c, &r, &rc);
	assert_string_equal(rc.state, "done");
	assert_string_equal(rc.body, rb.body);
	assert_int_equal(orders(c, "crash"), 1);
	assert_int_equal(receipts(c, rb.order), 1);
	assert_int_equal(receipts(c, ra.order), 0);

	/* The server kills the holder while a retry waits for it: the retry
	 * takes the key as soon as the holder is gone. */
	a = t_connect(ci);
	PGconn *b = t_connect(ci);
	struct req k = {.key = "k-kill",
			.customer = "kill",
			.item = "jam",
			.qty = 1,
			.leave_open = 1};
	handle(a, &k, &ra);
	assert_string_equal(ra.state, "new");
	struct worker w;
	retry_behind_holder(&w, b, c, &k);
	assert_int_equal(t_long(c, "select pg_terminate_backend(%d)::int",
				PQbackendPID(a)),
			 1);
	worker_join(&w);
	assert_string_equal(w.resp.state, "new");
	assert_int_equal(w.resp.status, 201);
	assert_int_equal(orders(c, "kill"), 1);
	assert_int_equal(receipts(c, w.resp.order), 1);
	PQfinish(a);
	PQfinish(b);
	PQfinish(c);
}

/* A key reused for another request: refused with PJ422, before and after
 * the first one commits. */
static void
test_other_fingerprint(void **state)
{
	PGconn *c = t_connect(ci);
	struct req r = {
		.key = "k-fp", .customer = "fp", .item = "tea", .qty = 1};
	struct resp a, b;
	handle(c, &r, &a);
	assert_int_equal(a.status, 201);
	r.qty = 5;
	handle(c, &r, &b);
	assert_int_equal(b.status, 422);
	assert_string_equal(b.sqlstate, "PJ422");
	assert_non_null(strstr(b.error, "request key \"k-fp\" was used for "
					"another request"));
	/* The body is part of the fingerprint, byte for byte. */
	r.qty = 1;
	r.body = "{\"item\": \"tea\", \"qty\": 1}";
	handle(c, &r, &b);
	assert_int_equal(b.status, 422);

	/* A request that waited for the holder: refused once it commits. */
	PGconn *h = t_connect(ci);
	PGconn *o = t_connect(ci);
	struct req first = {.key = "k-fp2",
			    .customer = "fp",
			    .item = "a",
			    .qty = 1,
			    .leave_open = 1};
	handle(h, &first, &a);
	assert_string_equal(a.state, "new");
	struct req other = first;
	other.item = "b";
	struct worker w;
	retry_behind_holder(&w, o, c, &other);
	t_exec(h, "commit");
	worker_join(&w);
	assert_int_equal(w.resp.status, 422);
	assert_string_equal(w.resp.sqlstate, "PJ422");
	assert_int_equal(orders(c, "fp"), 2);
	PQfinish(h);
	PQfinish(o);
	PQfinish(c);
}

/* Keys of different scopes never meet. */
static void
test_scopes(void **state)
{
	PGconn *c = t_connect(ci);
	struct req alice = {
		.key = "k-same", .customer = "alice", .item = "tea", .qty = 1};
	struct req bob = alice;
	bob.customer = "bob";
	struct resp a1, b1, a2, b2;
	handle(c, &alice, &a1);
	handle(c, &bob, &b1);
	assert_string_equal(a1.state, "new");
	assert_string_equal(b1.state, "new");
	assert_true(a1.order != b1.order);
	handle(c, &alice, &a2);
	handle(c, &bob, &b2);
	assert_string_equal(a2.body, a1.body);
	assert_string_equal(b2.body, b1.body);

	/* The default scope is '' and independent too. */
	t_exec(c, "begin");
	t_assert_value(c, "new",
		       "select state from pgjob.request_begin('k-same', 'f')");
	t_exec(c, "select pgjob.request_finish('k-same', '{\"n\": 1}')");
	t_exec(c, "commit");
	t_assert_value(c, "done|1|200",
		       "select concat_ws('|', state, response->>'n', "
		       "response_status) from pgjob.request_begin('k-same', "
		       "'f', scope => null)");
	PQfinish(c);
}

/* A retried request whose job already ran: no second job (unique_key
 * alone frees a key once its job finishes; the request key does not). */
static void
test_enqueue_once(void **state)
{
	PGconn *c = t_connect(ci);
	struct req r = {
		.key = "k-job", .customer = "job", .item = "mug", .qty = 1};
	struct resp a, b;
	handle(c, &r, &a);
	assert_int_equal(a.status, 201);
	assert_int_equal(receipts(c, a.order), 1);
	t_exec(c,
	       "update pgjob.jobs set state = 'done', finished_at = now() "
	       "where kind = 'send_receipt' and payload->>'order_id' = "
	       "'%lld'",
	       a.order);
	handle(c, &r, &b);
	assert_string_equal(b.state, "done");
	assert_int_equal(receipts(c, a.order), 1);

	/* What the retry would do without the request key. */
	char id[32];
	snprintf(id, sizeof(id), "%lld", a.order);
	const char *p[] = {id};
	PGresult *res = run(c, sql_of("enqueue_receipt"), 1, p);
	assert_true(ok(res));
	PQclear(res);
	assert_int_equal(receipts(c, a.order), 2);
	PQfinish(c);
}

/* Expired keys are new keys, pruned or not; pruning deletes them in
 * batches and skips one that a request is taking over. */
static void
test_expiry_and_prune(void **state)
{
	PGconn *c = t_connect(ci);
	t_exec(c, "begin");
	t_exec(c, "select * from pgjob.request_begin('k-ttl', 'f1', "
		  "scope => 'ttl', ttl => '1 hour')");
	t_exec(c, "select pgjob.request_finish('k-ttl', '{\"v\": 1}', "
		  "scope => 'ttl')");
	assert_int_equal(t_long(c, "select (expires_at = now() + interval "
				   "'1 hour')::int from pgjob.request_keys "
				   "where scope = 'ttl'"),
			 1);
	t_exec(c, "commit");

	/* Expired: new, even with another fingerprint, and it starts over. */
	t_exec(c, "update pgjob.request_keys set expires_at = now() "
		  "where scope = 'ttl'");
	t_exec(c, "begin");
	t_assert_value(c, "new|null",
		       "select concat_ws('|', state, coalesce(response::text, "
		       "'null')) from pgjob.request_begin('k-ttl', 'f2', scope "
		       "=> 'ttl')");
	t_exec(c, "select pgjob.request_finish('k-ttl', '{\"v\": 2}', 202, "
		  "scope => 'ttl')");
	t_exec(c, "commit");
	t_assert_value(c, "done|2|202",
		       "select concat_ws('|', state, response->>'v', "
		       "response_status) from pgjob.request_begin('k-ttl', "
		       "'f2', scope => 'ttl')");
	t_assert_value(c, "f2|t|t",
		       "select concat_ws('|', fingerprint, created_at > now() "
		       "- interval '1 minute', expires_at = created_at + "
		       "interval '24 hours') from pgjob.request_keys where "
		       "scope = 'ttl'");

	/* A short ttl runs out by itself. */
	t_exec(c, "begin");
	t_exec(c, "select * from pgjob.request_begin('k-short', 'f', "
		  "scope => 'ttl', ttl => '50 milliseconds')");
	t_exec(c, "select pgjob.request_finish('k-short', null, 204, "
		  "scope => 'ttl')");
	t_exec(c, "commit");
	t_wait_until(c, 10,
		     "select expires_at < now() from pgjob.request_keys"
		     " where scope = 'ttl' and key = 'k-short'");
	t_exec(c, "begin");
	t_assert_value(c, "new",
		       "select state from pgjob.request_begin('k-short', "
		       "'other', scope => 'ttl')");
	t_exec(c, "rollback");

	/* Prune: 25 expired keys in batches of 10, 5 live ones stay. */
	t_exec(c, "insert into pgjob.request_keys (scope, key, fingerprint, "
		  "status, response_status, finished_at, expires_at) "
		  "select 'prune', 'p' || i, 'f', 'done', 200, now(), "
		  "now() - i * interval '1 minute' "
		  "from generate_series(1, 30) i");
	t_exec(c, "update pgjob.request_keys set expires_at = now() + "
		  "interval '1 hour' where scope = 'prune' and key in "
		  "('p1', 'p2', 'p3', 'p4', 'p5')");
	t_exec(c, "update pgjob.request_keys set expires_at = now() "
		  "where scope = 'ttl'"); /* 2 more */

	/* A request takes over p30 (the oldest) and has not committed. */
	PGconn *a = t_connect(ci);
	t_exec(a, "begin");
	t_assert_value(a, "new",
		       "select state from pgjob.request_begin('p30', 'f', "
		       "scope => 'prune')");

	long long total = 0, n;
	while ((n = t_long(c, "select pgjob.prune_request_keys(10)")) > 0) {
		assert_true(n <= 10);
		total += n;
	}
	assert_int_equal(total, 24 + 2);
	t_exec(a, "select pgjob.request_finish('p30', '{}', scope => "
		  "'prune')");
	t_exec(a, "commit");
	assert_int_equal(t_long(c, "select count(*) from pgjob.request_keys "
				   "where scope = 'prune'"),
			 6);
	assert_int_equal(t_long(c, "select pgjob.prune_request_keys()"), 0);
	PQfinish(a);

	/* A request waits for a takeover of an expired key like for a new
	 * key, and then sees its response. */
	a = t_connect(ci);
	PGconn *b = t_connect(ci);
	t_exec(c, "update pgjob.request_keys set expires_at = now() "
		  "where scope = 'prune' and key = 'p1'");
	t_exec(a, "begin");
	t_exec(a, "select * from pgjob.request_begin('p1', 'g', "
		  "scope => 'prune')");
	assert_int_equal(
		PQsendQuery(b, "select concat_ws('|', state, response->>'w') "
			       "from pgjob.request_begin('p1', 'g', scope => "
			       "'prune')"),
		1);
	wait_for_lock_wait(c, PQbackendPID(b));
	t_exec(a, "select pgjob.request_finish('p1', '{\"w\": 7}', "
		  "scope => 'prune')");
	t_exec(a, "commit");
	PGresult *res = PQgetResult(b);
	assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
	assert_string_equal(PQgetvalue(res, 0, 0), "done|7");
	PQclear(res);
	assert_null(PQgetResult(b));
	PQfinish(a);
	PQfinish(b);
	PQfinish(c);
}

/* Mistakes in the pattern are errors, never a silent half-taken key. */
static void
test_misuse(void **state)
{
	PGconn *c = t_connect(ci);

	/* A key taken and committed without a response: the commit fails,
	 * and the change with it. */
	t_exec(c, "begin");
	t_exec(c, "select * from pgjob.request_begin('k-nofinish', 'f')");
	t_exec(c, "insert into shop_orders (customer, item, qty) values "
		  "('misuse', 'x', 1)");
	free(t_expect_sqlstate(c, "PJ002", "commit"));
	assert_int_equal(orders(c, "misuse"), 0);
	assert_int_equal(t_long(c, "select count(*) from pgjob.request_keys "
				   "where key = 'k-nofinish'"),
			 0);

	/* Outside a transaction block, request_begin commits at once. */
	free(t_expect_sqlstate(c, "PJ002",
			       "select * from pgjob.request_begin('k-auto', "
			       "'f')"));

	/* Finish without begin, after 'done', or twice. */
	free(t_expect_sqlstate(c, "PJ002",
			       "select pgjob.request_finish('k-none', '{}')"));
	t_exec(c, "begin");
	t_exec(c, "select * from pgjob.request_begin('k-twice', 'f')");
	t_exec(c, "select pgjob.request_finish('k-twice', '{}')");
	free(t_expect_sqlstate(c, "PJ002",
			       "select pgjob.request_finish('k-twice', '{}')"));
	t_exec(c, "rollback");

	/* The same key twice in one transaction: in_progress. */
	t_exec(c, "begin");
	t_exec(c, "select * from pgjob.request_begin('k-dup', 'f')");
	t_assert_value(c, "in_progress",
		       "select state from pgjob.request_begin('k-dup', 'f')");
	t_exec(c, "rollback");

	static const char *const bad[] = {
		"select * from pgjob.request_begin('', 'f')",
		"select * from pgjob.request_begin(null, 'f')",
		"select * from pgjob.request_begin(repeat('k', 256), 'f')",
		"select * from pgjob.request_begin('k', null)",
		"select * from pgjob.request_begin('k', 'f', "
		"scope => repeat('s', 256))",
		"select * from pgjob.request_begin('k', 'f', ttl => '0')",
		"select * from pgjob.request_begin('k', 'f', ttl => null)",
		"select pgjob.request_finish('k', '{}', null)",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		free(t_expect_sqlstate(c, "22023", "%s", bad[i]));
	assert_int_equal(t_long(c, "select count(*) from pgjob.request_keys "
				   "where key in ('k', 'k-auto', 'k-none')"),
			 0);
	PQfinish(c);
}

/* Under REPEATABLE READ a request that waited for the holder cannot see
 * its commit: it gets a serialization failure, to be retried whole. */
static void
test_repeatable_read(void **state)
{
	PGconn *a = t_connect(ci);
	PGconn *b = t_connect(ci);
	PGconn *watch = t_connect(ci);
	struct req r = {.key = "k-rr",
			.customer = "rr",
			.item = "tea",
			.qty = 1,
			.leave_open = 1};
	struct resp ra, rb;
	handle(a, &r, &ra);
	struct req rr = r;
	rr.begin_sql = "begin isolation level repeatable read";
	struct worker w;
	retry_behind_holder(&w, b, watch, &rr);
	t_exec(a, "commit");
	worker_join(&w);
	assert_string_equal(w.resp.sqlstate, "40001");
	handle(b, &w.req, &rb);
	assert_string_equal(rb.state, "done");
	assert_string_equal(rb.body, ra.body);
	PQfinish(a);
	PQfinish(b);
	PQfinish(watch);
}

/* The pattern works for a role with the doc's grants and nothing more. */
static void
test_app_role(void **state)
{
	PGconn *c = t_connect(ci);
	t_exec(c, "do $$ begin create role shop_app login; "
		  "exception when duplicate_object then null; end $$");
	char *grants = t_read_file(t_src("tests/fixtures/idempotency/"
					 "grants.sql"));
	t_exec(c, "%s", grants);
	free(grants);
	t_exec(c, "grant select, insert on shop_orders to shop_app");

	char conninfo[1200];
	snprintf(conninfo, sizeof(conninfo), "%s user=shop_app", ci);
	PGconn *app = t_connect(conninfo);
	struct req r = {
		.key = "k-role", .customer = "role", .item = "tea", .qty = 1};
	struct resp a, b;
	handle(app, &r, &a);
	if (a.status != 201)
		fail_msg("as shop_app: %d %s", a.status, a.error);
	handle(app, &r, &b);
	assert_string_equal(b.state, "done");
	assert_int_equal(receipts(c, a.order), 1);
	/* It cannot prune: that is the daemon's job. */
	free(t_expect_sqlstate(app, "42501",
			       "select pgjob.prune_request_keys()"));
	PQfinish(app);
	PQfinish(c);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_doc_has_the_tested_sql),
		cmocka_unit_test(test_new_then_done),
		cmocka_unit_test(test_concurrent_same_key),
		cmocka_unit_test(test_concurrent_nowait),
		cmocka_unit_test(test_waits_for_the_holder),
		cmocka_unit_test(test_holder_rolls_back),
		cmocka_unit_test(test_crash_before_commit),
		cmocka_unit_test(test_other_fingerprint),
		cmocka_unit_test(test_scopes),
		cmocka_unit_test(test_enqueue_once),
		cmocka_unit_test(test_expiry_and_prune),
		cmocka_unit_test(test_misuse),
		cmocka_unit_test(test_repeatable_read),
		cmocka_unit_test(test_app_role),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
