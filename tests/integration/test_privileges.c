/*
 * Integration: what a role may do through the functions of schema pgjob,
 * and what no call of them may break.
 *
 * - Which functions PUBLIC may execute: exactly the list of
 *   docs/security.md, after a fresh migrate, so that a function a new
 *   migration adds without its revoke fails here.
 * - Ownership: an enqueue role reaches a job, a batch or a slot of another
 *   role by id in no function it may call (docs/security.md, "Who may act
 *   on a job by its id"); a foreign id answers as an id that does not
 *   exist.
 * - Rate limits: take_rate()'s cost is bounded as enqueue's is, and no
 *   bucket state, however low, makes a claim, take_rate() or the views
 *   fail (docs/queues.md).
 * - Workflows of 10,000 steps in each shape enqueue with the right
 *   dependency counts (their time is tests/bench/workflow.sh's).
 *
 * The GRANTs are run from docs/security.md itself.  Roles belong to the
 * server: their names carry this process's pid, and the group teardown
 * drops them.
 */
#include "testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"

static char role_worker[64], role_a[64], role_b[64], role_a2[64];
static const char *const role_dbs[] = {"t_priv_public", "t_priv_owner"};

/* s with every "from" replaced by "to"; a new string. */
static char *
replace_all(const char *s, const char *from, const char *to)
{
	struct buf b = {0};
	size_t n = strlen(from);
	const char *p;
	while ((p = strstr(s, from)) != NULL) {
		buf_append(&b, s, (size_t)(p - s));
		buf_append(&b, to, strlen(to));
		s = p + n;
	}
	buf_append(&b, s, strlen(s));
	return b.data;
}

/*
 * The <!-- run --> SQL blocks of docs/security.md, in order, with the
 * documented roles pgjobd_worker and app_enqueue named worker and enqueue.
 */
static void
docs_grants(PGconn *c, const char *worker, const char *enqueue)
{
	char *doc = t_read_file(t_src("docs/security.md"));
	assert_non_null(doc);
	const char *p = doc;
	while ((p = strstr(p, "<!-- run")) != NULL) {
		const char *open = strchr(p, '\n');
		assert_non_null(open);
		open++;
		p = open;
		if (strncmp(open, "```sql\n", 7) != 0)
			continue;
		open += 7;
		const char *close = strstr(open, "\n```");
		assert_non_null(close);
		char *sql = xstrndup(open, (size_t)(close - open + 1));
		char *a = replace_all(sql, "pgjobd_worker", worker);
		char *b = replace_all(a, "app_enqueue", enqueue);
		t_exec(c, "%s", b);
		free(b);
		free(a);
		free(sql);
		p = close;
	}
	free(doc);
}

static PGconn *
connect_as(const char *ci, const char *role)
{
	char s[1200];
	snprintf(s, sizeof(s), "%s user=%s", ci, role);
	return t_connect(s);
}

/* ---- PUBLIC's functions ----------------------------------------------- */

/*
 * The functions docs/security.md lists as PUBLIC's: the lines of the block
 * after the marker "test_privileges compares", one signature a line as
 * regprocedure prints it, sorted; a new string.
 */
static char *
documented_public(void)
{
	char *doc = t_read_file(t_src("docs/security.md"));
	assert_non_null(doc);
	const char *m = strstr(doc, "test_privileges compares");
	assert_non_null(m);
	const char *open = strstr(m, "```\n");
	assert_non_null(open);
	open += 4;
	const char *close = strstr(open, "```");
	assert_non_null(close);
	char *list = xstrndup(open, (size_t)(close - open));
	free(doc);
	return list;
}

static void
test_public_execute(void **state)
{
	char *ci = t_db_migrated("t_priv_public");
	PGconn *c = t_connect(ci);
	char *want = documented_public();
	char *got = t_value(
		c,
		"select coalesce(string_agg(f, E'\\n' order by f collate \"C\")"
		" || E'\\n', '') from (select p.oid::regprocedure::text f"
		" from pg_proc p where p.pronamespace ="
		" 'pgjob'::regnamespace and has_function_privilege("
		"'public', p.oid, 'EXECUTE')) x");
	if (strcmp(got, want) != 0)
		fail_msg("PUBLIC may execute:\n%s\ndocs/security.md lists:\n%s",
			 got, want);
	free(got);
	free(want);

	/* The enqueue role of the docs: it can neither empty the done jobs
	 * (and hold the ring's lock) nor forget attempts; the worker can. */
	docs_grants(c, role_worker, role_a);
	t_exec(c, "insert into pgjob.jobs (kind, state, finished_at) values"
		  " ('old', 'done', now() - interval '30 days')");
	PGconn *e = connect_as(ci, role_a);
	free(t_expect_sqlstate(e, "42501",
			       "select pgjob.prune_done(now(), 0)"));
	free(t_expect_sqlstate(
		e, "42501", "select pgjob.forget_attempts(array[1::bigint])"));
	free(t_expect_sqlstate(e, "42501",
			       "select pgjob.restore_done(array[1::bigint])"));
	assert_true(t_long(e, "select pgjob.enqueue('k')") > 0);
	PQfinish(e);
	PGconn *w = connect_as(ci, role_worker);
	t_exec(w, "select pgjob.prune_done(now(), 0)");
	t_exec(w, "select pgjob.forget_attempts(array[1::bigint])");
	PQfinish(w);
	PQfinish(c);
	free(ci);
}

/* ---- ownership -------------------------------------------------------- */

/*
 * The error of sql, which must fail with state, with "ID" in it standing
 * for id: the same, apart from the id, as with an id that never was.
 */
static void
same_as_missing(PGconn *e, const char *state, const char *sql, long long id,
		long long none)
{
	char ids[32], nones[32];
	snprintf(ids, sizeof(ids), "%lld", id);
	snprintf(nones, sizeof(nones), "%lld", none);
	char *q1 = replace_all(sql, "ID", ids);
	char *q2 = replace_all(sql, "ID", nones);
	char *a = t_expect_sqlstate(e, state, "%s", q1);
	char *b = t_expect_sqlstate(e, state, "%s", q2);
	char *a2 = replace_all(a, ids, "N");
	char *b2 = replace_all(b, nones, "N");
	if (strcmp(a2, b2) != 0)
		fail_msg("a foreign id answers \"%s\", a missing one \"%s\"", a,
			 b);
	free(q1);
	free(q2);
	free(a);
	free(b);
	free(a2);
	free(b2);
}

static void
test_foreign_ids(void **state)
{
	char *ci = t_db_migrated("t_priv_owner");
	PGconn *c = t_connect(ci);
	docs_grants(c, role_worker, role_a);
	docs_grants(c, role_worker, role_b);
	/* A limited queue for the slots. */
	t_exec(c, "insert into pgjob.queues (name) values ('slots')");
	t_exec(c, "select pgjob.set_limits('slots', "
		  "'{\"global_concurrency\": 10}')");
	/* role_a2 is a member of role_a: it acts as role_a does. */
	t_exec(c,
	       "do $$ begin create role %s login; exception when "
	       "duplicate_object then null; end $$",
	       role_a2);
	t_exec(c, "grant %s to %s", role_a, role_a2);

	PGconn *a = connect_as(ci, role_a);
	PGconn *b = connect_as(ci, role_b);
	long long done = t_long(a, "select pgjob.enqueue('k', '{\"n\": 1}')");
	long long dead = t_long(a, "select pgjob.enqueue('k', '{\"n\": 2}')");
	long long open = t_long(a, "select pgjob.enqueue('k', '{\"n\": 3}')");
	t_exec(c,
	       "update pgjob.jobs set state = 'done', finished_at = now(),"
	       " result = '{\"secret\": \"result of a\"}' where id = %lld",
	       done);
	t_exec(c,
	       "update pgjob.jobs set state = 'dead', finished_at = now(),"
	       " last_error = 'secret error of a' where id = %lld",
	       dead);
	long long batch = t_long(a, "select pgjob.batch_open()");
	long long hold = t_long(a, "select pgjob.acquire_slot('slots')");
	long long none = t_long(c, "select max(id) + 1000 from pgjob.jobs");

	/* role_b: a parent of role_a's is no job to it, whatever its state;
	 * it reads no result or error, and marks nothing. */
	same_as_missing(b, "23503",
			"select pgjob.enqueue('k', depends_on => array[ID])",
			done, none);
	same_as_missing(b, "23503",
			"select pgjob.enqueue('k', depends_on => array[ID],"
			" on_parent_failure => 'run')",
			dead, none);
	same_as_missing(b, "23503",
			"select pgjob.enqueue('k', depends_on => array[ID])",
			open, none);
	t_assert_value(c, "0",
		       "select count(*) from pgjob.jobs where children"
		       " or payload::text like '%%secret%%'");
	/* The other functions it may call take no id of a job: in an
	 * array (enqueue_many()) or a workflow an id is refused, or names no
	 * step. */
	char *m = t_expect_sqlstate(b, "22023",
				    "select pgjob.enqueue_many('[{\"kind\":"
				    " \"k\", \"depends_on\": [%lld]}]')",
				    done);
	assert_non_null(strstr(m, "depends_on"));
	free(m);
	free(t_expect_sqlstate(b, "22023",
			       "select pgjob.enqueue_many('[{\"kind\":"
			       " \"k\", \"batch_id\": %lld}]')",
			       open));
	free(t_expect_sqlstate(b, "23503",
			       "select pgjob.enqueue_workflow('{\"steps\":"
			       " [{\"name\": \"a\", \"kind\": \"k\","
			       " \"after\": [\"%lld\"]}]}')",
			       done));
	/* Nor is its batch: it can neither seal it nor keep it open. */
	same_as_missing(b, "23503", "select pgjob.batch_seal(ID)", batch, none);
	same_as_missing(b, "23503",
			"select pgjob.enqueue('k', batch_id => ID,"
			" run_at => now() + interval '100 years')",
			batch, none);
	t_assert_value(c, "false|0",
		       "select sealed || '|' || total from pgjob.batches"
		       " where id = %lld",
		       batch);
	/* Nor its slot: as a slot that does not exist. */
	t_assert_value(b, "f", "select pgjob.release_slot(%lld)", hold);
	t_assert_value(b, "f", "select pgjob.renew_slot(%lld)", hold);
	t_assert_value(c, "1",
		       "select count(*) from pgjob.limit_holds where id = %lld",
		       hold);

	/* role_a acts on its own, and so does a member of role_a. */
	long long child = t_long(
		a, "select pgjob.enqueue('k', depends_on => array[%lld])",
		done);
	t_assert_value(c, "result of a",
		       "select payload #>> '{pgjob,parents,%lld,secret}'"
		       " from pgjob.jobs where id = %lld",
		       done, child);
	PGconn *a2 = connect_as(ci, role_a2);
	assert_true(t_long(a2,
			   "select pgjob.enqueue('k', depends_on => "
			   "array[%lld], on_parent_failure => 'run')",
			   dead) > 0);
	assert_true(t_long(a2, "select pgjob.enqueue('k', batch_id => %lld)",
			   batch) > 0);
	t_assert_value(a2, "t", "select pgjob.renew_slot(%lld)", hold);
	t_assert_value(a, "t", "select pgjob.release_slot(%lld)", hold);
	t_exec(a, "select pgjob.batch_seal(%lld)", batch);
	PQfinish(a2);

	/* A plain job done is kept in pgjob.jobs_done (sql/019): its owner
	 * goes with it, and only its owner reads its result from there. */
	long long moved = t_long(a, "select pgjob.enqueue('k')");
	t_exec(c,
	       "with d as (delete from pgjob.jobs where id = %lld returning"
	       " *) insert into pgjob.jobs_done (id, kind, payload, state,"
	       " result, finished_at, enqueued_by, ring) select id, kind,"
	       " payload, 'done', '{\"secret\": \"kept\"}', now(),"
	       " enqueued_by, 0 from d",
	       moved);
	same_as_missing(b, "23503",
			"select pgjob.enqueue('k', depends_on => array[ID])",
			moved, none);
	t_assert_value(c, "1",
		       "select count(*) from pgjob.jobs_done where id = %lld",
		       moved);
	child = t_long(a,
		       "select pgjob.enqueue('k', depends_on => array[%lld])",
		       moved);
	t_assert_value(c, "kept",
		       "select payload #>> '{pgjob,parents,%lld,secret}'"
		       " from pgjob.jobs where id = %lld",
		       moved, child);

	/* The same through a real end: a worker runs a plain job of
	 * role_a's, which moves to pgjob.jobs_done with its owner. */
	long long ran = t_long(a, "select pgjob.enqueue('plain')");
	pid_t p =
		t_start("owner_moved", ci,
			"workers: 1\n"
			"handlers:\n"
			"  plain: { type: exec, command: [\"/bin/true\"] }\n");
	t_wait_until(c, 60,
		     "select exists (select from pgjob.jobs_done where id ="
		     " %lld)",
		     ran);
	t_stop_clean(p);
	t_assert_value(c, "t",
		       "select enqueued_by = '%s'::regrole from"
		       " pgjob.jobs_done where id = %lld",
		       role_a, ran);
	same_as_missing(b, "23503",
			"select pgjob.enqueue('k', depends_on => array[ID])",
			ran, none);
	child = t_long(
		a, "select pgjob.enqueue('k', depends_on => array[%lld])", ran);
	t_assert_value(c, "available",
		       "select state from pgjob.jobs where id = %lld", child);

	/* The worker role reads every job: it acts on any. */
	PGconn *w = connect_as(ci, role_worker);
	assert_true(t_long(w,
			   "select pgjob.enqueue('k', depends_on => "
			   "array[%lld])",
			   open) > 0);
	/* A row whose owner is unknown (enqueued before schema version 30):
	 * only roles that read the jobs act on it. */
	t_exec(c, "update pgjob.jobs set enqueued_by = null where id = %lld",
	       dead);
	same_as_missing(a, "23503",
			"select pgjob.enqueue('k', depends_on => array[ID],"
			" on_parent_failure => 'run')",
			dead, none);
	assert_true(t_long(w,
			   "select pgjob.enqueue('k', depends_on => "
			   "array[%lld], on_parent_failure => 'run')",
			   dead) > 0);
	PQfinish(w);
	PQfinish(b);
	PQfinish(a);
	PQfinish(c);
	free(ci);
}

/* ---- rate limits ------------------------------------------------------ */

static void
test_rate_bounds(void **state)
{
	char *ci = t_db_migrated("t_priv_rate");
	PGconn *c = t_connect(ci);
	t_exec(c, "insert into pgjob.queues (name) values ('rated'), ('slow')");
	t_exec(c, "select pgjob.set_limits('rated', '{\"rate\": \"1/90d\"}')");
	/* A cost over enqueue's bound is refused, and takes nothing. */
	char *msg = t_expect_sqlstate(
		c, "22023", "select pgjob.take_rate('rated', 2147483647)");
	assert_non_null(strstr(msg, "1000000"));
	free(msg);
	free(t_expect_sqlstate(c, "22023",
			       "select pgjob.take_rate('rated', 1000001)"));
	t_assert_value(c, "t",
		       "select tokens is null from pgjob.limits"
		       " where queue = 'rated'");
	/* The largest cost is taken from a full bucket (burst 1). */
	t_assert_value(c, "t",
		       "select taken from pgjob.take_rate('rated', 1000000)");

	/* Buckets emptied far past anything a cost can do, with the
	 * slowest rates: the claim waits (a 'w' row for the rate), it never
	 * fails, and neither do take_rate(), the view, the counts or
	 * pgjob status. */
	t_exec(c, "select pgjob.set_limits('slow', '{\"rate\": \"1/31000d\","
		  " \"rate_per_key\": \"1/31000d\"}')");
	t_exec(c, "insert into pgjob.jobs (kind, queue, limit_key) values"
		  " ('k', 'rated', null), ('k', 'slow', 'x')");
	const char *const states[] = {
		"-2147483647",
		"-1e300",
		"'-infinity'",
	};
	for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++) {
		t_exec(c,
		       "update pgjob.limits set tokens = %s,"
		       " tokens_at = now() where queue in ('rated', 'slow')",
		       states[i]);
		t_exec(c,
		       "insert into pgjob.limit_keys values ('slow', 'x', %s,"
		       " now()) on conflict (queue, key) do update set"
		       " tokens = excluded.tokens, tokens_at = now()",
		       states[i]);
		for (int k = 0; k < 2; k++) {
			const char *q = k == 0 ? "rated" : "slow";
			t_assert_value(c, "w:rate",
				       "select string_agg(c_t || ':' ||"
				       " c_kind, ' ') from"
				       " pgjob.claim_limited('%s', 4, '{k}',"
				       " 'parallel', 'me', 60000, 1000)",
				       q);
			t_assert_value(c, "f",
				       "select taken from"
				       " pgjob.take_rate('%s', 1, 'x')",
				       q);
		}
		t_exec(c, "select * from pgjob.queue_limits");
		t_exec(c, "select * from pgjob.limit_waiting('rated')");
		struct t_run r;
		t_pgjob(&r, ci, "status", NULL);
		if (r.status != 0)
			fail_msg("pgjob status with tokens %s: %s", states[i],
				 r.err);
		t_run_free(&r);
		t_pgjob(&r, ci, "limits", NULL);
		if (r.status != 0)
			fail_msg("pgjob limits with tokens %s: %s", states[i],
				 r.err);
		t_run_free(&r);
	}
	PQfinish(c);
	free(ci);
}

/* ---- workflows of 10,000 steps ---------------------------------------- */

/*
 * Enqueues a workflow of n steps named s1..sn whose step i is after the
 * steps after_sql gives (a jsonb array of names, from i and n), and
 * checks each step's parents_left and edges against the spec.
 */
static void
check_shape(PGconn *c, const char *shape, int n, const char *after_sql)
{
	t_exec(c, "drop table if exists spec");
	t_exec(c,
	       "create table spec as select i, 's' || i as name, %s as after"
	       " from generate_series(1, %d) i",
	       after_sql, n);
	long long wf =
		t_long(c,
		       "select pgjob.enqueue_workflow(jsonb_build_object("
		       "'name', '%s', 'steps', (select jsonb_agg("
		       "jsonb_build_object('name', name, 'kind', 'k',"
		       " 'payload', jsonb_build_object('i', i), 'after',"
		       " after) order by i) from spec)))",
		       shape);
	/* Plans for 10,000 rows, not for an empty table. */
	t_exec(c, "analyze spec, pgjob.jobs, pgjob.job_deps");
	/* Every step once; a step without parents available, with them
	 * waiting on as many as its distinct parents. */
	t_assert_value(c, "0",
		       "select count(*) from spec s full join (select * from"
		       " pgjob.jobs where workflow_id = %lld) j on"
		       " j.step = s.name"
		       " where j.id is null or s.i is null"
		       " or (j.payload ->> 'i')::int <> s.i"
		       " or j.parents_left is distinct from (select"
		       "  nullif(count(distinct a), 0) from"
		       "  jsonb_array_elements_text(s.after) a)"
		       " or j.state <> case when jsonb_array_length(s.after)"
		       "  = 0 then 'available' else 'waiting' end",
		       wf);
	/* The edges are the spec's, and every parent knows it has
	 * children. */
	t_assert_value(
		c, "0",
		"with e as (select distinct p.id as parent, j.id as"
		" child from spec s cross join jsonb_array_elements_text("
		"s.after) a join pgjob.jobs j on j.workflow_id = %lld"
		" and j.step = s.name join pgjob.jobs p on"
		" p.workflow_id = %lld and p.step = a)"
		" select count(*) from e full join (select d.* from"
		" pgjob.job_deps d join pgjob.jobs j on j.id = d.child"
		" and j.workflow_id = %lld) d using (parent, child)"
		" where e.parent is null or d.parent is null"
		" or d.resolved is not null",
		wf, wf, wf);
	t_assert_value(c, "0",
		       "select count(*) from pgjob.jobs j where"
		       " j.workflow_id = %lld and (j.children is true) <>"
		       " exists (select from pgjob.job_deps d where"
		       " d.parent = j.id)",
		       wf);
	t_assert_value(c, "t",
		       "select steps = %d and ended = 0 from pgjob.workflows"
		       " where id = %lld",
		       n, wf);
}

static void
test_workflow_shapes(void **state)
{
	char *ci = t_db_migrated("t_priv_workflow");
	PGconn *c = t_connect(ci);
	check_shape(c, "chain", 10000,
		    "case when i > 1 then jsonb_build_array('s' || (i - 1))"
		    " else '[]' end");
	check_shape(c, "fan-out", 10000,
		    "case when i > 1 then '[\"s1\"]'::jsonb else '[]' end");
	check_shape(c, "fan-in", 10000,
		    "case when i = 10000 then (select jsonb_agg('s' || x)"
		    " from generate_series(1, 9999) x) else '[]' end");
	/* Up to 10 parents among the 100 steps before, some named twice,
	 * listed in any order. */
	check_shape(c, "dag", 10000,
		    "coalesce((select jsonb_agg('s' || (i - 1 - (i * 7 + r * "
		    "13) % least(i - 1, 100)) order by r desc) from"
		    " generate_series(1, least(i - 1, 10)) r), '[]')");
	/* A workflow's steps in any order of the array: children first. */
	check_shape(c, "reversed", 2000,
		    "case when i < 2000 then jsonb_build_array('s' || (i + 1))"
		    " else '[]' end");

	/* The errors stay what they were. */
	char *m = t_expect_sqlstate(
		c, "22023",
		"select pgjob.enqueue_workflow('{\"steps\": ["
		"{\"name\": \"a\", \"kind\": \"k\", \"after\": [\"c\"]},"
		"{\"name\": \"b\", \"kind\": \"k\", \"after\": [\"a\"]},"
		"{\"name\": \"c\", \"kind\": \"k\", \"after\": [\"b\"]},"
		"{\"name\": \"d\", \"kind\": \"k\"}]}')");
	assert_non_null(strstr(m, "a cycle: steps \"a\", \"b\", \"c\""));
	free(m);
	m = t_expect_sqlstate(c, "22023",
			      "select pgjob.enqueue_workflow('{\"steps\": ["
			      "{\"name\": \"a\", \"kind\": \"k\","
			      " \"after\": [\"a\"]}]}')");
	assert_non_null(strstr(m, "a cycle: steps \"a\""));
	free(m);
	m = t_expect_sqlstate(c, "23503",
			      "select pgjob.enqueue_workflow('{\"steps\": ["
			      "{\"name\": \"a\", \"kind\": \"k\","
			      " \"after\": [\"x\"]}]}')");
	assert_non_null(strstr(m, "step \"a\" is after \"x\", which is not a "
				  "step of this workflow"));
	free(m);
	/* A bad step among 10,000 is named. */
	m = t_expect_sqlstate(
		c, "22023",
		"select pgjob.enqueue_workflow(jsonb_build_object('steps',"
		" (select jsonb_agg(jsonb_build_object('name', 's' || i,"
		" 'kind', 'k', 'cost', case when i = 7777 then -1"
		" else 0 end, 'after', case when i > 1 then"
		" jsonb_build_array('s' || (i - 1)) else '[]' end) order by"
		" i) from generate_series(1, 10000) i)))");
	assert_non_null(strstr(m, "step \"s7777\""));
	free(m);
	t_assert_value(c, "5", "select count(*) from pgjob.workflows");
	PQfinish(c);
	free(ci);
}

static int
group_setup(void **state)
{
	int pid = (int)getpid();
	snprintf(role_worker, sizeof(role_worker), "p_worker_%d", pid);
	snprintf(role_a, sizeof(role_a), "p_app_a_%d", pid);
	snprintf(role_b, sizeof(role_b), "p_app_b_%d", pid);
	snprintf(role_a2, sizeof(role_a2), "p_app_a2_%d", pid);
	return 0;
}

static int
group_teardown(void **state)
{
	const char *roles[] = {role_worker, role_a, role_b, role_a2};
	PGconn *s = t_connect(t_server_conninfo());
	for (size_t i = 0; i < sizeof(role_dbs) / sizeof(role_dbs[0]); i++) {
		char *exists = t_value(s,
				       "select 1 from pg_database where "
				       "datname = '%s'",
				       role_dbs[i]);
		if (!exists)
			continue;
		free(exists);
		char ci[1200];
		snprintf(ci, sizeof(ci), "%s dbname=%s", t_server_conninfo(),
			 role_dbs[i]);
		PGconn *d = t_connect(ci);
		for (size_t k = 0; k < sizeof(roles) / sizeof(roles[0]); k++)
			t_exec(d,
			       "do $$ begin drop owned by %s; exception "
			       "when undefined_object then null; end $$",
			       roles[k]);
		PQfinish(d);
	}
	for (size_t k = 0; k < sizeof(roles) / sizeof(roles[0]); k++)
		t_exec(s, "drop role if exists %s", roles[k]);
	PQfinish(s);
	return 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_public_execute),
		cmocka_unit_test(test_foreign_ids),
		cmocka_unit_test(test_rate_bounds),
		cmocka_unit_test(test_workflow_shapes),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
