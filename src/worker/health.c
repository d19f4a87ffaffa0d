/*
 * health: the holder of the pgjob:health lease reads, every
 * health.interval, what holds the database's xmin horizon back, the dead
 * tuples and last vacuum of pgjob's tables, and the bloat of its indexes
 * (db/health.c), writes them for /metrics, and warns in the log when the
 * horizon is older than health.xmin_warn, naming the holder and the
 * statement that ends it (docs/operations.md, "Database health").
 *
 * Why a lease and not every worker: the statement reads pg_stat_activity
 * and the catalogs, cheap but not free, and one reader per cluster is
 * enough, with one warning per cluster rather than one per worker.  A lease
 * (like pruning's) rather than the lowest slot: slots are per lock_class,
 * so two clusters of pgjobd on one database would each have a lowest slot;
 * the lease row is one per database, and moves when its holder dies.
 *
 * The warning is logged when the horizon first passes the threshold, again
 * when another holder becomes the oldest past it, at most every
 * HEALTH_REPEAT_MS while the same one lasts, and once as an info line when
 * none is past it any more.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/log.h"
#include "common/stats.h"
#include "common/util.h"
#include "db/db.h"
#include "db/health.h"
#include "db/lease.h"
#include "worker/duties.h"

#define HEALTH_LEASE	 "pgjob:health"
#define HEALTH_REPEAT_MS (5 * 60 * 1000)

/* A holder whose age the database does not say, and when it was first
 * seen holding the same xmin. */
struct xmin_seen {
	char *key;
	int64_t since_ms;
};

static void
on_lease(void *arg, const struct db_status *st, int64_t token)
{
	struct duty *d = arg;
	d->health_token = token;
	if (d->health_token && d->stopping) {
		/* Taken while stopping: give it back at once. */
		if (d->db)
			lease_release(d->db, HEALTH_LEASE, d->holder,
				      d->health_token, NULL, NULL);
		d->health_token = 0;
	}
}

void
health_period(struct duty *d)
{
	if (d->health_token)
		lease_renew(d->db, HEALTH_LEASE, d->holder, d->health_token,
			    duty_lease_ms(d), on_lease, d);
	else
		lease_acquire(d->db, HEALTH_LEASE, d->holder, duty_lease_ms(d),
			      on_lease, d);
}

/* What names one holder across checks: its kind, name, pid and the xmin
 * it holds (a session's next transaction is another holder).  Caller
 * frees. */
static char *
holder_key(const struct health_holder *h)
{
	return xasprintf("%d\n%s\n%d\n%s", (int)h->kind, h->name ? h->name : "",
			 h->pid, h->xmin ? h->xmin : "");
}

/*
 * The age in ms of each of r's holders: the database's, else since this
 * worker first saw it (a lower bound: the lease may have moved, or pgjobd
 * started, after it began).  Forgets the holders gone.  ages has
 * r->nholders places.
 */
static void
holder_ages(struct duty *d, const struct health_report *r, int64_t now,
	    int64_t *ages)
{
	struct xmin_seen *next = xcalloc(r->nholders + 1, sizeof(*next));
	size_t n = 0;
	for (size_t i = 0; i < r->nholders; i++) {
		const struct health_holder *h = &r->holders[i];
		if (h->age_s >= 0) {
			ages[i] = (int64_t)(h->age_s * 1000.);
			continue;
		}
		char *key = holder_key(h);
		int64_t since = now;
		for (size_t j = 0; j < d->nxseen; j++)
			if (strcmp(d->xseen[j].key, key) == 0)
				since = d->xseen[j].since_ms;
		next[n++] = (struct xmin_seen){key, since};
		ages[i] = now - since;
	}
	for (size_t j = 0; j < d->nxseen; j++)
		free(d->xseen[j].key);
	free(d->xseen);
	d->xseen = next;
	d->nxseen = n;
}

/* Writes the figures of r for /metrics, valid for three intervals. */
static void
publish(struct duty *d, const struct health_report *r, const int64_t *ages,
	int64_t now)
{
	struct stats_health *s = &d->stats->health;
	int64_t ms[STATS_HEALTH_KINDS], xids[STATS_HEALTH_KINDS];
	for (int k = 0; k < STATS_HEALTH_KINDS; k++)
		ms[k] = xids[k] = -1;
	for (size_t i = 0; i < r->nholders; i++) {
		const struct health_holder *h = &r->holders[i];
		if (ages[i] > ms[h->kind])
			ms[h->kind] = ages[i];
		if (h->xids > xids[h->kind])
			xids[h->kind] = h->xids;
	}
	for (int k = 0; k < STATS_HEALTH_KINDS; k++) {
		stats_set(&s->xmin_age_ms[k], ms[k]);
		stats_set(&s->xmin_age_xids[k], xids[k]);
	}
	size_t nt = r->ntables < STATS_HEALTH_TABLES ? r->ntables
						     : STATS_HEALTH_TABLES;
	size_t ni = r->nindexes < STATS_HEALTH_INDEXES ? r->nindexes
						       : STATS_HEALTH_INDEXES;
	__atomic_store_n(&s->ntables, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&s->nindexes, 0, __ATOMIC_RELEASE);
	for (size_t i = 0; i < nt; i++) {
		const struct health_table *t = &r->tables[i];
		snprintf(s->tables[i].name, sizeof(s->tables[i].name), "%s",
			 t->name);
		stats_set(&s->tables[i].dead, t->dead);
		stats_set(&s->tables[i].vacuum_ms,
			  t->vacuum_age_s < 0
				  ? -1
				  : (int64_t)(t->vacuum_age_s * 1000.));
	}
	for (size_t i = 0; i < ni; i++) {
		const struct health_index *x = &r->indexes[i];
		snprintf(s->indexes[i].name, sizeof(s->indexes[i].name), "%s",
			 x->name);
		stats_set(&s->indexes[i].bloat_milli,
			  (int64_t)(x->bloat * 1000.));
	}
	__atomic_store_n(&s->ntables, (uint32_t)nt, __ATOMIC_RELEASE);
	__atomic_store_n(&s->nindexes, (uint32_t)ni, __ATOMIC_RELEASE);
	stats_set(&s->valid_ms, now + 3 * d->cfg->health_interval_ms);
	__atomic_store_n(&s->at_ms, now, __ATOMIC_RELEASE);
}

/*
 * The warning about holder h, held for age_ms.  Client-written text (an
 * application_name, a gid) goes in as it is: the log quotes the message
 * and escapes every control character in it (log.c).
 */
static void
warn_holder(const struct health_holder *h, int64_t age_ms)
{
	long long s = (long long)(age_ms / 1000);
	const char *approx = h->age_s < 0 ? "at least " : "";
	char *fix = health_fix(h);
	switch (h->kind) {
	case HEALTH_BACKEND:
		log_warnx("xmin horizon held for %s%llds (%lld transactions) "
			  "by backend pid %d (user %s, application_name "
			  "\"%s\", client %s, state %s, since %s): vacuum "
			  "cannot remove dead job rows; end it with: %s",
			  approx, s, h->xids, h->pid, h->name ? h->name : "?",
			  h->application_name ? h->application_name : "",
			  health_client(h),
			  h->state ? h->state : "unknown (needs pg_monitor)",
			  h->since ? h->since : "unknown", fix);
		break;
	case HEALTH_SLOT:
		log_warnx("xmin horizon held for %s%llds (%lld transactions) "
			  "by replication slot \"%s\" (%s): vacuum cannot "
			  "remove dead job rows; if nothing uses it any more: "
			  "%s",
			  approx, s, h->xids, h->name ? h->name : "",
			  h->state ? h->state : "", fix);
		break;
	default:
		log_warnx("xmin horizon held for %s%llds (%lld transactions) "
			  "by prepared transaction gid \"%s\" (prepared %s): "
			  "vacuum cannot remove dead job rows; end it with: "
			  "%s",
			  approx, s, h->xids, h->name ? h->name : "",
			  h->since ? h->since : "", fix);
		break;
	}
	free(fix);
}

/* The warning: the oldest holder past health.xmin_warn, if any. */
static void
check_horizon(struct duty *d, const struct health_report *r,
	      const int64_t *ages, int64_t now)
{
	size_t oldest = r->nholders;
	for (size_t i = 0; i < r->nholders; i++)
		if (ages[i] >= d->cfg->health_xmin_warn_ms &&
		    (oldest == r->nholders || ages[i] > ages[oldest]))
			oldest = i;
	if (oldest == r->nholders) {
		if (d->warn_key)
			log_info("xmin horizon: no holder older than %llds "
				 "any more",
				 (long long)(d->cfg->health_xmin_warn_ms /
					     1000));
		free(d->warn_key);
		d->warn_key = NULL;
		return;
	}
	char *key = holder_key(&r->holders[oldest]);
	if (d->warn_key && strcmp(d->warn_key, key) == 0 &&
	    now - d->warned_at < HEALTH_REPEAT_MS) {
		free(key);
		return;
	}
	warn_holder(&r->holders[oldest], ages[oldest]);
	free(d->warn_key);
	d->warn_key = key;
	d->warned_at = now;
}

static void
on_health(void *arg, const struct db_status *st, const struct health_report *r)
{
	struct duty *d = arg;
	d->health_busy = 0;
	if (!st->answered)
		return;
	if (!r) {
		/* Logged once until a check succeeds again. */
		if (!d->health_failed)
			log_warnx("reading the database's health failed: %s",
				  st->text);
		d->health_failed = 1;
		return;
	}
	d->health_failed = 0;
	int64_t now = util_now_ms();
	int64_t *ages = xcalloc(r->nholders + 1, sizeof(*ages));
	holder_ages(d, r, now, ages);
	if (d->stats)
		publish(d, r, ages, now);
	check_horizon(d, r, ages, now);
	free(ages);
}

void
health_round(struct duty *d)
{
	int64_t now = util_now_ms();
	if (!d->health_token || d->health_busy ||
	    (d->last_health &&
	     now - d->last_health < d->cfg->health_interval_ms))
		return;
	d->last_health = now;
	d->health_busy = 1;
	health_read(d->db, HEALTH_HOLDERS, on_health, d);
}

void
health_stop(struct duty *d)
{
	if (d->health_token && d->db)
		lease_release(d->db, HEALTH_LEASE, d->holder, d->health_token,
			      NULL, NULL);
	d->health_token = 0;
}

void
health_forget(struct duty *d)
{
	d->health_token = 0;
}

void
health_free(struct duty *d)
{
	for (size_t j = 0; j < d->nxseen; j++)
		free(d->xseen[j].key);
	free(d->xseen);
	free(d->warn_key);
	d->xseen = NULL;
	d->warn_key = NULL;
	d->nxseen = 0;
}
