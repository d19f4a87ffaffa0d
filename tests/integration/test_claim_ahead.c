/*
 * Integration: where a claim that takes its turn starts (claim_sql's ha,
 * in src/db/claim.c), and what it says of where it stopped (tn); and the
 * sweep tickets (sw: sql/upgrade/029_sweep_tickets.sql).
 *
 * Where a claim that takes its turn starts (claim_sql's ha,
 * in src/db/claim.c), and what it says of where it stopped (tn).  The
 * worker's own claim statement, prepared as the worker prepares it, run
 * against rows set up by hand: a claim from a position may start past the
 * job the last claim in its turn stopped at (its queue's sequence,
 * pgjob.claim_stop_N), but only when that job is that claim's, of late,
 * its worker handles every kind this one does, and never past a job a
 * NOTIFY announced.
 *
 * The queue, in claim order: job 1 running (taken by slot 7, which
 * handles kind a), 2 available (a; the other claim found it locked, say),
 * 3 available (b: slot 7 does not handle it), 4 and 5 running (slot 7;
 * its claim stopped at 5), 6 available (a).  Job 7, of another queue,
 * running (slot 7).
 */
#include "testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "db/queue.h"

static long long base; /* job n's id is base + n */

/* The queue's sequences, where the last claim in its turn stopped: of
 * lane 0, and of lane 1. */
#define STOP_SEQ(lane)                                                         \
	"('pgjob.claim_stop_' || ((hashtext('default') & 31) * 2 + " lane      \
	"))::regclass"

/* Runs the claim, in its turn, as worker me:9 with kinds, a limit, ahead
 * (the job the last claim stopped at, by its number, set in the sequence;
 * 0: not ahead), and (cp, cr) for until, or NULLs; returns the claimed
 * jobs' numbers, as "{2,3}", and gives them back. */
static char *
claim(PGconn *c, const char *kinds, const char *limit, int ahead,
      const char *cp, const char *cr)
{
	/* The position: before job 1. */
	char *hr = t_value(c, "select (extract(epoch from timestamptz"
			      " '2026-01-01') * 1000000)::bigint");
	char *hp_a = xstrdup("{0}");
	char *hr_a = xasprintf("{%s}", hr);
	char *lim_a = xasprintf("{%s}", limit);
	/* The other lane's last claim stopped there; this one's, nowhere
	 * that holds (job 6 is available), unless the caller set it. */
	if (ahead)
		t_exec(c, "select setval(" STOP_SEQ("0") ", %lld)",
		       base + ahead);
	const char *ha_a = ahead ? "{t}" : "{f}";
	char *cp_a = xasprintf("{%s}", cp ? cp : "NULL");
	char *cr_a = xasprintf("{%s}", cr ? cr : "NULL");
	const char *p[] = {kinds,	 "{default}", lim_a, "me:9", "30000",
			   "{parallel}", hp_a,	      hr_a,  "{0}",  "1000000",
			   ha_a,	 cp_a,	      cr_a,  "{t}",  "1",
			   "f",		 "1000"};
	PGresult *r = PQexecPrepared(c, "pgjob_claim", 17, p, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		fail_msg("claim: %s", PQresultErrorMessage(r));
	PQclear(r);
	char *got = t_value(c,
			    "select coalesce(array_agg(id - %lld order by"
			    " id)::text, '{}') from pgjob.jobs where"
			    " locked_by = 'me:9'",
			    base);
	t_exec(c, "update pgjob.jobs set state = 'available', locked_by ="
		  " null, locked_until = null where locked_by = 'me:9'");
	free(hr);
	free(hp_a);
	free(hr_a);
	free(lim_a);
	free(cp_a);
	free(cr_a);
	return got;
}

/* The claim as claim() runs it takes exactly want ("{6}"). */
static void
claims(PGconn *c, const char *kinds, const char *limit, int ahead,
       const char *cp, const char *cr, const char *want)
{
	char *got = claim(c, kinds, limit, ahead, cp, cr);
	assert_string_equal(got, want);
	free(got);
}

/* Prepares the worker's claim statement on c, as the worker does. */
static void
prepare_claim(PGconn *c)
{
	int n;
	char *text = queue_statement("pgjob_claim", &n);
	PGresult *r = PQprepare(c, "pgjob_claim", text, n, NULL);
	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		fail_msg("prepare: %s", PQresultErrorMessage(r));
	PQclear(r);
	free(text);
}

/* Slot 7's leases as if just taken (job 5's last): the start past them
 * counts only leases taken in the last 200 ms. */
static void
fresh_leases(PGconn *c)
{
	t_exec(c,
	       "update pgjob.jobs set locked_until = now() + interval '30 s'"
	       " + (id - %lld) * interval '1 ms' where locked_by = 'h:7'",
	       base);
}

static void
test_claim_reads_ahead(void **state)
{
	char *ci = t_db_migrated("t_claim_ahead");
	PGconn *c = t_connect(ci);
	t_exec(c, "insert into pgjob.workers (slot, host, pid, supervisor_pid,"
		  " version, kinds) values (7, 'h', 1, 1, 'x', '{a}')");
	base = t_long(c, "select coalesce(max(id), 0) from pgjob.jobs");
	t_exec(c,
	       "insert into pgjob.jobs (id, kind, state, run_at, priority)"
	       " select %lld + g, case when g = 3 then 'b' else 'a' end,"
	       " 'available', timestamptz '2026-01-01' + g * interval '1 s',"
	       " 0 from generate_series(1, 6) g",
	       base);
	t_exec(c,
	       "insert into pgjob.jobs (id, queue, kind, run_at, priority)"
	       " values (%lld + 7, 'other', 'a', timestamptz '2026-01-01'"
	       " + interval '1 h', 0)",
	       base);
	t_exec(c,
	       "update pgjob.jobs set state = 'running', locked_by = 'h:7',"
	       " lease_token = 1, locked_until = now() + interval '30 s'"
	       " + (id - %lld) * interval '1 ms'"
	       " where id - %lld in (1, 4, 5, 7)",
	       base, base);
	prepare_claim(c);

	/* Not ahead: from the position. */
	claims(c, "{a}", "1", 0, NULL, NULL, "{2}");
	/* Ahead, and slot 7 handles every kind this worker does: past job 5,
	 * where slot 7's claim stopped. */
	fresh_leases(c);
	claims(c, "{a}", "1", 5, NULL, NULL, "{6}");
	/* This worker also handles b, which slot 7 passes over: from the
	 * position, job 3 included. */
	fresh_leases(c);
	claims(c, "{a,b}", "2", 5, NULL, NULL, "{2,3}");
	/* The last claim stopped at a job no claim holds now (it rolled
	 * back, or the job ended since), or at one of another queue (of the
	 * same sequence): from the position. */
	fresh_leases(c);
	claims(c, "{a}", "1", 6, NULL, NULL, "{2}");
	fresh_leases(c);
	claims(c, "{a}", "1", 7, NULL, NULL, "{2}");
	/* A NOTIFY said a job came that sorts before job 5: from the
	 * position. */
	char *key = t_value(c,
			    "select (extract(epoch from run_at) * 1000000)"
			    "::bigint from pgjob.jobs where id = %lld + 4",
			    base);
	fresh_leases(c);
	claims(c, "{a}", "1", 5, "0", key, "{2}");
	free(key);
	/* Slot 7's worker row gone (it stopped): from the position. */
	t_exec(c, "delete from pgjob.workers where slot = 7");
	fresh_leases(c);
	claims(c, "{a}", "1", 5, NULL, NULL, "{2}");
	/* Leases taken more than 200 ms before: too old to say where the last
	 * claim stopped. */
	t_exec(c, "insert into pgjob.workers (slot, host, pid, supervisor_pid,"
		  " version, kinds) values (7, 'h', 1, 1, 'x', '{a}')");
	fresh_leases(c);
	claims(c, "{a}", "1", 5, NULL, NULL, "{6}");
	t_exec(c, "update pgjob.jobs set locked_until = locked_until"
		  " - interval '1 s' where locked_by = 'h:7'");
	claims(c, "{a}", "1", 5, NULL, NULL, "{2}");
	/* The two lanes' last claims: of the stops that hold, the further
	 * (past job 5, not job 1); one that does not hold (job 6, available:
	 * a claim still in progress, say) leaves the other's (past job 4). */
	fresh_leases(c);
	t_exec(c, "select setval(" STOP_SEQ("1") ", %lld)", base + 1);
	claims(c, "{a}", "1", 5, NULL, NULL, "{6}");
	fresh_leases(c);
	t_exec(c, "select setval(" STOP_SEQ("1") ", %lld)", base + 4);
	claims(c, "{a}", "1", 6, NULL, NULL, "{6}");
	/* The claim in its turn (in lane 1) says where it stopped, in its
	 * lane's sequence. */
	fresh_leases(c);
	claims(c, "{a}", "1", 5, NULL, NULL, "{6}");
	assert_int_equal(t_long(c,
				"select pg_sequence_last_value(" STOP_SEQ(
					"1") ") - %lld",
				base),
			 6);
	assert_int_equal(t_long(c,
				"select pg_sequence_last_value(" STOP_SEQ(
					"0") ") - %lld",
				base),
			 5);
	PQfinish(c);
	free(ci);
}

/*
 * The sweep ticket: a claim that asks for it reads the queue from its head
 * when no worker of the same kinds swept it within the interval asked
 * ($17), and says so ('s'); else from its position.  Here the queue holds
 * job 1, whose lease expired (its worker died), and job 2, available,
 * and the position is past job 1: only a sweep takes job 1.
 */

/* Runs the claim of queue tq as worker me:9 with kinds, one job, from the
 * position past job 1, asking for the ticket (ask) with every ms; returns
 * the claimed jobs' numbers and "s" if the ticket was granted, as
 * "{1} s", and gives the jobs back as they were. */
static char *
swept(PGconn *c, const char *kinds, int ask, const char *every)
{
	char *hr = t_value(c,
			   "select (extract(epoch from run_at) * 1000000)"
			   "::bigint from pgjob.jobs where id = %lld + 1",
			   base);
	char *hr_a = xasprintf("{%s}", hr);
	char *hi_a = xasprintf("{%lld}", base + 1);
	const char *p[] = {
		kinds,	  "{tq}", "{1}", "me:9",	  "30000", "{parallel}",
		"{0}",	  hr_a,	  hi_a,	 "1000000",	  "{f}",   "{NULL}",
		"{NULL}", "{t}",  "0",	 ask ? "t" : "f", every};
	PGresult *r = PQexecPrepared(c, "pgjob_claim", 17, p, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		fail_msg("claim: %s", PQresultErrorMessage(r));
	int granted = 0;
	for (int i = 0; i < PQntuples(r); i++)
		if (*PQgetvalue(r, i, 0) == 's') {
			assert_string_equal(PQgetvalue(r, i, 3), "tq");
			granted++;
		}
	assert_true(granted <= 1);
	PQclear(r);
	char *ids = t_value(c,
			    "select coalesce(array_agg(id - %lld order by"
			    " id)::text, '{}') from pgjob.jobs where"
			    " locked_by = 'me:9'",
			    base);
	char *got = xasprintf("%s%s", ids, granted ? " s" : "");
	t_exec(c,
	       "update pgjob.jobs set state = case when id = %lld + 1 then"
	       " 'running' else 'available' end, locked_by = case when"
	       " id = %lld + 1 then 'gone:3' end, locked_until = case when"
	       " id = %lld + 1 then now() - interval '1 s' end,"
	       " lost_attempts = 0 where queue = 'tq'",
	       base, base, base);
	free(ids);
	free(hr);
	free(hr_a);
	free(hi_a);
	return got;
}

static void
sweeps(PGconn *c, const char *kinds, int ask, const char *every,
       const char *want)
{
	char *got = swept(c, kinds, ask, every);
	assert_string_equal(got, want);
	free(got);
}

static void
test_sweep_tickets(void **state)
{
	char *ci = t_db_migrated("t_claim_sweep");
	PGconn *c = t_connect(ci);
	base = t_long(c, "select coalesce(max(id), 0) from pgjob.jobs");
	t_exec(c,
	       "insert into pgjob.jobs (id, queue, kind, state, run_at,"
	       " priority) select %lld + g, 'tq', 'a', 'available',"
	       " timestamptz '2026-01-01' + g * interval '1 s', 0"
	       " from generate_series(1, 2) g",
	       base);
	t_exec(c,
	       "update pgjob.jobs set state = 'running', locked_by = 'gone:3',"
	       " lease_token = 1, locked_until = now() - interval '1 s'"
	       " where id = %lld + 1",
	       base);
	prepare_claim(c);
	/* The tickets of (tq, {a}) and (tq, {a,c}) are in sequences of their
	 * own (they could meet: 32 of them, by a hash). */
	const char *seq_a = "('pgjob.sweep_at_' || ((hashtext('tq')"
			    " # hashtext('{a}')) & 31))::regclass";
	assert_int_equal(
		t_long(c, "select (((hashtext('tq') # hashtext('{a}')) & 31) <>"
			  " ((hashtext('tq') # hashtext('{a,c}')) & 31))::int"),
		1);

	/* Not asking: from the position, job 2. */
	sweeps(c, "{a}", 0, "1000", "{2}");
	/* Asking, never swept: granted, from the head; the expired lease is
	 * taken, and counted lost. */
	long long t0 = t_long(c, "select (extract(epoch from"
				 " statement_timestamp()) * 1000)::bigint");
	char *got = swept(c, "{a}", 1, "60000");
	assert_string_equal(got, "{1} s");
	free(got);
	long long at = t_long(c, "select pg_sequence_last_value(%s)", seq_a);
	assert_true(at >= t0 && at <= t0 + 60000);
	/* Asking again within the minute: not granted, from the position;
	 * the ticket keeps its time. */
	sweeps(c, "{a}", 1, "60000", "{2}");
	assert_int_equal(t_long(c, "select pg_sequence_last_value(%s)", seq_a),
			 at);
	/* A worker that also handles c has a ticket of its own. */
	sweeps(c, "{a,c}", 1, "60000", "{1} s");
	sweeps(c, "{a,c}", 1, "60000", "{2}");
	/* The last sweep a minute ago (as if): granted again. */
	t_exec(c, "select setval(%s, pg_sequence_last_value(%s) - 60000)",
	       seq_a, seq_a);
	sweeps(c, "{a}", 1, "60000", "{1} s");
	/* Within the interval of another asker (0 ms): granted. */
	sweeps(c, "{a}", 1, "0", "{1} s");
	/* A worker role not granted the ticket's sequence (an upgrade whose
	 * grants were not run again): every ask is a sweep, as before
	 * version 29, and the claim does not fail. */
	char role[64];
	snprintf(role, sizeof(role), "t_sweep_%d", (int)getpid());
	t_exec(c, "create role %s", role);
	t_exec(c, "grant usage on schema pgjob to %s", role);
	t_exec(c, "grant select, update on all tables in schema pgjob to %s",
	       role);
	t_exec(c, "grant select, update on all sequences in schema pgjob to %s",
	       role);
	char *name = t_value(c, "select %s::text", seq_a);
	t_exec(c, "revoke all on sequence %s from %s", name, role);
	free(name);
	t_exec(c, "set role %s", role);
	sweeps(c, "{a}", 1, "60000", "{1} s");
	sweeps(c, "{a}", 1, "60000", "{1} s");
	t_exec(c, "reset role");
	t_exec(c, "drop owned by %s", role);
	t_exec(c, "drop role %s", role);
	PQfinish(c);
	free(ci);
}

/*
 * A claim from the head that is not the sweep leaves a row whose version
 * it sees has the xmax of a transaction its snapshot may not see as done,
 * as a claim from a position does (claim_sql in src/db/claim.c): a row
 * another claim took and committed after this claim's snapshot is left,
 * not locked; rows a claim that rolled back or a lock left are taken.  FOR
 * UPDATE would follow it to its newest version, running, lock it, drop it and
 * hold the lock to the claim's end, so that the worker running the job waits
 * for this claim to write its end (64 instances of one worker: the ends' 77 %
 * in Lock:transactionid, behind claims: docs/performance.md, "Many processes").
 *
 * The claim must take its snapshot before the other claim commits, and
 * lock after: it asks for its sweep ticket (not granted: the interval is
 * longer than the clock's age), and the ticket's read of the sweep
 * sequence waits for another session's ALTER SEQUENCE, which commits with
 * the other claim.
 */
static void
test_head_claim_leaves_rows_claimed_since(void **state)
{
	char *ci = t_db_migrated("t_claim_head_since");
	PGconn *c = t_connect(ci);
	PGconn *o = t_connect(ci);
	base = t_long(c, "select coalesce(max(id), 0) from pgjob.jobs");
	t_exec(c,
	       "insert into pgjob.jobs (id, queue, kind, state, run_at,"
	       " priority) select %lld + g, 'default', 'k', 'available',"
	       " timestamptz '2026-01-01' + g * interval '1 s', 0"
	       " from generate_series(1, 4) g",
	       base);
	/* Job 3's row keeps the xmax of a claim that rolled back (a sweep
	 * stopped by its time limit), job 4's of a lock taken and left: both
	 * ended before the claim's snapshot, and are taken (not left for the
	 * next sweep), though a write transaction older than both is still
	 * open (its xid is the snapshot's xmin: any session of the server's
	 * can be that one). */
	PGconn *l = t_connect(ci);
	t_exec(l, "begin");
	t_exec(l, "select pg_current_xact_id()");
	t_exec(o, "begin");
	t_exec(o, "select from pgjob.jobs where id = %lld + 3 for update",
	       base);
	t_exec(o, "rollback");
	t_exec(o, "begin");
	t_exec(o, "select from pgjob.jobs where id = %lld + 4 for update",
	       base);
	t_exec(o, "commit");
	t_assert_value(o, "2",
		       "select count(*) from pgjob.jobs where id > %lld + 2"
		       " and xmax <> '0'",
		       base);
	prepare_claim(c);
	t_exec(c, "begin");
	t_exec(o, "begin");
	t_exec(o, "do $$ begin execute format('alter sequence %%s cache 1',"
		  " ('pgjob.sweep_at_' || ((hashtext('default')"
		  " # hashtext('{k}')) & 31))::regclass); end $$");
	const char *p[] = {"{k}",	    "{default}",  "{10}",   "me:9",
			   "30000",	    "{parallel}", "{NULL}", "{NULL}",
			   "{NULL}",	    "1000000",	  "{f}",    "{NULL}",
			   "{NULL}",	    "{f}",	  "0",	    "t",
			   "10000000000000"};
	if (!PQsendQueryPrepared(c, "pgjob_claim", 17, p, NULL, NULL, 0))
		fail_msg("send: %s", PQerrorMessage(c));
	t_wait_lock_wait(o, PQbackendPID(c), 30);
	/* Another claim takes job 1, and commits. */
	t_exec(o,
	       "update pgjob.jobs j set state = 'running', locked_by = 'h:7',"
	       " locked_until = now() + interval '1 minute',"
	       " lease_token = j.lease_token + 1, attempts = j.attempts + 1,"
	       " attempted_at = now() where id = %lld + 1",
	       base);
	t_exec(o, "commit");
	PGresult *r;
	int rows = -1;
	while ((r = PQgetResult(c)) != NULL) {
		if (PQresultStatus(r) != PGRES_TUPLES_OK)
			fail_msg("claim: %s", PQresultErrorMessage(r));
		rows = 0;
		for (int i = 0; i < PQntuples(r); i++)
			rows += strcmp(PQgetvalue(r, i, 0), "c") == 0;
		PQclear(r);
	}
	assert_int_equal(rows, 3);
	t_assert_value(c, "{2,3,4}",
		       "select array_agg(id - %lld order by id)::text"
		       " from pgjob.jobs where locked_by = 'me:9'",
		       base);
	/* The claim is not over, and holds no lock on job 1: its holder
	 * can write its end now. */
	t_assert_value(o, "1",
		       "select count(*) from (select from pgjob.jobs where"
		       " id = %lld + 1 for update skip locked) l",
		       base);
	t_exec(c, "commit");
	t_exec(l, "commit");
	PQfinish(l);
	PQfinish(o);
	PQfinish(c);
	free(ci);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_claim_reads_ahead),
		cmocka_unit_test(test_sweep_tickets),
		cmocka_unit_test(test_head_claim_leaves_rows_claimed_since),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
