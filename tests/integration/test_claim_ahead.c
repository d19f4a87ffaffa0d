/*
 * Integration: where a claim that takes its turn starts (claim_sql's ha,
 * in src/db/queue.c).  The worker's own claim statement, prepared as the
 * worker prepares it, run against rows set up by hand: a claim from a
 * position may start past the newest job another claim took, but only
 * when that claim's worker handles every kind this one does, and never
 * past a job a NOTIFY announced.
 *
 * The queue, in claim order: job 1 running (taken by slot 7, which
 * handles kind a), 2 available (a; the other claim found it locked, say),
 * 3 available (b: slot 7 does not handle it), 4 and 5 running (slot 7;
 * 5's lease taken last), 6 available (a).
 */
#include "testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "db/queue.h"

static long long base; /* job n's id is base + n */

/* Runs the claim as worker me:9 with kinds, a limit, ahead ("t"/"f"), and
 * (cp, cr) for until, or NULLs; returns the claimed jobs' numbers, as
 * "{2,3}", and gives them back. */
static char *
claim(PGconn *c, const char *kinds, const char *limit, const char *ahead,
      const char *cp, const char *cr)
{
	/* The position: before job 1. */
	char *hr = t_value(c, "select (extract(epoch from timestamptz"
			      " '2026-01-01') * 1000000)::bigint");
	char *hp_a = xstrdup("{0}");
	char *hr_a = xasprintf("{%s}", hr);
	char *lim_a = xasprintf("{%s}", limit);
	char *ha_a = xasprintf("{%s}", ahead);
	char *cp_a = xasprintf("{%s}", cp ? cp : "NULL");
	char *cr_a = xasprintf("{%s}", cr ? cr : "NULL");
	const char *p[] = {kinds,	 "{default}", lim_a, "me:9", "30000",
			   "{parallel}", hp_a,	      hr_a,  "{0}",  "1000000",
			   "f",		 ha_a,	      cp_a,  cr_a};
	PGresult *r = PQexecPrepared(c, "pgjob_claim", 14, p, NULL, NULL, 0);
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
	free(ha_a);
	free(cp_a);
	free(cr_a);
	return got;
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
	       "update pgjob.jobs set state = 'running', locked_by = 'h:7',"
	       " lease_token = 1, locked_until = now() + interval '30 s'"
	       " + (id - %lld) * interval '1 ms'"
	       " where id - %lld in (1, 4, 5)",
	       base, base);
	int n;
	char *text = queue_statement("pgjob_claim", &n);
	PGresult *r = PQprepare(c, "pgjob_claim", text, n, NULL);
	assert_int_equal(PQresultStatus(r), PGRES_COMMAND_OK);
	PQclear(r);
	free(text);

	char *got;
	/* Not ahead: from the position. */
	got = claim(c, "{a}", "1", "f", NULL, NULL);
	assert_string_equal(got, "{2}");
	free(got);
	/* Ahead, and slot 7 handles every kind this worker does: past job 5,
	 * the newest one slot 7 took. */
	fresh_leases(c);
	got = claim(c, "{a}", "1", "t", NULL, NULL);
	assert_string_equal(got, "{6}");
	free(got);
	/* This worker also handles b, which slot 7 passes over: from the
	 * position, job 3 included. */
	fresh_leases(c);
	got = claim(c, "{a,b}", "2", "t", NULL, NULL);
	assert_string_equal(got, "{2,3}");
	free(got);
	/* A NOTIFY said a job came that sorts before job 5: from the
	 * position. */
	char *key = t_value(c,
			    "select (extract(epoch from run_at) * 1000000)"
			    "::bigint from pgjob.jobs where id = %lld + 4",
			    base);
	fresh_leases(c);
	got = claim(c, "{a}", "1", "t", "0", key);
	assert_string_equal(got, "{2}");
	free(got);
	free(key);
	/* Slot 7's worker row gone (it stopped): from the position. */
	t_exec(c, "delete from pgjob.workers where slot = 7");
	fresh_leases(c);
	got = claim(c, "{a}", "1", "t", NULL, NULL);
	assert_string_equal(got, "{2}");
	free(got);
	/* Leases taken more than 200 ms before: too old to say where the last
	 * claim stopped. */
	t_exec(c, "insert into pgjob.workers (slot, host, pid, supervisor_pid,"
		  " version, kinds) values (7, 'h', 1, 1, 'x', '{a}')");
	fresh_leases(c);
	got = claim(c, "{a}", "1", "t", NULL, NULL);
	assert_string_equal(got, "{6}");
	free(got);
	t_exec(c, "update pgjob.jobs set locked_until = locked_until"
		  " - interval '1 s' where locked_by = 'h:7'");
	got = claim(c, "{a}", "1", "t", NULL, NULL);
	assert_string_equal(got, "{2}");
	free(got);
	PQfinish(c);
	free(ci);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_claim_reads_ahead),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
