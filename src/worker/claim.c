/*
 * claim: when a worker claims, from where in each queue, and what it makes
 * of what came back: each job taken goes to held.c, which holds it to the
 * end written.
 *
 * A worker claims when it may find work: at the poll timer, at a NOTIFY
 * that is its to take, after a batch came back full, and after an end
 * that freed a place where more may wait (claim_after_end() in held.c).
 * The loop's turn (worker.c) sends the claims after the ends.  A claim asks
 * every queue the worker serves for up to its free places.  A parallel
 * queue is read from past the last job it gave this worker (its position),
 * so that a snapshot held open elsewhere, whose dead index entries cannot
 * be cleaned, does not make every claim read them all from the head (a
 * read that grows for as long as the snapshot is held).  A queue is read
 * from further back when a NOTIFY says a new job sorts before its position
 * (notify.c), and every queue from its
 * head, with the search for expired leases, by the sweep: at most once a
 * second (from_positions()).
 */
#include "worker/internal.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/backoff.h"
#include "common/config.h"
#include "common/failpoint.h"
#include "common/stats.h"
#include "common/util.h"
#include "db/db.h"
#include "db/dbev.h"
#include "db/sqlstate.h"

/*
 * The first time a claim finds nothing and the worker holds nothing, the
 * heap's free memory goes back to the system: a batch of a thousand jobs
 * leaves a high-water mark that would otherwise stay in the worker's RSS
 * for as long as it rests.
 */
static void
trim_when_idle(struct worker *w, int claimed)
{
	if (claimed > 0 || w->nheld > 0) {
		w->trimmed = 0;
		return;
	}
	if (w->trimmed)
		return;
	w->trimmed = 1;
#ifdef __GLIBC__
	malloc_trim(0);
#endif
}

/* A claim in flight: when it was sent and what it asked of each queue (its
 * index in cfg->queues and its limit), in the order of the request;
 * limited: a claim of one limited queue (pgjob.claim_limited()); head:
 * it asked for its queues' sweep tickets, and sweeps those it is granted
 * (from_positions()). */
struct claim {
	struct worker *w;
	int64_t sent_ms;
	size_t nq;
	size_t *qidx;
	int *limits;
	int *turn; /* per queue: it took its turn (queue_claim_req's turn) */
	int limited;
	int head;
	int64_t limit_ms; /* a sweep's time limit (sweep_limit_ms()) */
};

static struct claim *
claim_alloc(struct worker *w, size_t n)
{
	struct claim *c = xcalloc(1, sizeof(*c));
	c->w = w;
	c->qidx = xcalloc(n + 1, sizeof(size_t));
	c->limits = xcalloc(n + 1, sizeof(int));
	c->turn = xcalloc(n + 1, sizeof(int));
	return c;
}

static void
claim_free(struct claim *c)
{
	free(c->qidx);
	free(c->limits);
	free(c->turn);
	free(c);
}

/* The jobs of queue i this worker may still start. */
static int
room(const struct worker *w, size_t i)
{
	return w->cfg->queues[i].concurrency - w->wq[i].running;
}

/*
 * A turn that waited this long or longer (queue_claimed's turn_wait_ms)
 * says that another claimer shares this worker's lane in the queue: its
 * next claims read ahead (crowded).  A turn alone in its lane costs no
 * wait, and reading ahead then saves little.  But it has a cost where a
 * snapshot is held open: with no job running (each worker claims after
 * its batch ended), the start is looked for through every lease of the
 * last STOP_FRESH_MS (src/db/claim.c), and such claims can fall behind
 * their feed (docs/performance.md, "Claims in turns").
 */
#define TURN_CROWDED_MS 2

/*
 * After a claim, per queue asked: whether its batch came back full (more
 * due jobs may wait), and where its next claim reads from: past the last
 * job it took.  A claim that took none leaves the position where it was:
 * every due job past it was taken (or locked by another claimer, who
 * takes it), so no job that was there is behind it; a job that comes
 * later behind it is the NOTIFY's business (notify.c) or the
 * head scan's.  Returns 1 when any batch was full.
 */
static int
remember(struct worker *w, const struct claim *c, const struct queue_claimed *r,
	 const int *got)
{
	int any = 0;
	for (size_t k = 0; k < c->nq; k++) {
		size_t i = c->qidx[k];
		int full = got[k] >= c->limits[k];
		w->wq[i].more = full;
		if (c->turn[k] && r->turn_wait_ms >= 0)
			w->wq[i].crowded = r->turn_wait_ms >= TURN_CROWDED_MS;
		if (r->has_pos[k]) {
			w->wq[i].pos = r->pos[k];
			w->wq[i].pos_valid = 1;
			/* A NOTIFY that came while the claim was on its way
			 * (until: it sorted past the old position) may be of
			 * a job the claim did not see and read past. */
			if (w->wq[i].until.known &&
			    notify_key_cmp(&w->wq[i].until, &w->wq[i].pos) <= 0)
				notify_rescan_from(w, i, &w->wq[i].until);
		}
		if (c->limited)
			w->wq[i].want |= full;
		else
			any |= full;
	}
	return any;
}

/* A sweep's time limit: see SWEEP_TIMEOUT_MS. */
static int64_t
sweep_limit_ms(const struct worker *w)
{
	int64_t ms = SWEEP_TIMEOUT_CLAIMS * w->claim_avg_us / 1000;
	return ms < SWEEP_TIMEOUT_MS	   ? SWEEP_TIMEOUT_MS
	       : ms > SWEEP_TIMEOUT_MAX_MS ? SWEEP_TIMEOUT_MAX_MS
					   : ms;
}

/*
 * A sweep ran out of its time limit: dead index entries that vacuum may
 * not remove yet, because a snapshot is held open elsewhere, are in its
 * way (it reads the entry of every job claimed since).  It claimed
 * nothing; the next comes 50 limits later, and the worker claims from its
 * positions meanwhile.  Jobs whose worker died, or that sort behind every
 * position without a NOTIFY saying so, wait for the snapshot to end.
 *
 * One stop is not evidence of a snapshot: a machine that turns busy at
 * once (200 workers on 2 cores taking a burst of jobs, the fault suite's
 * workers200) slows a sweep's statement before the mean of the claims it
 * is measured against has caught up, and the entries of the jobs done
 * since autovacuum last ran are in its way too.  So the first stop is an
 * info line; the second in a row (the snapshot still there 50 limits
 * later, its dead entries only more) is the warning, every ten minutes at
 * most (the health duty names the session that holds the snapshot).
 */
static void
sweep_timed_out(struct worker *w, int64_t limit_ms)
{
	int64_t now = util_now_ms();
	w->head_cost_ms = limit_ms; /* backoff_limited_cost() of a stop */
	w->want_claim = 1;
	switch (backoff_stop_say(++w->sweep_stops, w->sweep_warned_ms, now)) {
	case BACKOFF_SAY_NOTHING:
		return;
	case BACKOFF_SAY_INFO:
		log_info("the sweep for expired leases and passed-over jobs "
			 "took over %lld ms (%d times this worker's usual "
			 "claim) and was stopped; the next is in %lld s, and "
			 "a second stop in a row is warned of (a snapshot "
			 "held open elsewhere)",
			 (long long)limit_ms, SWEEP_TIMEOUT_CLAIMS,
			 (long long)(50 * limit_ms / 1000));
		return;
	case BACKOFF_SAY_WARN:
		break;
	}
	w->sweep_warned_ms = now;
	log_warnx("the sweep for expired leases and passed-over jobs took over "
		  "%lld ms (%d times this worker's usual claim) and was "
		  "stopped, %d times in a row: a snapshot held open elsewhere "
		  "keeps every claimed job's index entries (see the xmin "
		  "horizon warning); until it ends, the jobs of a worker that "
		  "died are not taken over",
		  (long long)limit_ms, SWEEP_TIMEOUT_CLAIMS, w->sweep_stops);
}

static void
on_claim(void *arg, const struct db_status *st, struct queue_claimed *r)
{
	struct claim *c = arg;
	struct worker *w = c->w;

	cycle_done(w);
	if (c->head && sqlstate_is(st->sqlstate, SQLSTATE_QUERY_CANCELED)) {
		sweep_timed_out(w, c->limit_ms);
		goto out;
	}
	if (!st->answered || !conn_ok(w, st, "claim"))
		goto out;
	if (r->njobs > 0 && FAILPOINT(FP_STOP_IN_CLAIM))
		worker_stop_now(w, "failpoint stop_in_claim");
	/* Sent before the worker began to retire, drain or stop: its jobs
	 * are none of this worker's to start (held_give_back()).  A stop
	 * when the supervisor is gone, at start-up with this claim in
	 * flight, used to start them after held_stop_all() and exit before
	 * their ends were written: they ran again when their leases expired,
	 * with nothing said (the fault suite's kill -9 of supervisors). */
	if (w->draining && r->njobs > 0 && w->db) {
		held_give_back(w, r);
		goto out;
	}
	int64_t took = util_now_ms() - c->sent_ms;
	stats_observe(w->st->claim, &w->st->claim_count, &w->st->claim_sum_us,
		      took * 1000);
	/* The sweep's limit and cost come from the claims' answer times, not
	 * their round trips: a claim that waited in the pipeline behind a
	 * slow statement (the queue depths' read under a held snapshot) would
	 * pull the mean of round trips up by an eighth of that, and with it
	 * the next sweep's limit, 20 of them. */
	int64_t own = w->db ? dbev_answer_ms(w->db) : took;
	/* A sweep's answer longer than its time limit was the network's,
	 * not the server's (the fault suite's freeze of the network): its
	 * last cost stands. */
	int64_t cost = backoff_limited_cost(own, c->limit_ms, 0);
	/* It asked for its queues' sweep tickets: a sweep if granted one,
	 * else a claim like the others. */
	int swept = 0;
	for (size_t k = 0; c->head && k < c->nq; k++)
		swept |= r->ticket[k];
	if (swept)
		w->sweep_stops = 0;
	/* A connection's first claim also built the prepared statement's
	 * generic plan (built at its first run): its round trip says nothing
	 * of the next ones', and taken as a sweep's cost it would put the
	 * next sweep 50 of them away, tens of seconds on a slow host. */
	if (!w->claim_planned)
		w->claim_planned = 1;
	else if (swept && cost >= 0)
		w->head_cost_ms = cost;
	else if (!swept)
		w->claim_avg_us += (own * 1000 - w->claim_avg_us) / 8;
	int *got = xcalloc(c->nq + 1, sizeof(int));
	for (int i = 0; i < r->njobs; i++)
		if (r->queue_of[i] >= 0)
			got[r->queue_of[i]]++;
	/* What the answer says of each queue, before any job starts: a job
	 * can end within held_start() (a plugin), and whether its end
	 * claims again depends on it (claim_after_end()).  A full batch
	 * came: more may be waiting. */
	if (remember(w, c, r, got))
		w->want_claim = 1;
	for (size_t k = 0; k < c->nq; k++)
		flow_said(w, c->qidx[k], &r->flow[k]);
	for (int i = 0; i < r->njobs; i++) {
		int k = r->queue_of[i];
		/* Every claimed job is of a queue the claim asked for. */
		size_t q = k >= 0 ? c->qidx[k]
				  : worker_handler(w, r->jobs[i]->kind)
					    ->queue_index;
		held_start(w, r->jobs[i], q, c->sent_ms);
	}
	/* An sql handler's job starts when the connection is free: once
	 * for the batch, not per job, for it walks every job held (a batch
	 * of thousands would cost their square). */
	sqlhandler_next(w);
	free(got);
	trim_when_idle(w, r->njobs);
out:
	claim_free(c);
}

/* The smallest claim that takes its turn (queue_claim_req's turn). */
#define TURN_MIN 16
/*
 * Claims of a queue take turns in this many lanes, a worker's lane by its
 * slot (queue_claim_req's lane): two claims in flight at once, one
 * committing or on its way back while the other works.  With one lane
 * the claims' time in a row bounds the rate (TURN_SQL in src/db/claim.c).
 * Each lane has its sequence of a queue's pair of claim_stop sequences in
 * sql/ (STOP_SEQ in src/db/claim.c): two lanes, two a pair.
 */
#define TURN_LANES 2

/*
 * Where each queue of a claim is read from: past the worker's position in
 * it; from where a NOTIFY said new jobs sort before it (notify.c); or
 * from its head (no position yet, or a NOTIFY without a key).  And, about
 * once a second per queue in the whole cluster, from its head by the
 * claim that is granted its sweep ticket (the sweep), which also takes
 * jobs whose lease expired: a job can come to sort behind a position
 * without a NOTIFY that says so (another claimer gave it back, or a lock
 * left its xmax: see claim_sql in src/db/claim.c).  That bounds how long
 * such a job is passed over.
 *
 * The ticket: once a second, a worker's claim asks for the tickets of its
 * queues (c->head, sweep_every_ms()), and the server grants those that no
 * worker of the same kinds swept within that time, and reads them from
 * their head (the sweep_at sequences in sql/).  Were every worker to sweep
 * every second, there would be as many sweeps a second as workers, each
 * past every running job, and each locking the rows claimed since its
 * snapshot that it met, so that their ends wait for its commit
 * (docs/performance.md, "One sweep a second").
 *
 * Under a snapshot held open elsewhere, the sweep reads every dead index
 * entry the snapshot keeps, and its cost grows with them: a worker asks
 * no sooner than 50 of its last sweep's round trips after it asked last,
 * and the ticket is granted no sooner than that after the last sweep, so
 * sweeps take about 2 % of a worker's time at most; a claim that asks is
 * stopped after the sweep's time limit (sweep_limit_ms(),
 * sweep_timed_out()); such jobs wait longer instead (docs/performance.md,
 * "An old snapshot").
 *
 * A claim from the position takes its turn in the queue, and reads ahead
 * past the last claim's jobs (queue_claim_req's ahead), but not as far as
 * a job a NOTIFY since the last claim said came (until, notify.c).
 * A claim that asks for a ticket takes its turn too, and reads from its
 * head those it is granted.
 */
/* How long after its last ask a worker asks for its sweep tickets again,
 * and how old the last sweep of a queue must be for a ticket: a second, or
 * 50 of this worker's last sweep's round trips (see from_positions()). */
static int64_t
sweep_every_ms(const struct worker *w)
{
	int64_t every = 50 * w->head_cost_ms;
	return every < 1000 ? 1000 : every;
}

static void
from_positions(struct worker *w, struct claim *c,
	       const struct queue_position **from, bool *turn, bool *ahead,
	       const struct queue_position **until,
	       struct queue_position *until_pos)
{
	int64_t now = util_now_ms();
	c->head = c->nq && now - w->head_scan_ms >= sweep_every_ms(w);
	if (c->head)
		w->head_scan_ms = now;
	for (size_t k = 0; k < c->nq; k++) {
		size_t i = c->qidx[k];
		if (!w->wq[i].pos_valid || w->wq[i].rescan == RESCAN_HEAD)
			from[k] = NULL;
		else if (w->wq[i].rescan == RESCAN_FROM)
			from[k] = &w->wq[i].rescan_from;
		else
			from[k] = &w->wq[i].pos;
		/* A turn for a claim from the position, in a parallel queue,
		 * of TURN_MIN jobs or more: a small claim reads little past
		 * others' rows, and would wait for a large one's turn.  Ahead
		 * when the last turn showed another claimer in the lane. */
		turn[k] = from[k] == &w->wq[i].pos &&
			  w->cfg->queues[i].mode == QUEUE_PARALLEL &&
			  c->limits[k] >= TURN_MIN;
		ahead[k] = turn[k] && w->wq[i].crowded;
		c->turn[k] = turn[k];
		until[k] = w->wq[i].until.known
				   ? notify_key_position(&w->wq[i].until,
							 &until_pos[k])
				   : NULL;
		w->wq[i].rescan = RESCAN_NONE;
		w->wq[i].until.known = 0;
	}
}

/* A claim of every queue this worker serves with a free place and no
 * limits, or NULL. */
static struct claim *
claim_new(struct worker *w)
{
	const struct config *cf = w->cfg;
	struct claim *c = claim_alloc(w, cf->nqueues);
	for (size_t i = 0; i < cf->nqueues; i++) {
		if (!w->wq[i].serves || w->wq[i].limited || room(w, i) <= 0)
			continue;
		c->qidx[c->nq] = i;
		c->limits[c->nq++] = room(w, i);
	}
	if (c->nq)
		return c;
	claim_free(c);
	return NULL;
}

/* Claims limited queue i, in a statement of its own. */
static void
send_limited(struct worker *w, size_t i)
{
	const struct queue_conf *q = &w->cfg->queues[i];
	struct claim *c = claim_alloc(w, 1);
	c->limited = 1;
	c->nq = 1;
	c->qidx[0] = i;
	c->limits[0] = room(w, i);
	struct queue_limited_req req = {
		.queue = q->name,
		.want = c->limits[0],
		.kinds = w->kinds,
		.nkinds = w->nkinds,
		.mode = config_queue_mode_name(q->mode),
		.locked_by = w->locked_by,
		.lease_ms = w->cfg->lease_ms,
		.max_payload_bytes = w->cfg->max_payload_bytes,
	};
	c->sent_ms = util_now_ms();
	w->cycle_inflight++;
	queue_claim_limited(w->db, &req, on_claim, c);
}

/* Claims the limited queues that want it (all: every one), each with room
 * and not held back. */
static void
send_limited_claims(struct worker *w, int all)
{
	int64_t now = util_now_ms();
	for (size_t i = 0; i < w->cfg->nqueues; i++) {
		if (!w->wq[i].serves || !w->wq[i].limited ||
		    !(all || w->wq[i].want))
			continue;
		w->wq[i].want = 0;
		if (room(w, i) > 0 && w->wq[i].hold_until <= now)
			send_limited(w, i);
	}
}

static void
send_claim(struct worker *w, struct claim *c)
{
	const struct config *cf = w->cfg;
	const char *queues[c->nq + 1], *modes[c->nq + 1];
	const struct queue_position *from[c->nq + 1], *until[c->nq + 1];
	struct queue_position until_pos[c->nq + 1];
	bool turn[c->nq + 1], ahead[c->nq + 1];
	for (size_t k = 0; k < c->nq; k++) {
		const struct queue_conf *q = &cf->queues[c->qidx[k]];
		queues[k] = q->name;
		modes[k] = config_queue_mode_name(q->mode);
	}
	from_positions(w, c, from, turn, ahead, until, until_pos);
	c->limit_ms = c->head ? sweep_limit_ms(w) : 0;
	struct queue_claim_req req = {
		.kinds = w->kinds,
		.nkinds = w->nkinds,
		.queues = queues,
		.limits = c->limits,
		.modes = modes,
		.nqueues = c->nq,
		.locked_by = w->locked_by,
		.lease_ms = cf->lease_ms,
		.from = from,
		.turn = turn,
		.ahead = ahead,
		.lane = w->slot % TURN_LANES,
		.until = until,
		.sweep_ask = c->head,
		.sweep_every_ms = sweep_every_ms(w),
		.timeout_ms = c->limit_ms,
		.max_payload_bytes = cf->max_payload_bytes,
	};
	c->sent_ms = util_now_ms();
	w->cycle_inflight++;
	queue_claim(w->db, &req, on_claim, c);
}

long long
claim_send(struct worker *w, int all)
{
	struct claim *c = all ? claim_new(w) : NULL;
	long long room = 0;
	if (c) {
		/* Room in every queue it may serve (a queue left out, full
		 * here, could be a child's), for the jobs of any of them: the
		 * fewest places of one. */
		size_t plain = 0;
		for (size_t i = 0; i < w->cfg->nqueues; i++)
			plain += w->wq[i].serves && !w->wq[i].limited;
		for (size_t k = 0; c->nq == plain && k < c->nq; k++)
			if (room == 0 || c->limits[k] < room)
				room = c->limits[k];
		send_claim(w, c);
	}
	if (!w->draining)
		send_limited_claims(w, all);
	return room;
}
