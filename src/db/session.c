/*
 * session: a worker's connection made ready to work.  See session.h.
 */
#include "db/session.h"

#include <stdio.h>
#include <stdlib.h>

#include "common/failpoint.h"
#include "common/util.h"
#include "db/db.h"
#include "db/internal.h"
#include "db/migrate.h"

static int
failed(PGconn *conn, PGresult *res, const char *what, char **err)
{
	char *text = db_error_text(conn, res);
	*err = xasprintf("%s: %s", what, text);
	free(text);
	PQclear(res);
	return -1;
}

/*
 * The slot prev (a reconnecting worker's last one) if it is free, else the
 * lowest free slot 1..max_slots; 0 when every one is taken, or -1 on a
 * database error (*err set).  Keeping its slot keeps a worker's name
 * (host:slot) on the jobs it holds across a reconnect; when the slot still
 * changes, the next renewal moves them (queue_renew()).
 */
static int
slot_acquire(PGconn *conn, int64_t lock_class, int max_slots, int prev,
	     char **err)
{
	char cls[24], max[16], pr[16];
	snprintf(cls, sizeof(cls), "%lld", (long long)lock_class);
	snprintf(max, sizeof(max), "%d", max_slots);
	snprintf(pr, sizeof(pr), "%d", prev);
	PGresult *res;
	if (prev > 0 && prev <= max_slots) {
		const char *pp[] = {cls, pr};
		res = PQexecParams(conn,
				   "select pg_try_advisory_lock($1::int,"
				   " $2::int)",
				   2, NULL, pp, NULL, NULL, 0);
		if (PQresultStatus(res) != PGRES_TUPLES_OK)
			return failed(conn, res, "taking a slot", err);
		int got = PQntuples(res) && *PQgetvalue(res, 0, 0) == 't';
		PQclear(res);
		if (got)
			return prev;
	}
	const char *p[] = {cls, max};
	/* The filter runs row by row in order and LIMIT stops at the first
	 * lock taken, so at most one slot is locked: the lowest free one. */
	res = PQexecParams(conn,
			   "select n from generate_series(1, $2::int) n"
			   " where pg_try_advisory_lock($1::int, n) limit 1",
			   2, NULL, p, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		return failed(conn, res, "taking a slot", err);
	int slot = PQntuples(res) ? atoi(PQgetvalue(res, 0, 0)) : 0;
	PQclear(res);
	return slot;
}

/*
 * Upserts the worker's row (heartbeat now()).  What a previous holder of
 * the slot said it could do (tasks, schedules) is cleared: the duty writes
 * this worker's own right after (lease_worker_publish()); its totals
 * (lease_worker_heartbeat()) start from 0.
 *
 * A worker that reconnects after losing its connection can get another
 * slot: the server may not yet have seen the old session end (a network
 * partition, a frozen proxy), and it holds the old slot's lock until it
 * does.  That session's row, with this worker's host and pid, goes in the
 * same statement; otherwise it stays, its heartbeat stopped, until another
 * worker takes the slot or pruning removes it a day later, and `pgjob
 * status` counts this worker twice (the fault suite's freeze saw 3 of 2).
 */
static int
worker_register(PGconn *conn, const struct session_worker *w, int slot,
		char **err)
{
	char sl[16], pid[16], spid[16], prev[16];
	snprintf(sl, sizeof(sl), "%d", slot);
	snprintf(prev, sizeof(prev), "%d", w->prev_slot);
	snprintf(pid, sizeof(pid), "%d", w->pid);
	snprintf(spid, sizeof(spid), "%d", w->supervisor_pid);
	char *kinds = db_text_array(w->kinds, w->nkinds);
	char *queues = db_text_array(w->queues, w->nqueues);
	const char *p[] = {sl,	       w->host, pid,  spid,
			   w->version, kinds,	prev, queues};
	PGresult *res = PQexecParams(
		conn,
		"with gone as (delete from pgjob.workers where slot = $7::int"
		"  and slot <> $1::int and host = $2 and pid = $3::int)"
		" insert into pgjob.workers (slot, host, pid, supervisor_pid,"
		"  version, kinds, queues, running)"
		" values ($1, $2, $3, $4, $5, $6::text[], $8::text[], 0)"
		" on conflict (slot) do update set host = excluded.host,"
		"  pid = excluded.pid, supervisor_pid = "
		"excluded.supervisor_pid,"
		"  version = excluded.version, kinds = excluded.kinds,"
		"  queues = excluded.queues,"
		"  tasks = '{}', schedules = '{}', defined_at = null,"
		"  started_at = now(), heartbeat_at = now(),"
		"  done_total = 0, failed_total = 0, retried_total = 0,"
		"  crash_loops = null, running = 0",
		8, NULL, p, NULL, NULL, 0);
	free(kinds);
	free(queues);
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		return failed(conn, res, "registering the worker", err);
	PQclear(res);
	return 0;
}

const char session_planner_settings[] =
	"set plan_cache_mode = force_generic_plan; set jit = off;"
	" set enable_seqscan = off; set enable_bitmapscan = off";

int
session_start(struct db_conn *c, const struct session_worker *w, int *slot,
	      char **err)
{
	PGconn *conn = db_pgconn(c);

	*err = NULL;
	PQclear(PQexec(conn, "set idle_in_transaction_session_timeout = "
			     "'60s'"));
	/* The claim's plan does not depend on its parameters: planning it
	 * anew for every batch (PostgreSQL's custom plans) is server time
	 * spent on every job for nothing.  And its estimated cost, which
	 * counts every branch of every mode, can pass jit_above_cost: JIT
	 * compiling it took longer than running it.
	 *
	 * A generic plan is made at a statement's first run, and kept until
	 * the table's statistics change: on a new install that is while the
	 * jobs table is empty, and autovacuum's first ANALYZE can be a minute
	 * away.  The cheapest way to read ids out of an empty table is to
	 * read the whole table, so the claim and the finish would look their
	 * rows up by sequential scans, for every batch, of a table that
	 * grows by thousands of rows a second (a fresh database under a feed
	 * would crawl until that ANALYZE).  Every statement
	 * of the worker is written for an index (each has one), so sequential
	 * scans are off: its plans are the index plans whatever the table
	 * held when they were made (docs/performance.md, "Plans that do not
	 * depend on a table's size").
	 *
	 * Bitmap scans are off too.  A plan is made again after every
	 * ANALYZE, and under a feed an ANALYZE can find few live rows
	 * beside millions of dead ones.  Believing the queue held one job,
	 * the claim then took the jobs past its position by a bitmap scan
	 * and sorted them: every claim read the whole backlog, until the
	 * next ANALYZE.  Without bitmap scans the walk of
	 * jobs_claim_idx in its order, which stops at the batch's size, is
	 * the cheapest plan whatever the estimate.  Every statement of the
	 * worker looks up batches, not ranges, so none needs one.
	 *
	 * An sql handler's own statement gets all four settings back
	 * (queue_run_sql). */
	PQclear(PQexec(conn, session_planner_settings));
	if (migrate_check(c, NULL, err) < 0)
		return PQstatus(conn) == CONNECTION_OK ? EXIT_CONFIG : -1;
	*slot = FAILPOINT(FP_SLOT_LOCK)
			? (*err = xstrdup("taking a slot: failpoint"), -1)
			: slot_acquire(conn, w->lock_class, w->max_slots,
				       w->prev_slot, err);
	if (*slot < 0)
		return -1;
	if (*slot == 0) {
		*err = xasprintf("no free slot among 1..%d (lock class %lld): "
				 "raise max_slots or run fewer workers",
				 w->max_slots, (long long)w->lock_class);
		return EXIT_TEMPFAIL;
	}
	return 0;
}

int
session_register(struct db_conn *c, const struct session_worker *w, int slot,
		 char **err)
{
	PGconn *conn = db_pgconn(c);

	if (worker_register(conn, w, slot, err) < 0)
		return -1;
	if (FAILPOINT(FP_LISTEN)) {
		*err = xstrdup("LISTEN: failpoint");
		return -1;
	}
	/* pgjob: new jobs; pgjob_limits: a limit or pause changed. */
	PGresult *res = PQexec(conn, "listen pgjob; listen pgjob_limits");
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		return failed(conn, res, "LISTEN", err);
	PQclear(res);
	return 0;
}

int
session_publish_limits(struct db_conn *c, const char *limits, char **replaced,
		       char **err)
{
	const char *p[] = {limits};
	*replaced = NULL;
	struct db_rows *r = db_query(c,
				     "select string_agg(q, ', ' order by q)"
				     " from pgjob.publish_limits($1::jsonb) q",
				     1, p, err);
	if (!r)
		return -1;
	if (db_rows_count(r) > 0 && db_rows_value(r, 0, 0))
		*replaced = xstrdup(db_rows_value(r, 0, 0));
	db_rows_free(r);
	return 0;
}
