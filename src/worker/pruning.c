/*
 * pruning: the holder of the pgjob:prune lease deletes, once a minute, a
 * batch of the finished jobs past retention, the rings of pgjob.jobs_done
 * whose jobs are all past it (sql/upgrade/019_jobs_done.sql), a batch of
 * expired request keys (docs/idempotency.md), the rows of workers gone for a
 * day, and the throughput minutes older than 2 hours
 * (sql/upgrade/014_console_state.sql), and the history's minutes past 24 hours,
 * rolled up to hours, and its hours past 30 days (pgjob.history_prune():
 * sql/schema/tables/history.sql).
 */
#include "common/config.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"
#include "db/history.h"
#include "db/lease.h"
#include "db/prune.h"
#include "worker/duties.h"

#define PRUNE_LEASE    "pgjob:prune"
#define PRUNE_EVERY_MS 60000
#define PRUNE_BATCH    10000

/* What a batch pruned (arg: "finished jobs" or "expired request keys"). */
static void
on_pruned(void *arg, const struct db_status *st, long long n)
{
	const char *what = arg;
	if (st->error == DB_OK && n > 0)
		log_info("pruned %lld %s", n, what);
	else if (st->answered && st->error != DB_OK)
		log_warnx("pruning %s failed: %s", what, st->text);
}

/* The rings of pgjob.jobs_done emptied: their count is the statistics'
 * estimate (sql/upgrade/019_jobs_done.sql). */
static void
on_rings(void *arg, const struct db_status *st, long long n)
{
	(void)arg;
	if (st->error == DB_OK && n > 0)
		log_info("pruned about %lld jobs done: whole rings of "
			 "pgjob.jobs_done emptied",
			 n);
	else if (st->answered && st->error != DB_OK)
		log_warnx("pruning the rings of pgjob.jobs_done failed: %s",
			  st->text);
}

static void
on_lease(void *arg, const struct db_status *st, int64_t token)
{
	struct duty *d = arg;
	d->prune_token = token;
	if (d->prune_token && d->stopping) {
		/* Taken while stopping: give it back at once. */
		if (d->db)
			lease_release(d->db, PRUNE_LEASE, d->holder,
				      d->prune_token, NULL, NULL);
		d->prune_token = 0;
	}
	if (!d->prune_token || !d->db)
		return;
	prune_jobs(d->db, d->cfg->retention_ms, PRUNE_BATCH, on_pruned,
		   "finished jobs");
	prune_done(d->db, d->cfg->retention_ms, on_rings, NULL);
	prune_request_keys(d->db, PRUNE_BATCH, on_pruned,
			   "expired request keys");
	prune_workers(d->db);
	history_prune(d->db, on_pruned, "history minutes rolled up to hours");
	prune_limits(d->db, on_pruned, "flow-control leftovers");
}

void
pruning_period(struct duty *d)
{
	int64_t now = util_now_ms();
	if (d->last_prune && now - d->last_prune < PRUNE_EVERY_MS)
		return;
	d->last_prune = now;
	if (d->prune_token)
		lease_renew(d->db, PRUNE_LEASE, d->holder, d->prune_token,
			    2 * PRUNE_EVERY_MS, on_lease, d);
	else
		lease_acquire(d->db, PRUNE_LEASE, d->holder, 2 * PRUNE_EVERY_MS,
			      on_lease, d);
}

void
pruning_stop(struct duty *d)
{
	if (d->prune_token && d->db)
		lease_release(d->db, PRUNE_LEASE, d->holder, d->prune_token,
			      NULL, NULL);
	d->prune_token = 0;
}
