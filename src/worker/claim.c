/*
 * claim: when a worker claims, from where in each queue, and what it makes
 * of what came back; and the turn of the loop that sends the ends its jobs
 * wait for in the same round trip.
 *
 * A worker claims when it may find work: at the poll timer, at a NOTIFY
 * that is its to take, after a batch came back full, and after an end
 * that freed a place where more may wait (claim_after_end()).  A claim asks
 * every queue the worker serves for up to its free places.  A parallel
 * queue is read from past the last job it gave this worker (its position),
 * so that a snapshot held open elsewhere, whose dead index entries cannot
 * be cleaned, does not make every claim read them all from the head:
 * with a feed of 8,700 jobs/s and a snapshot held, claims that read from
 * the head took 15 ms at the start and 65 ms fifty seconds later, and
 * growing.  A queue is read from further back when a NOTIFY says a new job
 * sorts before its position (claim_on_notify()), and every queue from its
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
#include "common/stats.h"
#include "common/util.h"
#include "db/db.h"
#include "db/dbev.h"

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

/* A batch of ends in flight: the jobs it carries. */
struct ends {
	struct worker *w;
	size_t n;
	struct held *held[];
};

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
	return w->cfg->queues[i].concurrency - w->running[i];
}

/* on_lost() zeroes the count, and the statements of the lost link still
 * report (lost) after it. */
static void
cycle_done(struct worker *w)
{
	if (w->cycle_inflight > 0)
		w->cycle_inflight--;
}

static void
on_ends(void *arg, const struct db_status *st, const int64_t *written, size_t n,
	const int64_t *capped, size_t ncapped)
{
	struct ends *e = arg;
	struct worker *w = e->w;
	char what[64];

	cycle_done(w);
	snprintf(what, sizeof(what), "writing %zu job ends", e->n);
	if (st->answered)
		conn_ok(w, st, what);
	held_written(w, e->held, e->n, st, written, n, capped, ncapped);
	free(e);
}

/*
 * A turn that waited this long or longer (queue_claimed's turn_wait_ms)
 * says that another claimer shares this worker's lane in the queue: its
 * next claims read ahead (w->crowded).  A turn alone in its lane costs no
 * wait, and reading ahead then saves little: two workers, one per lane,
 * read 2.7 claim-index entries per job without it.  But it has a cost
 * where a snapshot is held open: with no job running (each worker claims
 * after its batch ended), the start is looked for through every lease of
 * the last 200 ms (through 2 s of leases, a churn of two workers with a
 * snapshot held ran its claims at 21-30 ms and fell behind its feed:
 * docs/performance.md, "Claims in turns").
 */
#define TURN_CROWDED_MS 2

static int key_cmp(const struct stats_notify_key *key,
		   const struct queue_position *p);
static void rescan_from(struct worker *w, size_t i,
			const struct stats_notify_key *key);

/* The position just before every job of key's priority and run_at. */
static const struct queue_position *
key_position(const struct stats_notify_key *key, struct queue_position *p)
{
	snprintf(p->priority, sizeof(p->priority), "%d", key->priority);
	snprintf(p->run_at, sizeof(p->run_at), "%lld",
		 (long long)key->run_at_us);
	snprintf(p->id, sizeof(p->id), "%lld", -9223372036854775807LL);
	return p;
}

/*
 * After a claim, per queue asked: whether its batch came back full (more
 * due jobs may wait), and where its next claim reads from: past the last
 * job it took.  A claim that took none leaves the position where it was:
 * every due job past it was taken (or locked by another claimer, who
 * takes it), so no job that was there is behind it; a job that comes
 * later behind it is the NOTIFY's business (claim_on_notify()) or the
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
		w->more[i] = full;
		if (c->turn[k] && r->turn_wait_ms >= 0)
			w->crowded[i] = r->turn_wait_ms >= TURN_CROWDED_MS;
		if (r->has_pos[k]) {
			w->pos[i] = r->pos[k];
			w->pos_valid[i] = 1;
			/* A NOTIFY that came while the claim was on its way
			 * (until: it sorted past the old position) may be of
			 * a job the claim did not see and read past. */
			if (w->until[i].known &&
			    key_cmp(&w->until[i], &w->pos[i]) <= 0)
				rescan_from(w, i, &w->until[i]);
		}
		if (c->limited)
			w->want_q[i] |= full;
		else
			any |= full;
	}
	return any;
}

/* (Re)arms the flow timer for the first wake_at of any queue. */
static void
flow_rearm(struct worker *w)
{
	int64_t first = 0;
	for (size_t i = 0; i < w->cfg->nqueues; i++)
		if (w->wake_at[i] && (!first || w->wake_at[i] < first))
			first = w->wake_at[i];
	ev_timer_stop(w->loop, &w->flow);
	if (!first)
		return;
	int64_t in = first - util_now_ms();
	ev_timer_set(&w->flow, in > 0 ? (double)in / 1000. : 0., 0.);
	ev_timer_start(w->loop, &w->flow);
}

static void
wake_at(struct worker *w, size_t i, int64_t at)
{
	if (!w->wake_at[i] || at < w->wake_at[i]) {
		w->wake_at[i] = at;
		flow_rearm(w);
	}
}

void
claim_on_flow_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct worker *w = t->data;
	int64_t now = util_now_ms();
	for (size_t i = 0; i < w->cfg->nqueues; i++)
		if (w->wake_at[i] && w->wake_at[i] <= now) {
			w->wake_at[i] = 0;
			w->want_q[i] = 1;
		}
	flow_rearm(w);
}

/*
 * A limit held a claim of limited queue i back (f).  An empty bucket or a
 * throttle holds the queue until the hint: no claim could start a job of
 * it before.  A concurrency limit frees a place when a job ends, here
 * (claim_after_end(), through more) or elsewhere (the poll), or when a
 * lease expires (the hint).  A claim that found the queue's row locked by
 * another, or whose claim without a turn the row no longer admitted at its
 * end (undone: sql/028_limit_bound.sql), comes back in a few milliseconds,
 * at a time of its own.
 */
static void
flow_wait(struct worker *w, size_t i, const struct queue_flow_said *f)
{
	int64_t now = util_now_ms();
	int64_t at = f->retry_ms >= 0 ? now + f->retry_ms : 0;
	switch (f->why) {
	case QUEUE_WAIT_BUSY:
		at = now + 1 + (now ^ w->pid) % 4;
		w->more[i] = 1;
		break;
	case QUEUE_WAIT_RATE:
	case QUEUE_WAIT_THROTTLED:
		w->hold_until[i] = at;
		break;
	case QUEUE_WAIT_CONCURRENCY:
	case QUEUE_WAIT_KEY_CONCURRENCY:
	case QUEUE_WAIT_KEY_RATE:
		w->more[i] = 1;
		break;
	default: /* paused: until a NOTIFY says otherwise */
		at = 0;
		break;
	}
	if (at)
		wake_at(w, i, at);
}

/* What a claim said of queue i's flow control. */
static void
flow_said(struct worker *w, size_t i, const struct queue_flow_said *f)
{
	switch (f->flow) {
	case QUEUE_FLOW_NONE:
		break;
	case QUEUE_FLOW_LIMITED:
		w->limited[i] = 1;
		w->want_q[i] = 1;
		break;
	case QUEUE_FLOW_UNLIMITED:
		w->limited[i] = 0;
		w->hold_until[i] = w->wake_at[i] = 0;
		w->want_claim = 1;
		break;
	case QUEUE_FLOW_WAIT:
		flow_wait(w, i, f);
		break;
	}
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
on_given_back(void *arg, const struct db_status *st, const int64_t *written,
	      size_t n, const int64_t *capped, size_t ncapped)
{
	cycle_done(arg);
}

/*
 * A claim that answers after the worker began to retire (a reload): its
 * jobs go back to their queue as they are, unstarted and with the attempt
 * refunded, for the workers on the new config.  Started here, they would
 * run on the old one, or be left behind when the worker exits (their
 * lease then has to expire first).
 */
static void
give_back(struct worker *w, struct queue_claimed *r)
{
	struct queue_finish *f = xcalloc((size_t)r->njobs + 1, sizeof(*f));
	for (int i = 0; i < r->njobs; i++)
		f[i] = (struct queue_finish){.id = r->jobs[i]->id,
					     .token = r->jobs[i]->lease_token,
					     .state = JOB_AVAILABLE,
					     .refund = 1,
					     .wall_ms = -1,
					     .cpu_ms = -1,
					     .max_rss_kb = -1,
					     .status = -1};
	w->cycle_inflight++;
	queue_finish(w->db, f, (size_t)r->njobs, w->cfg->retention_ms,
		     on_given_back, w);
	free(f);
	for (int i = 0; i < r->njobs; i++)
		job_free(r->jobs[i]);
}

static void
on_claim(void *arg, const struct db_status *st, struct queue_claimed *r)
{
	struct claim *c = arg;
	struct worker *w = c->w;

	cycle_done(w);
	if (c->head && st->sqlstate && strcmp(st->sqlstate, "57014") == 0) {
		sweep_timed_out(w, c->limit_ms);
		goto out;
	}
	if (!st->answered || !conn_ok(w, st, "claim"))
		goto out;
	if (w->retiring && r->njobs > 0 && w->db) {
		give_back(w, r);
		goto out;
	}
	int64_t took = util_now_ms() - c->sent_ms;
	stats_observe(w->st->claim, &w->st->claim_count, &w->st->claim_sum_us,
		      took * 1000);
	/* The sweep's limit and cost come from the claims' answer times, not
	 * their round trips: a claim that waited in the pipeline behind a
	 * slow statement (the queue depths' read under a held snapshot, 4 s)
	 * pulled the mean of round trips up by an eighth of that, and with it
	 * the next sweep's limit (20 of them: a sweep of 5.5 s was seen). */
	int64_t own = w->db ? dbev_answer_ms(w->db) : took;
	/* A sweep's answer longer than its time limit was the network's,
	 * not the server's (the fault suite's freeze once waited 2 minutes
	 * for its last 2 jobs): its last cost stands. */
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
	 * of the next ones', and taken as a sweep's cost it put the next
	 * sweep 50 of them away, tens of seconds on a slow host (CI's
	 * sanitizer pass, where test_sweep_time_limit then saw no sweep). */
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
				  : config_handler(w->cfg, r->jobs[i]->kind)
					    ->queue_index;
		held_start(w, r->jobs[i], q, c->sent_ms);
	}
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
 * the claims' time in a row bounded the rate (TURN_SQL in queue.c).
 */
#define TURN_LANES 2 /* a sequence each in sql/022_claim_stops.sql */

/*
 * Where each queue of a claim is read from: past the worker's position in
 * it; from where a NOTIFY said new jobs sort before it (rescan_from()); or
 * from its head (no position yet, or a NOTIFY without a key).  And, about
 * once a second per queue in the whole cluster, from its head by the
 * claim that is granted its sweep ticket (the sweep), which also takes
 * jobs whose lease expired: a job can come to sort behind a position
 * without a NOTIFY that says so (another claimer gave it back, or a lock
 * left its xmax: see claim_sql in src/db/queue.c).  That bounds how long
 * such a job is passed over.
 *
 * The ticket: once a second, a worker's claim asks for the tickets of its
 * queues (c->head, sweep_every_ms()), and the server grants those that no
 * worker of the same kinds swept within that time, and reads them from
 * their head (sql/029_sweep_tickets.sql).  Every worker used to sweep
 * every second: 16 workers swept 16 times a second, each past every
 * running job, and each locked the rows claimed since its snapshot that
 * it met, so that their ends waited for its commit (docs/performance.md,
 * "One sweep a second").
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
 * a job a NOTIFY since the last claim said came (until, read_until()).
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
		if (!w->pos_valid[i] || w->rescan[i] == RESCAN_HEAD)
			from[k] = NULL;
		else if (w->rescan[i] == RESCAN_FROM)
			from[k] = &w->rescan_from[i];
		else
			from[k] = &w->pos[i];
		/* A turn for a claim from the position, in a parallel queue,
		 * of TURN_MIN jobs or more: a small claim reads little past
		 * others' rows, and would wait for a large one's turn.  Ahead
		 * when the last turn showed another claimer in the lane. */
		turn[k] = from[k] == &w->pos[i] &&
			  w->cfg->queues[i].mode == QUEUE_PARALLEL &&
			  c->limits[k] >= TURN_MIN;
		ahead[k] = turn[k] && w->crowded[i];
		c->turn[k] = turn[k];
		until[k] = w->until[i].known
				   ? key_position(&w->until[i], &until_pos[k])
				   : NULL;
		w->rescan[i] = RESCAN_NONE;
		w->until[i].known = 0;
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
		if (!w->serves[i] || w->limited[i] || room(w, i) <= 0)
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
		if (!w->serves[i] || !w->limited[i] || !(all || w->want_q[i]))
			continue;
		w->want_q[i] = 0;
		if (room(w, i) > 0 && w->hold_until[i] <= now)
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

/* The ends waiting to be written (or one written alone, after its batch
 * failed), marked WRITING; NULL when none waits. */
static struct ends *
ends_new(struct worker *w)
{
	size_t n = 0;
	for (struct held *h = w->head; h; h = h->next)
		n += h->state == HELD_DONE;
	if (n == 0)
		return NULL;
	struct ends *e = xcalloc(1, sizeof(*e) + n * sizeof(struct held *));
	e->w = w;
	for (struct held *h = w->head; h; h = h->next) {
		if (h->state != HELD_DONE)
			continue;
		/* A job whose batch failed is written alone, so one bad
		 * result cannot block the others. */
		if (h->solo && e->n > 0)
			continue;
		h->state = HELD_WRITING;
		e->held[e->n++] = h;
		if (h->solo)
			break;
	}
	return e;
}

static void
send_ends(struct worker *w, struct ends *e)
{
	struct queue_finish *f = xcalloc(e->n + 1, sizeof(*f));
	for (size_t i = 0; i < e->n; i++)
		f[i] = e->held[i]->fin;
	w->cycle_inflight++;
	queue_finish(w->db, f, e->n, w->cfg->retention_ms, on_ends, e);
	free(f);
}

/*
 * Sends the next turn: every end waiting to be written and, when the worker
 * wants work and has room, a claim for up to each queue's free places.
 * Ends and claim go out as two transactions in one round trip (the
 * pipeline keeps their order).  In one statement they deadlocked with 16
 * claimers: a claim that meets an older version of a row waits for
 * whoever is updating its newest version, even under SKIP LOCKED, and a
 * statement that also held its finished rows could be waited for in turn.
 * A transaction that only writes ends waits for no claim.
 */
void
claim_send_cycle(struct worker *w)
{
	struct claim *c = NULL;

	if (!w->db || w->cycle_inflight)
		return;
	int all = w->want_claim && !w->draining;
	if (all) {
		w->want_claim = 0;
		c = claim_new(w);
	}
	struct ends *e = ends_new(w);
	if (e)
		send_ends(w, e);
	if (c)
		send_claim(w, c);
	if (!w->draining)
		send_limited_claims(w, all);
}

/* Where key sorts against position p, by priority and then run_at: < 0
 * before it, 0 at the same priority and run_at (where a smaller id may
 * hide), > 0 after it. */
static int
key_cmp(const struct stats_notify_key *key, const struct queue_position *p)
{
	long pr = strtol(p->priority, NULL, 10);
	long long ra = strtoll(p->run_at, NULL, 10);
	if (key->priority != pr)
		return key->priority < pr ? -1 : 1;
	return (key->run_at_us > ra) - (key->run_at_us < ra);
}

/*
 * A NOTIFY's jobs may sort before queue i's position (key; not known when
 * the payload did not say): its next claim reads from where they sort, the
 * earliest of several, rather than from its head, whose entries under a
 * snapshot held open elsewhere are dead ones read for nothing.  Without a
 * key, from the head.
 */
static void
rescan_from(struct worker *w, size_t i, const struct stats_notify_key *key)
{
	struct queue_position *p = &w->rescan_from[i];
	if (!key->known) {
		w->rescan[i] = RESCAN_HEAD;
		return;
	}
	if (w->rescan[i] == RESCAN_FROM && key_cmp(key, p) >= 0)
		return;
	key_position(key, p); /* every id of that priority and run_at */
	w->rescan[i] = RESCAN_FROM;
}

/*
 * A NOTIFY's jobs sort after queue i's position (key), but maybe before
 * the newest job another claimer took, past which the next claim may
 * start (queue_claim_req's ahead): it reads ahead no further than the
 * earliest such key.
 */
static void
read_until(struct worker *w, size_t i, const struct stats_notify_key *key)
{
	struct stats_notify_key *u = &w->until[i];
	if (u->known &&
	    (u->priority < key->priority ||
	     (u->priority == key->priority && u->run_at_us <= key->run_at_us)))
		return;
	*u = *key;
}

/*
 * Whether this worker claims on a NOTIFY.  The trigger's payload is
 * "<transaction id> <due jobs>" (sql/007_notify_payload.sql).  The workers
 * of an instance share a small table of recent notifications, and a worker
 * takes one only while the workers that took it have too little room for
 * its jobs: one claim per instance for a job that comes alone, where every
 * worker used to claim, and as many workers as a burst needs.  A worker
 * whose claim would wait (an sql handler's statement holds its
 * connection), or that has no room, or cannot read the payload, claims as
 * before, so no job waits on it; one that takes a notification and then
 * dies leaves its jobs to the poll timer.
 *
 * Any role can NOTIFY pgjob.  A forged notification costs at most one
 * claim per worker (claims never pile up: one is in flight at a time), and
 * cannot stand in for a real one, whose key includes the backend that sent
 * it (stats_notify_take()).
 */
static int
answer_notify(struct worker *w, const char *payload, int be_pid,
	      struct stats_notify_key *key)
{
	uint64_t xid;
	long long due;
	int parsed = stats_notify_parse(payload, &xid, &due, key) == 0;
	if (w->draining)
		return 0; /* claims no more: takes no turn */
	if (!w->stats || !parsed || w->sql_inflight > 0)
		return 1;
	long long room = 0;
	for (size_t i = 0; i < w->cfg->nqueues; i++)
		if (w->serves[i] &&
		    w->cfg->queues[i].concurrency > w->running[i])
			room += w->cfg->queues[i].concurrency - w->running[i];
	return stats_notify_take(w->stats, xid, be_pid, due, room);
}

/*
 * A limit or pause changed (the trigger on pgjob.limits): every hold and
 * hint is stale, and a claim of everything finds out how things stand.
 * After pgjob.reset_limits() ("reset QUEUE"), the config's limits are
 * published again: every worker does, and all but the first write
 * nothing.
 */
static void
limits_changed(struct worker *w, const char *payload)
{
	for (size_t i = 0; i < w->cfg->nqueues; i++)
		w->hold_until[i] = w->wake_at[i] = 0;
	flow_rearm(w);
	w->want_claim = 1;
	if (strncmp(payload, "reset ", 6) == 0 && w->db)
		queue_publish_limits(w->db, w->limits_json);
}

void
claim_on_notify(void *arg, const char *channel, const char *payload, int be_pid)
{
	struct worker *w = arg;
	if (strcmp(channel, "pgjob_limits") == 0) {
		limits_changed(w, payload);
		return;
	}
	struct stats_notify_key key;
	if (answer_notify(w, payload, be_pid, &key))
		w->want_claim = 1;
	/* The key is the earliest of all the jobs, whatever their queue:
	 * every queue whose position it does not sort after reads from it
	 * at its next claim (from its head when the payload has no key). */
	for (size_t i = 0; i < w->cfg->nqueues; i++) {
		if (!w->pos_valid[i] || w->rescan[i] == RESCAN_HEAD)
			continue;
		if (!key.known || key_cmp(&key, &w->pos[i]) <= 0)
			rescan_from(w, i, &key);
		else
			read_until(w, i, &key);
	}
}
