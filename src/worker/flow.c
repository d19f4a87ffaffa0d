/*
 * flow: what a worker keeps of the flow control of its limited queues
 * (docs/queues.md), from what their claims said: a queue held back until
 * a time (an empty bucket, a throttle), a wake-up at a limit's hint, a
 * queue that gained or lost its limits.  The flow timer claims each at
 * its wake-up; the claims themselves are claim.c's.  Apart from claim.c:
 * the NOTIFY of a changed limit (notify.c) resets the same state.
 */
#include "worker/internal.h"

#include "common/util.h"

void
flow_rearm(struct worker *w)
{
	int64_t first = 0;
	for (size_t i = 0; i < w->cfg->nqueues; i++)
		if (w->wq[i].wake_at && (!first || w->wq[i].wake_at < first))
			first = w->wq[i].wake_at;
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
	if (!w->wq[i].wake_at || at < w->wq[i].wake_at) {
		w->wq[i].wake_at = at;
		flow_rearm(w);
	}
}

void
flow_on_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct worker *w = t->data;
	int64_t now = util_now_ms();
	for (size_t i = 0; i < w->cfg->nqueues; i++)
		if (w->wq[i].wake_at && w->wq[i].wake_at <= now) {
			w->wq[i].wake_at = 0;
			w->wq[i].want = 1;
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
 * end (undone: sql/upgrade/028_limit_bound.sql), comes back in a few
 * milliseconds, at a time of its own.
 */
static void
flow_wait(struct worker *w, size_t i, const struct queue_flow_said *f)
{
	int64_t now = util_now_ms();
	int64_t at = f->retry_ms >= 0 ? now + f->retry_ms : 0;
	switch (f->why) {
	case QUEUE_WAIT_BUSY:
		at = now + 1 + (now ^ w->pid) % 4;
		w->wq[i].more = 1;
		break;
	case QUEUE_WAIT_RATE:
	case QUEUE_WAIT_THROTTLED:
		w->wq[i].hold_until = at;
		break;
	case QUEUE_WAIT_CONCURRENCY:
	case QUEUE_WAIT_KEY_CONCURRENCY:
	case QUEUE_WAIT_KEY_RATE:
		w->wq[i].more = 1;
		break;
	default: /* paused: until a NOTIFY says otherwise */
		at = 0;
		break;
	}
	if (at)
		wake_at(w, i, at);
}

void
flow_said(struct worker *w, size_t i, const struct queue_flow_said *f)
{
	switch (f->flow) {
	case QUEUE_FLOW_NONE:
		break;
	case QUEUE_FLOW_LIMITED:
		w->wq[i].limited = 1;
		w->wq[i].want = 1;
		break;
	case QUEUE_FLOW_UNLIMITED:
		w->wq[i].limited = 0;
		w->wq[i].hold_until = w->wq[i].wake_at = 0;
		w->want_claim = 1;
		break;
	case QUEUE_FLOW_WAIT:
		flow_wait(w, i, f);
		break;
	}
}
