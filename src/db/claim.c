/*
 * claim: the claim of the queues without limits, in one statement that
 * commits on its own: per queue, up to its free places, due jobs by
 * priority, run_at and id, available or whose lease expired (their worker
 * died).  It is an UPDATE ... WHERE id = any(SELECT ... FOR UPDATE SKIP
 * LOCKED), so concurrent claimers skip each other's rows.  Here: its text
 * (a parallel branch, and the serial and per_key ones a worker's queues
 * need), where a scan starts (positions, the turns of crowded claims, the
 * sweep tickets), and its sending.  Its answer is read in claimed.c, with
 * the limited claim's (claim_limited.c).  A file of its own: it is the
 * statement every job goes through, and each of its parts is shaped by a
 * plan or a lock it must not get (the comments say which).
 */
#include "db/claim.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/failpoint.h"
#include "common/util.h"
#include "db/db.h"
#include "db/internal.h"

/*
 * The claim, per queue (q.name, up to q.lim jobs, in mode q.mode), of the
 * queue's unfinished jobs that wait for no parent: by mode, due jobs by
 * priority, run_at, id (parallel); the head of the queue, its lowest
 * unfinished id, if it is due (serial); the head of each ordering_key, its
 * oldest unfinished job, if due (per_key; jobs without a key are
 * independent).  A job is taken if it is available or its lease expired
 * (its worker vanished; that attempt counts as lost): in place, where the
 * queue's order puts it.  A serial or per_key head that waits for a retry
 * or runs holds back the jobs behind it.  SKIP LOCKED on the head itself
 * never moves a claimer on to the next job: it finds nothing, as it
 * should.
 *
 * Every condition is in columns the claim does not write (finished_at,
 * parents_left, queue, run_at, priority, id, ordering_key), and every
 * index of pgjob.jobs is over such columns (sql/upgrade/027_hot_claim.sql): the
 * claim's update can be HOT (fillfactor 40 leaves it room on the page),
 * and then writes no index entry.  An expired lease
 * behind a position is found by the next claim from the head (the sweep,
 * at least once a second: from_positions() in src/worker/claim.c).
 *
 * Rows: 'c' and the claimed job's columns; 'p' and, per queue, where the
 * parallel branch stopped (struct queue_claimed).
 *
 * Except in the sweep, the parallel branch leaves every row whose version
 * it sees has the xmax of a transaction its snapshot may not see as done
 * (below): one that another claim has locked (SKIP LOCKED would skip it
 * after trying its lock), or has claimed and committed since this
 * statement's snapshot.  FOR UPDATE would follow such a row to its newest
 * version, running, lock it, find it no longer available and drop it, but
 * hold the lock to the end of the claim: the worker that ran the job
 * would then wait for this claim to write the job's end (ends waiting on
 * Lock:transactionid, with many claimers).  Until 2026-12-07 only a
 * claim from a position left them; a claim from the head (a worker's
 * first, or one a NOTIFY without a key sent back there) locked them, and
 * sixty-four instances of one worker, whose claims start from the head
 * together, spent 78 % of their ends' time waiting for such claims
 * (docs/performance.md, "Many processes"; test_claim_ahead checks it).
 * An xmax equal to the row's
 * xmin is a lock that the transaction which wrote this version took after
 * it (it would be a newer version otherwise): a workflow's released steps
 * (sql/upgrade/011_workflows.sql leaves them so), a parent its children were
 * enqueued after in the same transaction.  Those are taken: else the steps
 * a parent's end released would wait for the sweeps, one queue a second.
 * Another xmax can be a lock a transaction took and left (children
 * attached to a parent later, pgjob cancel finding nothing to do), or a
 * claim that rolled back (a sweep stopped by its time limit, a worker
 * killed in its claim).  Those are taken when that transaction ended
 * before the snapshot (pg_visible_in_snapshot() of the xmax, made a
 * 64-bit xid with the epoch of the snapshot's xmax, q.sx, from which it is
 * less than 2^32 back): a version whose xmax ended before the snapshot and
 * is still the one the snapshot sees was only locked, or its writer rolled
 * back, and locking it follows no newer version.  Not "older than the
 * snapshot's xmin", which any write transaction left open anywhere on the
 * server holds back (a loaded test run showed it).  A transaction that
 * took a lock and is still open is passed over; its job waits for the
 * next claim after it ends, or for the sweep, the claim from the head
 * that reads without the test (at least once a second: from_positions()
 * in src/worker/claim.c).  (An xmax that is a multixact, several lockers,
 * is no xid and the test means nothing for it: such a row may be taken,
 * and at worst locked as every claim did before; nothing of pgjob's
 * takes a shared lock on a job.)
 *
 * A claim that takes its turn (TURN_SQL) may start its parallel scan of a
 * queue further on than its position (ha): past the job where the last
 * claim in its turn stopped, of either lane, the further of the two (each
 * sets its queue's sequence of its lane, STOP_SEQ, to the id of the last
 * job it took; the next in its lane reads it once that one committed and
 * gave up the turn; the other lane's may be of a claim in progress, whose
 * job is not yet running in this claim's snapshot, and is passed over).
 * Every available job before it that that claim could see, it took or
 * found locked (the other lane's claim in progress, if any, started from
 * the same place or from further back: its rows are locked, and passed).
 * Only if that job is still the claim's, its lease taken within
 * STOP_FRESH_MS (a claim that rolled back leaves its value, setval() is
 * not transactional, but not its jobs), and if that claim's worker handles
 * every kind this one does (its slot, from locked_by, in pgjob.workers):
 * else the jobs it left for their kind would be passed over.  And only
 * before (cp, cr), the earliest key of the NOTIFYs this worker had since
 * its last claim that sort after its position: jobs that came after the
 * last claim's snapshot.  For STOP_FRESH_MS a lease counts from the claim
 * statement's start (statement_timestamp()), not its transaction's, which
 * began with the wait for the turn: the last claim that committed started
 * its statement a claim's time ago, however long it waited.
 *
 * The stop is kept in a sequence, read once, and its job looked up by id:
 * not read from jobs_running_idx backwards (the running job whose lease
 * ends last), which under a snapshot held open elsewhere passes the entry
 * of every job that ended since, and is an index on state that every claim
 * would have to write an entry in (docs/performance.md, "Where a crowded
 * claim starts"); not a row, which a snapshot held open would keep every
 * version of; and not a NOTIFY from each claim: a worker waiting for its
 * turn receives none until its own claim is done, so it would know only
 * where claims stopped before it asked.
 *
 * queue_claim_sql() puts it together: claim_sql (the parallel branch),
 * the serial and per_key branches when a queue of the worker's needs them,
 * and claim_tail_sql.
 */
/*
 * A stop (STOP_SEQ) holds only while its job's lease was taken this
 * recently, in ms: long enough for the claim after it in its turn, short
 * enough that a stop of a claim that rolled back, or of a lane gone
 * quiet, is soon passed over.
 */
#define STOP_FRESH_MS "200"
/*
 * The claim_stop sequences in sql/: 32 pairs, one sequence per lane (two
 * lanes: TURN_LANES in src/worker/claim.c), pgjob.claim_stop_0 to _63; a
 * queue's pair is chosen by the hash of its name, masked by STOP_MASK (32
 * - 1).  Queues whose hashes meet share a pair, and pass over each other's
 * stops like any other that does not hold.
 */
#define STOP_MASK "31"
/* The sequence that holds where the last claim of queue q in lane l (SQL
 * expressions) stopped. */
#define STOP_SEQ(q, l)                                                         \
	"('pgjob.claim_stop_' || ((hashtext(" q ") & " STOP_MASK ") * 2 + " l  \
	"))::regclass"

/*
 * The sweep_at sequences in sql/: 32, pgjob.sweep_at_0 to _31, one chosen
 * by the hash of a queue and the claimer's kinds, masked by SWEEP_MASK (32
 * - 1).
 */
#define SWEEP_MASK "31"
/* The sequence that holds when queue q (an SQL expression) was last swept
 * by a worker of the claim's kinds ($1): the hash of q's name, xor that of
 * the kinds, which an uncorrelated sub-select computes once a statement.
 * Until 2026-12-07 the kinds' text was hashed with each queue's name, three
 * times a queue: with 10,000 kinds and 1,000 queues, a claim that asked
 * for its sweep tickets spent 690 ms of its 785 turning the array into
 * text (tests/bench/many.sh, docs/performance.md "Many queues and kinds"). */
#define SWEEP_SEQ(q)                                                           \
	"('pgjob.sweep_at_' || ((hashtext(" q ")"                              \
	" # (select hashtext($1::text[]::text))) & " SWEEP_MASK "))::regclass"

#define CLAIM_NPARAMS 17

/*
 * Whether the claimer serves kind k (an SQL expression): k is one of the
 * kinds in $1.  Not "k = any($1)": with $1 a parameter, PostgreSQL walks
 * the array for each row it tests (it hashes only a constant array), and
 * a worker with thousands of handlers then spends most of its claim
 * comparing kinds.  As a sub-select it is a hashed SubPlan, built once
 * per claim; coalesce() keeps the planner from turning it into a join
 * (a sub-select directly in the WHERE clause becomes a semi-join), which
 * would no longer read the queue in its index's order.  test_plans
 * checks the plan.
 */
#define KIND_SERVED(k) "coalesce(" k " in (select unnest($1::text[])), false)"

/* clang-format off */
static const char claim_sql[] =
	/* (hp, hr, hi): where the parallel scan of a queue starts, past
	 * the index entries this worker's last claims left behind; NULL is
	 * the head (see queue_claim_req).  run_at travels as microseconds
	 * since the epoch: exact, and never a time the host could have
	 * written (the fault suite's clock scenario checks for those).  ha:
	 * whether to read ahead; tn: whether this claim takes its turn, and
	 * so says where it stopped.  $16: whether it asks for its queues'
	 * sweep tickets. */
	"with qa(name, lim, mode, hp, hr, hi, ha, cp, cr, tn, qi) as ("
	"  select * from unnest($2::text[], $3::int[], $6::text[],"
	"   $7::smallint[], $8::bigint[], $9::bigint[], $11::bool[],"
	"   $12::smallint[], $13::bigint[], $14::bool[]) with ordinality),"
	/* The sweep tickets granted: of each queue asked for whose last
	 * sweep by a worker of these kinds is $17 ms old or older, now
	 * (sql/upgrade/029_sweep_tickets.sql).  This claim reads it from its head,
	 * the sweep, and says so ('s' rows).  CASEs: the sequence is set
	 * only where the test holds; a CTE of its own, run once.  A role
	 * not granted the sequence (an upgrade whose grants were not run
	 * again, docs/security.md) sweeps whenever it asks, as every
	 * worker did before version 29, rather than fail its claim. */
	" tk as (select qa.qi, case when not $16::bool then false"
	"   when not has_sequence_privilege(" SWEEP_SEQ("qa.name") ","
	"    'select, update') then true"
	"   else case when coalesce(pg_sequence_last_value("
	"     " SWEEP_SEQ("qa.name") "), 0)"
	"    <= (extract(epoch from statement_timestamp()) * 1000)::bigint"
	"     - $17::bigint"
	"   then setval(" SWEEP_SEQ("qa.name") ","
	"    (extract(epoch from statement_timestamp()) * 1000)::bigint)"
	"    is not null else false end end as swept from qa),"
	/* A queue with a row in pgjob.limits is claimed by
	 * pgjob.claim_limited() alone, whatever the worker believes: this
	 * claim leaves it, and says so ('l' rows). */
	" ql as (select qa.*, tk.swept, exists (select 1 from pgjob.limits l"
	"   where l.queue = qa.name) as limited,"
	/* Where the last claim in its turn stopped: read here, once, and
	 * a value the lookup below can use (the function is volatile). */
	"  case when qa.ha and not tk.swept then array["
	"   pg_sequence_last_value(" STOP_SEQ("qa.name", "0") "),"
	"   pg_sequence_last_value(" STOP_SEQ("qa.name", "1") ")]"
	"  end as hs from qa join tk on tk.qi = qa.qi),"
	/* With ha, the scan starts past the job where the last claim in
	 * its turn stopped (its queue's sequences, STOP_SEQ), if that job
	 * is still that claim's (its lease taken within STOP_FRESH_MS), further
	 * on than the position, its claimer handles every kind this worker
	 * does, and it sorts before (cp, cr): see the comment above
	 * claim_sql.  One lookup by id; not by j.state = 'running', which
	 * would let the planner read the queue's running jobs from
	 * jobs_running_idx instead. */
	" q as (select ql.name, ql.lim, ql.mode,"
	"   case when not ql.swept then coalesce(h.m[1]::smallint, ql.hp)"
	"    end as hp,"
	"   case when not ql.swept then coalesce(h.m[2], ql.hr) end as hr,"
	"   case when not ql.swept then coalesce(h.m[3], ql.hi) end as hi,"
	"   ql.tn, ql.qi, ql.swept,"
	/* The claim's snapshot, and its xmax as a number: the epoch an
	 * xid of a row's xmax is in (see the comment above claim_sql). */
	"   pg_current_snapshot() as sn,"
	"   pg_snapshot_xmax(pg_current_snapshot())::text::bigint as sx"
	"  from ql left join lateral ("
	/* Of the two lanes' stops that hold, the further: the greatest
	 * position, as an array (an aggregate, where an order by would
	 * sort the rows it reads). */
	"   select max(array[h.priority::bigint, h.us, h.id]) as m from ("
	"    select j.priority, j.id, j.locked_by,"
	"     (extract(epoch from j.run_at) * 1000000)::bigint as us"
	"    from pgjob.jobs j where j.id = any(ql.hs)"
	"     and coalesce(j.state, '') = 'running'"
	"     and j.queue = ql.name"
	"     and j.locked_until > statement_timestamp()"
	"      + ($5::bigint - " STOP_FRESH_MS ") * interval '1 millisecond') h"
	"   where (h.priority, h.us, h.id) > (ql.hp, ql.hr, ql.hi)"
	"    and (ql.cp is null or (h.priority, h.us) < (ql.cp, ql.cr))"
	/* Equal kinds first: "@>" compares every kind with every other
	 * (10,000 kinds: 10^8 comparisons), and instances of one config
	 * publish the same array (src/db/session.c). */
	"    and exists (select 1 from pgjob.workers wk"
	"     where wk.slot = substring(h.locked_by from ':([0-9]+)$')::int"
	"      and (wk.kinds = $1::text[] or wk.kinds @> $1::text[]))) h"
	"   on true"
	"  where not ql.limited),"
	/* Per candidate: its branch, its queue's ordinal, and for the
	 * parallel branch its (priority, run_at), where the next claim
	 * starts from.  Narrow and fixed-width: the last one of each queue
	 * is found without deforming wide rows or comparing text. */
	" cand as ("
	"  select c.id, c.t, c.b, q.qi, c.pr, c.ra from q cross join lateral ("
	"   select a.id, a.ctid as t, 'a' as b, a.priority as pr,"
	"    a.run_at as ra from ("
	"     select j.id, j.ctid, j.priority, j.run_at from pgjob.jobs j"
	"     where q.mode = 'parallel' and j.finished_at is null"
	"       and coalesce(j.parents_left, 0) = 0"
	"       and (j.state = 'available' or j.locked_until < now())"
	"       and j.queue = q.name and j.run_at <= now()"
	"       and " KIND_SERVED("j.kind")
	/* A bound the index scan starts from, not a filter: always true
	 * without a position. */
	"       and (j.priority, j.run_at, j.id) > ("
	"        coalesce(q.hp, (-32768)::smallint),"
	"        coalesce(timestamptz 'epoch'"
	"         + q.hr * interval '1 microsecond', '-infinity'),"
	"        coalesce(q.hi, (-9223372036854775807)::bigint))"
	/* Except in the sweep, a row that a transaction the snapshot may
	 * not see as done locked or updated is left (see the comment above
	 * claim_sql). */
	"       and (q.swept or j.xmax = '0'::xid"
	"        or j.xmax = j.xmin or pg_visible_in_snapshot((q.sx"
	"         - ((q.sx - j.xmax::text::bigint) & 4294967295))::text::xid8,"
	"         q.sn))"
	"     order by j.priority, j.run_at, j.id"
	"     limit q.lim for update skip locked) a";

/* The serial branch, in the claim of a worker that serves a serial queue.
 * "lease_token is not null", true of every row, is the predicate of the
 * serial head's index that nothing in the parallel branch implies: so the
 * parallel branch cannot read its queue along that index and sort it
 * (sql/upgrade/021_serial_head_index.sql). */
static const char claim_serial_sql[] =
	"   union all"
	"   select s.id, s.ctid, 's', null, null from ("
	"     select j.id, j.ctid from pgjob.jobs j"
	"     where q.mode = 'serial' and j.id = (select min(h.id)"
	"       from pgjob.jobs h where h.queue = q.name"
	"        and h.finished_at is null and coalesce(h.parents_left, 0) = 0"
	"        and h.created_at is not null)"
	"       and (j.state = 'available' or j.locked_until < now())"
	"       and j.run_at <= now() and " KIND_SERVED("j.kind")
	"     for update skip locked) s";

/* The per_key branch, likewise: a job whose key has an older unfinished
 * job waits for it. */
static const char claim_per_key_sql[] =
	"   union all"
	"   select k.id, k.ctid, 'k', null, null from ("
	"     select j.id, j.ctid from pgjob.jobs j"
	"     where q.mode = 'per_key' and j.finished_at is null"
	"       and coalesce(j.parents_left, 0) = 0"
	"       and (j.state = 'available' or j.locked_until < now())"
	"       and j.queue = q.name and j.run_at <= now()"
	"       and " KIND_SERVED("j.kind")
	"       and (j.ordering_key is null or not exists ("
	"        select 1 from pgjob.jobs o where o.queue = q.name"
	"         and o.ordering_key = j.ordering_key and o.id < j.id"
	"         and o.finished_at is null"
	"         and coalesce(o.parents_left, 0) = 0))"
	"     order by j.priority, j.run_at, j.id"
	"     limit q.lim for update skip locked) k";

static const char claim_tail_sql[] =
	"   limit q.lim) c),"
	" u as ("
	"  update pgjob.jobs j set state = 'running', locked_by = $4,"
	"   locked_until = statement_timestamp()"
	"    + $5::bigint * interval '1 millisecond',"
	"   lease_token = j.lease_token + 1, attempts = j.attempts + 1,"
	"   attempted_at = now(),"
	/* A running row here is one whose lease expired: its worker
	 * vanished, and that attempt is lost, not failed. */
	"   lost_attempts = j.lost_attempts"
	"    + case when j.state = 'running' then 1 else 0 end"
	/* An array, so that the planner reads the rows by their TIDs
	 * rather than joining the whole table.  By TID, not by id: cand
	 * locked each row, so the version it read is the one to update
	 * (a version another claim updated since the snapshot is followed
	 * to the newest, which the lock holds, as by id), and a TID costs
	 * no descent of jobs_pkey: fewer buffers read, less time on the
	 * server per job. */
	"  where j.ctid = any(array(select t from cand))"
	/* The payload as text, once: its length decides below whether it
	 * is sent at all. */
	"  returning j.id, j.kind, j.queue, j.payload::text as payload,"
	"   j.attempts, coalesce(j.max_attempts, 0) as max_attempts,"
	"   j.lease_token, j.ordering_key, j.lost_attempts, j.run_at,"
	"   j.traceparent, j.created_at, j.children)"
	/* A payload over $10 bytes never reaches the worker's memory: it
	 * gets the size, and the job ends dead (see start_job()). */
	" select 'c', id, kind, queue,"
	"  case when octet_length(payload) <= $10 then payload end,"
	"  attempts, max_attempts, lease_token, ordering_key,"
	/* A job with children: its end claims right behind it (struct job's
	 * parent). */
	"  case when children then 1::smallint end, null::bigint,"
	"  lost_attempts, octet_length(payload),"
	/* Its time in the queue (/metrics), in ms. */
	"  (date_part('epoch', now() - run_at) * 1000)::bigint,"
	/* Its W3C trace context (docs/tracing.md), and for a job in a
	 * trace the spans' times before the attempt, in us before now():
	 * its enqueue, and the start of its wait (its enqueue or run_at,
	 * whichever is later).  Nothing for a job without one. */
	"  traceparent,"
	"  case when traceparent is not null then"
	"   (date_part('epoch', now() - created_at) * 1000000)::bigint end,"
	"  case when traceparent is not null then (date_part('epoch', now()"
	"   - greatest(created_at, run_at)) * 1000000)::bigint end"
	" from u"
	" union all"
	/* Per queue, the last job its parallel branch claimed: of all the
	 * candidates in one sort, not by a search of them per queue, which
	 * costs queues x jobs claimed (a worker of a thousand queues). */
	" select 'p', l.id, null, q.name, null, null, null, null, null, l.pr,"
	"  (extract(epoch from l.ra) * 1000000)::bigint, null, null, null,"
	"  null, null, null"
	" from (select distinct on (cand.qi) cand.qi, cand.id, cand.pr,"
	"   cand.ra from cand where cand.b = 'a'"
	"   order by cand.qi, cand.pr desc, cand.ra desc, cand.id desc) l"
	"  join q on q.qi = l.qi"
	/* A claim in its turn says where it stopped, for the claims after
	 * it (ha).  An aggregate (of a column of its own level, or it would
	 * be the outer query's): one row, with the turn or without. */
	"  cross join lateral (select count(setval(o.s, o.id))"
	"   from (select " STOP_SEQ("q.name", "$15::int") " as s, l.id"
	"    where q.tn) o) n"
	" union all"
	" select 'l', null, null, ql.name, null, null, null, null, null, null,"
	"  null, null, null, null, null, null, null from ql where ql.limited"
	" union all"
	" select 's', null, null, ql.name, null, null, null, null, null, null,"
	"  null, null, null, null, null, null, null from ql where ql.swept";
/* clang-format on */

/*
 * Claims that read ahead take turns, per queue and lane: each takes, in
 * one implicit transaction with the claim, a transaction lock per queue
 * it reads ahead in, keyed by the queue's hash and the claimer's lane
 * (its slot's parity: TURN_LANES in src/worker/claim.c), in the order of the
 * keys, so that two claims that share queues never wait for each other
 * crosswise (two queues whose keys meet share turns, which costs only the
 * wait).  The claim's snapshot is taken after the lock is granted: it
 * sees the claim of its lane before it committed, and neither locks nor
 * reads that claim's rows.  It starts past the newest job of the last
 * claim that committed in either lane (ha in claim_sql), and passes the
 * rows that the other lane's claim in progress has locked.
 *
 * Many claimers each reading from their own position read many index
 * entries and heap rows for every job they take, each past the others'.
 * In turns they read few, but a claim waits for its turn, and in one lane
 * the claims' time in a row bounds the rate; in two lanes two claims are
 * in flight at once (docs/performance.md, "Claims in turns").
 */
/*
 * The advisory-lock class of the turns: "pgjc" in ASCII, beside the
 * slots' (config lock_class, CONFIG_DEFAULT_LOCK_CLASS "pgjb" by default)
 * and the migrations' (MIGRATE_LOCK_CLASS, "pgmg"), which it must not be.
 * In decimal, as the statement's text needs it.
 */
#define TURN_LOCK_CLASS 1885825635
_Static_assert(TURN_LOCK_CLASS == 0x70676a63, "\"pgjc\"");
#define TURN_STR_(x) #x
#define TURN_STR(x)  TURN_STR_(x)
#define TURN_SQL                                                               \
	"select count(pg_advisory_xact_lock(" TURN_STR(                        \
		TURN_LOCK_CLASS) ", k)),"                                      \
				 " (extract(epoch from clock_timestamp() - "   \
				 "statement_timestamp())"                      \
				 "  * 1000)::int from (select distinct "       \
				 "hashtext(x) # $2::int as k"                  \
				 "  from unnest($1::text[]) x order by 1) s"

static void
on_claim_group(void *arg, PGresult **res, int n)
{
	struct db_call *c = arg;
	int turned = res[1] && PQresultStatus(res[0]) == PGRES_TUPLES_OK &&
		     PQntuples(res[0]) == 1;
	PGresult *r = turned ? res[1] : res[0];
	char *text;
	struct db_status st = db_status_of(r, &text);
	queue_claimed_read_turn(
		c, &st, r,
		turned ? (int)strtol(PQgetvalue(res[0], 0, 1), NULL, 10) : -1);
	free(text);
	for (size_t i = 0; c->names && i < c->n; i++)
		free(c->names[i]);
	free(c->names);
	free(c);
}

int
queue_claim(struct dbev *d, const struct queue_claim_req *req,
	    queue_claim_fn *cb, void *arg)
{
	size_t nq = req->nqueues;
	int64_t *lim = xcalloc(nq + 1, sizeof(int64_t));
	const char **fp = xcalloc(nq + 1, sizeof(char *));
	const char **fr = xcalloc(nq + 1, sizeof(char *));
	const char **fi = xcalloc(nq + 1, sizeof(char *));
	const char **ha = xcalloc(nq + 1, sizeof(char *));
	const char **tn = xcalloc(nq + 1, sizeof(char *));
	const char **cp = xcalloc(nq + 1, sizeof(char *));
	const char **cr = xcalloc(nq + 1, sizeof(char *));
	for (size_t i = 0; i < nq; i++) {
		lim[i] = req->limits[i];
		/* No position: NULL, from the head. */
		const struct queue_position *p =
			req->from ? req->from[i] : NULL;
		fp[i] = p ? p->priority : NULL;
		fr[i] = p ? p->run_at : NULL;
		fi[i] = p ? p->id : NULL;
		tn[i] = req->turn && req->turn[i] ? "t" : "f";
		ha[i] = req->turn && req->turn[i] && req->ahead && req->ahead[i]
				? "t"
				: "f";
		const struct queue_position *u =
			req->until ? req->until[i] : NULL;
		cp[i] = u ? u->priority : NULL;
		cr[i] = u ? u->run_at : NULL;
	}
	char *a[CLAIM_NPARAMS];
	a[0] = db_text_array(req->kinds, req->nkinds);
	a[1] = db_text_array(req->queues, nq);
	a[2] = db_int_array(lim, nq);
	a[3] = xstrdup(req->locked_by);
	a[4] = xasprintf("%lld", (long long)req->lease_ms);
	a[5] = db_text_array(req->modes, nq);
	a[6] = db_text_array(fp, nq);
	a[7] = db_text_array(fr, nq);
	a[8] = db_text_array(fi, nq);
	a[9] = xasprintf("%lld", (long long)req->max_payload_bytes);
	a[10] = db_text_array(ha, nq);
	a[11] = db_text_array(cp, nq);
	a[12] = db_text_array(cr, nq);
	a[13] = db_text_array(tn, nq);
	a[14] = xasprintf("%d", req->lane);
	a[15] = xstrdup(req->sweep_ask ? "t" : "f");
	a[16] = xasprintf("%lld", (long long)req->sweep_every_ms);
	free(lim);
	free(fp);
	free(fr);
	free(fi);
	free(ha);
	free(tn);
	free(cp);
	free(cr);
	const char *p[CLAIM_NPARAMS];
	for (int i = 0; i < CLAIM_NPARAMS; i++)
		p[i] = a[i];
	struct db_call call = DB_CALL(cb, arg);
	call.n = nq;
	call.names = xcalloc(nq + 1, sizeof(char *));
	for (size_t k = 0; k < nq; k++)
		call.names[k] = xstrdup(req->queues[k]);
	if (req->timeout_ms > 0)
		dbev_time_limit(d, req->timeout_ms);
	dbev_failpoints(d, FP_CLAIM_SEND, FP_CLAIM_RESULT);
	/* The queues that take turns (see TURN_SQL). */
	const char **tq = xcalloc(nq + 1, sizeof(char *));
	size_t nt = 0;
	for (size_t i = 0; req->turn && i < nq; i++)
		if (req->turn[i])
			tq[nt++] = req->queues[i];
	int rc;
	if (nt == 0) {
		rc = dbev_call(d, "pgjob_claim", 1, CLAIM_NPARAMS, p,
			       queue_claimed_read, &call);
	} else {
		char *turns = db_text_array(tq, nt);
		char lane[16];
		snprintf(lane, sizeof(lane), "%d", req->lane);
		const char *tp[] = {turns, lane};
		struct db_call *gc = xmalloc(sizeof(*gc));
		*gc = call;
		struct dbev_stmt st[2] = {
			{.sql = TURN_SQL, .nparams = 2, .params = tp},
			{.name = "pgjob_claim",
			 .nparams = CLAIM_NPARAMS,
			 .params = p},
		};
		rc = dbev_send_group(d, st, 2, on_claim_group, gc);
		free(turns);
	}
	free(tq);
	if (req->timeout_ms > 0)
		dbev_time_limit_end(d);
	for (int i = 0; i < CLAIM_NPARAMS; i++)
		free(a[i]);
	return rc;
}

char *
queue_claim_sql(int serial, int per_key, int *nparams)
{
	*nparams = CLAIM_NPARAMS;
	return xasprintf("%s%s%s%s", claim_sql, serial ? claim_serial_sql : "",
			 per_key ? claim_per_key_sql : "", claim_tail_sql);
}
