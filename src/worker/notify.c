/*
 * notify: what a worker makes of the notifications its connection
 * receives.  On channel pgjob, the trigger pgjob.jobs_notify() announces
 * new jobs: their count, and where the earliest sorts (read by
 * notify_payload.c).  Whether this worker claims for them is decided among
 * the workers of its instance (answer_notify()); where its next claim
 * reads each queue from follows from where they sort against its
 * positions (rescan_from, until; claim.c reads those).  On pgjob_limits,
 * a limit or pause changed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/stats.h"
#include "worker/internal.h"
#include "worker/notify_payload.h"

const struct queue_position *
notify_key_position(const struct notify_key *key, struct queue_position *p)
{
	snprintf(p->priority, sizeof(p->priority), "%d", key->priority);
	snprintf(p->run_at, sizeof(p->run_at), "%lld",
		 (long long)key->run_at_us);
	snprintf(p->id, sizeof(p->id), "%lld", -9223372036854775807LL);
	return p;
}

int
notify_key_cmp(const struct notify_key *key, const struct queue_position *p)
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
void
notify_rescan_from(struct worker *w, size_t i, const struct notify_key *key)
{
	struct queue_position *p = &w->wq[i].rescan_from;
	if (!key->known) {
		w->wq[i].rescan = RESCAN_HEAD;
		return;
	}
	if (w->wq[i].rescan == RESCAN_FROM && notify_key_cmp(key, p) >= 0)
		return;
	notify_key_position(key, p); /* every id of that priority and run_at */
	w->wq[i].rescan = RESCAN_FROM;
}

/*
 * A NOTIFY's jobs sort after queue i's position (key), but maybe before
 * the newest job another claimer took, past which the next claim may
 * start (queue_claim_req's ahead): it reads ahead no further than the
 * earliest such key.
 */
static void
read_until(struct worker *w, size_t i, const struct notify_key *key)
{
	struct notify_key *u = &w->wq[i].until;
	if (u->known &&
	    (u->priority < key->priority ||
	     (u->priority == key->priority && u->run_at_us <= key->run_at_us)))
		return;
	*u = *key;
}

/*
 * Whether this worker claims on a NOTIFY (its payload: notify_parse()).
 * The workers
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
	      struct notify_key *key)
{
	uint64_t xid;
	long long due;
	int parsed = notify_parse(payload, &xid, &due, key) == 0;
	if (w->draining)
		return 0; /* claims no more: takes no turn */
	if (!w->stats || !parsed || w->sql_inflight > 0)
		return 1;
	/* Children released by ends (a payload without a key: a statement
	 * trigger's pgjob.ends_count()) of a worker of this instance whose
	 * claim ran right behind those ends (worker.c, send_turn()): its jobs
	 * are that claim's.  New jobs (a key: an insert, a duty's too, on that
	 * worker's connection) are everyone's, as before. */
	if (!key->known && stats_notify_behind(w->stats, be_pid, due))
		return 0;
	long long room = 0;
	for (size_t i = 0; i < w->cfg->nqueues; i++)
		if (w->wq[i].serves &&
		    w->cfg->queues[i].concurrency > w->wq[i].running)
			room += w->cfg->queues[i].concurrency -
				w->wq[i].running;
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
		w->wq[i].hold_until = w->wq[i].wake_at = 0;
	flow_rearm(w);
	w->want_claim = 1;
	if (strncmp(payload, "reset ", 6) == 0 && w->db)
		queue_publish_limits(w->db, w->limits_json);
}

void
notify_received(void *arg, const char *channel, const char *payload, int be_pid)
{
	struct worker *w = arg;
	if (strcmp(channel, "pgjob_limits") == 0) {
		limits_changed(w, payload);
		return;
	}
	struct notify_key key;
	if (answer_notify(w, payload, be_pid, &key))
		w->want_claim = 1;
	/* The key is the earliest of all the jobs, whatever their queue:
	 * every queue whose position it does not sort after reads from it
	 * at its next claim (from its head when the payload has no key). */
	for (size_t i = 0; i < w->cfg->nqueues; i++) {
		if (!w->wq[i].pos_valid || w->wq[i].rescan == RESCAN_HEAD)
			continue;
		if (!key.known || notify_key_cmp(&key, &w->wq[i].pos) <= 0)
			notify_rescan_from(w, i, &key);
		else
			read_until(w, i, &key);
	}
}
