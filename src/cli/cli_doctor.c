/*
 * cli_doctor: `pgjob doctor [--json]` checks what makes a PostgreSQL queue
 * fail in production and prints each item as OK, WARN, FAIL (or SKIP: not
 * checked) with a concrete fix (docs/operations.md, "Database health"):
 * the schema version, the xmin horizon and what holds it, dead tuples,
 * index bloat, autovacuum, jobs running past their timeout, kinds that
 * wait with no handler in the config (-c), instances that stopped
 * heartbeating, and the pooler.
 *
 * It only reads.  Exit status: 0 every item OK (or skipped), 1 a warning,
 * 2 a failure (and 2 for a usage error or no connection, as for every
 * command).  Everything the database hands back that a client wrote (an
 * application_name, a prepared transaction's gid, a kind) is escaped for
 * the terminal by cli_one_line(), and by cJSON in --json.
 */
#include "cli/cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "db/health.h"
#include "db/migrate.h"
#include "db/pooler.h"

/* Past health.xmin_warn a holder is a warning, past this many times it a
 * failure. */
#define DOCTOR_XMIN_FAIL_FACTOR 10
/* Dead tuples that make a warning, when they are also a fifth of the live
 * ones. */
#define DOCTOR_DEAD_MIN 10000
/* An index estimated at least this bloated, and at least this large. */
#define DOCTOR_BLOAT_RATIO 0.5
#define DOCTOR_BLOAT_BYTES (8LL << 20)
/* Jobs named in one item at most. */
#define DOCTOR_IDS 5

enum status { ST_OK, ST_SKIP, ST_WARN, ST_FAIL };
static const char *const status_names[] = {"OK", "SKIP", "WARN", "FAIL"};

struct item {
	enum status st;
	char *check, *detail, *fix; /* fix may be NULL */
};

struct doctor {
	struct cli *cli;
	struct db_conn *conn;
	int64_t xmin_warn_ms, lease_ms;
	struct item *v;
	size_t n;
};

static void add(struct doctor *d, enum status st, const char *check,
		const char *fix, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

/* Adds an item; fix (copied) may be NULL. */
static void
add(struct doctor *d, enum status st, const char *check, const char *fix,
    const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int len = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	char *detail = xmalloc((size_t)(len > 0 ? len : 0) + 1);
	va_start(ap, fmt);
	vsnprintf(detail, (size_t)(len > 0 ? len : 0) + 1, fmt, ap);
	va_end(ap);
	d->v = xrealloc(d->v, (d->n + 1) * sizeof(*d->v));
	d->v[d->n++] = (struct item){st, xstrdup(check), detail,
				     fix ? xstrdup(fix) : NULL};
}

/* Runs sql; NULL after adding a FAIL item for check that says why. */
static struct db_rows *
query(struct doctor *d, const char *check, const char *sql, int n,
      const char *const *p)
{
	char *err = NULL;
	struct db_rows *r = db_query(d->conn, sql, n, p, &err);
	if (!r) {
		add(d, ST_FAIL, check, NULL, "could not check: %s", err);
		free(err);
	}
	return r;
}

/* --- the schema -------------------------------------------------------- */

/* Returns 1 when pgjob's tables are there to be read. */
static int
check_schema(struct doctor *d)
{
	int version = -1;
	char *err = NULL;
	if (migrate_check(d->conn, &version, &err) == 0) {
		add(d, ST_OK, "schema version", NULL,
		    "%d, the version this pgjob ships", version);
		return 1;
	}
	if (version < 0)
		add(d, ST_FAIL, "schema version", NULL, "could not check: %s",
		    err);
	else
		add(d, ST_FAIL, "schema version",
		    version > migrate_latest()
			    ? "upgrade pgjob and pgjobd to the release of "
			      "this schema"
			    : "pgjob migrate (with pgjobd of this release)",
		    "%s", err);
	free(err);
	return version > 0;
}

/* --- the xmin horizon -------------------------------------------------- */

/* s between double quotes, with " and \\ escaped, so that a name that
 * holds a quote cannot pass for the end of it; caller frees. */
static char *
quoted(const char *s)
{
	struct buf b = {0};
	buf_append(&b, "\"", 1);
	for (; s && *s; s++) {
		if (*s == '"' || *s == '\\')
			buf_append(&b, "\\", 1);
		buf_append(&b, s, 1);
	}
	buf_append(&b, "\"", 1);
	return b.data;
}

/* A timestamp without its fractional seconds (NULL: "?"). */
static const char *
when(const char *ts, char *buf, size_t len)
{
	return ts ? cli_format_time(ts, buf, len) : "?";
}

/* One holder past the threshold, as an item with the statement that ends
 * it. */
static void
holder_item(struct doctor *d, const struct health_holder *h, enum status st)
{
	char a[32], t[64];
	char *stmt = health_fix(h), *fix;
	char *name = quoted(h->name);
	char *app = quoted(h->application_name);
	switch (h->kind) {
	case HEALTH_BACKEND:
		fix = xasprintf("%s;  -- ends that session; its transaction "
				"rolls back",
				stmt);
		add(d, st, "xmin horizon", fix,
		    "held for %s (%lld transactions) by backend pid %d (user "
		    "%s, application_name %s, client %s, state %s, since %s)",
		    cli_format_age(h->age_s, a, sizeof(a)), h->xids, h->pid,
		    name, app, health_client(h), h->state ? h->state : "?",
		    when(h->since, t, sizeof(t)));
		break;
	case HEALTH_SLOT:
		fix = xasprintf("%s;  -- only if no standby or consumer "
				"needs it any more",
				stmt);
		add(d, st, "xmin horizon", fix,
		    "held (%lld transactions) by %s replication slot %s",
		    h->xids, h->state ? h->state : "", name);
		break;
	default:
		fix = xasprintf("%s;  -- as its owner or a superuser, in its "
				"database (commit prepared if it must commit)",
				stmt);
		add(d, st, "xmin horizon", fix,
		    "held for %s (%lld transactions) by prepared transaction "
		    "gid %s (prepared %s)",
		    cli_format_age(h->age_s, a, sizeof(a)), h->xids, name,
		    when(h->since, t, sizeof(t)));
		break;
	}
	free(fix);
	free(stmt);
	free(name);
	free(app);
}

/*
 * A session of another role that pg_stat_activity hides (no pg_monitor):
 * its age in seconds is unknown, so the check cannot say it is fine.  h
 * is the oldest such holder in transactions.
 */
static void
hidden_item(struct doctor *d, const struct health_holder *h, size_t hidden)
{
	char *err = NULL;
	struct db_rows *r = db_query(
		d->conn, "select quote_ident(current_user)", 0, NULL, &err);
	char *fix = xasprintf("grant pg_monitor to %s;  -- as a superuser, "
			      "so that pgjob doctor sees since when",
			      r ? db_rows_text(r, 0, 0) : "<this role>");
	char *name = quoted(h->name);
	add(d, ST_WARN, "xmin horizon", fix,
	    "%zu session%s of other roles hold%s an xmin whose age in time "
	    "needs pg_monitor to be seen; the oldest: backend pid %d (user "
	    "%s), %lld transactions",
	    hidden, hidden == 1 ? "" : "s", hidden == 1 ? "s" : "", h->pid,
	    name, h->xids);
	free(name);
	free(fix);
	free(err);
	db_rows_free(r);
}

/*
 * A holder with a known age past xmin_warn is a warning (ten times past,
 * a failure); an inactive replication slot that holds an xmin is a
 * warning whatever its age (nothing will move it); a session of another
 * role whose start pg_stat_activity hides (no pg_monitor) is a warning
 * too, since its age cannot be checked.
 */
static void
check_horizon(struct doctor *d, const struct health_report *r)
{
	char a[32];
	size_t bad = 0, hidden = 0;
	const struct health_holder *oldest_hidden = NULL;
	double warn = (double)d->xmin_warn_ms / 1000.;
	for (size_t i = 0; i < r->nholders; i++) {
		const struct health_holder *h = &r->holders[i];
		if (h->kind == HEALTH_SLOT) {
			if (h->state && strcmp(h->state, "inactive") == 0) {
				holder_item(d, h, ST_WARN);
				bad++;
			}
			continue;
		}
		if (h->age_s < 0) {
			/* The holders come oldest first. */
			if (hidden++ == 0)
				oldest_hidden = h;
			continue;
		}
		if (h->age_s >= warn) {
			holder_item(d, h,
				    h->age_s >= warn * DOCTOR_XMIN_FAIL_FACTOR
					    ? ST_FAIL
					    : ST_WARN);
			bad++;
		}
	}
	if (hidden)
		hidden_item(d, oldest_hidden, hidden);
	if (bad || hidden)
		return;
	if (r->nholders == 0 || r->holders[0].age_s < 0) /* a slot */
		add(d, ST_OK, "xmin horizon", NULL, "no holder older than %s",
		    cli_format_age(warn, a, sizeof(a)));
	else
		add(d, ST_OK, "xmin horizon", NULL,
		    "oldest holder: %s %s old (under %s)",
		    health_kind_name(r->holders[0].kind),
		    cli_format_age(r->holders[0].age_s, a, sizeof(a)),
		    cli_format_age(warn, a + 16, sizeof(a) - 16));
}

/* --- tables and indexes ------------------------------------------------ */

static void
check_tables(struct doctor *d, const struct health_report *r)
{
	char a[32];
	int bad = 0;
	for (size_t i = 0; i < r->ntables; i++) {
		const struct health_table *t = &r->tables[i];
		if (t->dead < DOCTOR_DEAD_MIN || t->dead < t->live / 5)
			continue;
		char *fix = xasprintf("vacuum (verbose, analyze) pgjob.%s;  "
				      "-- if the dead rows stay, see what "
				      "holds the xmin horizon",
				      t->name);
		add(d, ST_WARN, "dead tuples", fix,
		    "pgjob.%s: %lld dead, %lld live, last vacuum %s%s", t->name,
		    t->dead, t->live,
		    t->vacuum_age_s < 0
			    ? "never"
			    : cli_format_age(t->vacuum_age_s, a, sizeof(a)),
		    t->vacuum_age_s < 0 ? "" : " ago");
		free(fix);
		bad++;
	}
	if (bad)
		return;
	for (size_t i = 0; i < r->ntables; i++) {
		const struct health_table *t = &r->tables[i];
		if (strcmp(t->name, "jobs") == 0)
			add(d, ST_OK, "dead tuples", NULL,
			    "pgjob.jobs: %lld dead, %lld live, last vacuum "
			    "%s%s",
			    t->dead, t->live,
			    t->vacuum_age_s < 0
				    ? "none since the statistics were reset"
				    : cli_format_age(t->vacuum_age_s, a,
						     sizeof(a)),
			    t->vacuum_age_s < 0 ? "" : " ago");
	}
}

static void
check_bloat(struct doctor *d, const struct health_report *r)
{
	const struct health_index *worst = NULL;
	int bad = 0;
	for (size_t i = 0; i < r->nindexes; i++) {
		const struct health_index *x = &r->indexes[i];
		if (!worst || x->bloat > worst->bloat)
			worst = x;
		if (x->bloat < DOCTOR_BLOAT_RATIO ||
		    x->bytes < DOCTOR_BLOAT_BYTES)
			continue;
		char *fix = xasprintf("reindex index concurrently pgjob.%s;",
				      x->name);
		add(d, ST_WARN, "index bloat", fix,
		    "pgjob.%s: about %.0f%% of its %.1f MiB not needed",
		    x->name, x->bloat * 100, (double)x->bytes / (1 << 20));
		free(fix);
		bad++;
	}
	if (!bad && worst)
		add(d, ST_OK, "index bloat", NULL,
		    "highest estimate: pgjob.%s, %.0f%% of %.1f MiB",
		    worst->name, worst->bloat * 100,
		    (double)worst->bytes / (1 << 20));
}

/* --- autovacuum -------------------------------------------------------- */

static const char AUTOVACUUM_SQL[] =
	"select (select setting from pg_settings where name = 'autovacuum'),"
	" (select setting from pg_settings where name = 'track_counts'),"
	" (select setting::int from pg_settings"
	"   where name = 'autovacuum_naptime'),"
	" (select setting from pg_settings"
	"   where name = 'autovacuum_vacuum_scale_factor'),"
	" (select array_to_string(reloptions, ', ') from pg_class"
	"   where oid = to_regclass('pgjob.jobs')),"
	" (select coalesce(bool_or(o = 'autovacuum_enabled=false'), false)"
	"   from pg_class c, unnest(c.reloptions) o"
	"   where c.oid = to_regclass('pgjob.jobs')),"
	" (select coalesce(bool_or(o like 'autovacuum_vacuum_scale_factor=%'),"
	"   false) from pg_class c, unnest(c.reloptions) o"
	"   where c.oid = to_regclass('pgjob.jobs'))";

#define PER_TABLE                                                              \
	"alter table pgjob.jobs set (autovacuum_vacuum_scale_factor = 0.01, "  \
	"autovacuum_vacuum_insert_scale_factor = 0.05, "                       \
	"autovacuum_analyze_scale_factor = 0.02);"

static void
check_autovacuum(struct doctor *d)
{
	struct db_rows *r = query(d, "autovacuum", AUTOVACUUM_SQL, 0, NULL);
	if (!r)
		return;
	const char *on = db_rows_text(r, 0, 0), *counts = db_rows_text(r, 0, 1);
	long nap = atol(db_rows_text(r, 0, 2));
	const char *scale = db_rows_text(r, 0, 3);
	const char *rel = db_rows_value(r, 0, 4);
	int off = strcmp(db_rows_text(r, 0, 5), "t") == 0;
	int own = strcmp(db_rows_text(r, 0, 6), "t") == 0;
	char *detail = xasprintf(
		"autovacuum %s, track_counts %s, naptime %lds, scale factor "
		"%s; pgjob.jobs: %s",
		on, counts, nap, scale, rel && *rel ? rel : "no settings");
	if (strcmp(on, "on") != 0 || strcmp(counts, "on") != 0)
		add(d, ST_FAIL, "autovacuum",
		    "alter system set autovacuum = on; alter system set "
		    "track_counts = on; select pg_reload_conf();",
		    "%s", detail);
	else if (off)
		add(d, ST_FAIL, "autovacuum",
		    "alter table pgjob.jobs reset (autovacuum_enabled);", "%s",
		    detail);
	else if (!own)
		add(d, ST_WARN, "autovacuum",
		    PER_TABLE " -- as pgjob migrate "
			      "sets them",
		    "%s", detail);
	else if (nap > 60)
		add(d, ST_WARN, "autovacuum",
		    "alter system set autovacuum_naptime = '1min'; select "
		    "pg_reload_conf();",
		    "%s", detail);
	else
		add(d, ST_OK, "autovacuum", NULL, "%s", detail);
	free(detail);
	db_rows_free(r);
}

/* --- jobs -------------------------------------------------------------- */

static const char RUNNING_SQL[] =
	"select id, kind, extract(epoch from now() - attempted_at)::float8,"
	"  locked_until < now(), locked_by"
	" from pgjob.jobs where finished_at is null"
	"  and coalesce(parents_left, 0) = 0 and state = 'running'"
	" order by attempted_at limit 10000";

/* The timeout of kind: its handler's in the config, else the default. */
static int64_t
timeout_ms(const struct doctor *d, const char *kind)
{
	const struct config *c = d->cli->cfg;
	if (!c)
		return 5 * 60 * 1000; /* the default of defaults.timeout */
	const struct handler_conf *h = config_handler(c, kind);
	return h ? h->timeout_ms : c->default_timeout_ms;
}

/*
 * A worker stops a handler at its timeout and gives up a job whose lease
 * it cannot renew, so a job still running past its timeout, or with its
 * lease run out, is held by a worker that has stopped (or by a handler
 * that ignores its stop): it will be claimed again when its lease ends.
 */
static void
check_running(struct doctor *d)
{
	struct db_rows *r = query(d, "running jobs", RUNNING_SQL, 0, NULL);
	if (!r)
		return;
	struct buf ids = {0};
	int over = 0, expired = 0;
	char a[32];
	for (int i = 0; i < db_rows_count(r); i++) {
		double s = atof(db_rows_text(r, i, 2));
		int lapsed = strcmp(db_rows_text(r, i, 3), "t") == 0;
		int late = s * 1000. >
			   (double)timeout_ms(d, db_rows_text(r, i, 1));
		if (!lapsed && !late)
			continue;
		over += late;
		expired += lapsed;
		if (over + expired <= DOCTOR_IDS)
			buf_appendf(&ids, "%s%s (%s, %s on %s%s)",
				    ids.len ? ", " : "", db_rows_text(r, i, 0),
				    db_rows_text(r, i, 1),
				    cli_format_age(s, a, sizeof(a)),
				    db_rows_text(r, i, 4),
				    lapsed ? ", lease run out" : "");
	}
	if (over + expired == 0)
		add(d, ST_OK, "running jobs", NULL,
		    "%d running, none past its timeout%s", db_rows_count(r),
		    d->cli->cfg ? ""
				: " (5m assumed: give -c for the "
				  "handlers' timeouts)");
	else
		add(d, ST_WARN, "running jobs",
		    "pgjob show ID; check the worker that holds it (locked_by: "
		    "host:slot); the job is claimed again when its lease runs "
		    "out, or pgjob cancel it",
		    "%d past their timeout, %d with their lease run out: %s%s",
		    over, expired, ids.data,
		    over + expired > DOCTOR_IDS ? ", ..." : "");
	buf_free(&ids);
	db_rows_free(r);
}

static const char PENDING_KINDS_SQL[] =
	"select j.kind, count(*), exists (select 1 from pgjob.workers w"
	"   where j.kind = any(w.kinds)"
	"    and w.heartbeat_at >= now() - $1::bigint * interval '1 ms')"
	" from pgjob.jobs j where j.finished_at is null"
	"  and coalesce(j.parents_left, 0) = 0 and j.state = 'available'"
	" group by j.kind order by j.kind limit 1000";

static void
check_kinds(struct doctor *d)
{
	if (!d->cli->cfg) {
		add(d, ST_SKIP, "kinds without a handler",
		    "pgjob -c CONFIG doctor", "skipped: no config given (-c)");
		return;
	}
	char lease[24];
	snprintf(lease, sizeof(lease), "%lld", (long long)d->lease_ms);
	const char *p[] = {lease};
	struct db_rows *r =
		query(d, "kinds without a handler", PENDING_KINDS_SQL, 1, p);
	if (!r)
		return;
	int bad = 0;
	for (int i = 0; i < db_rows_count(r); i++) {
		const char *kind = db_rows_text(r, i, 0);
		if (config_handler(d->cli->cfg, kind))
			continue;
		int elsewhere = strcmp(db_rows_text(r, i, 2), "t") == 0;
		char *q = quoted(kind);
		add(d, ST_WARN, "kinds without a handler",
		    "add a handler for it to the config, or cancel its jobs "
		    "(pgjob jobs --kind KIND --state available)",
		    "kind %s: %s jobs wait, no handler in %s%s", q,
		    db_rows_text(r, i, 1), d->cli->cfg->path,
		    elsewhere ? " (a live worker of another config has one)"
			      : " nor in any live worker");
		free(q);
		bad++;
	}
	if (!bad)
		add(d, ST_OK, "kinds without a handler", NULL,
		    "every kind with jobs waiting has a handler in %s",
		    d->cli->cfg->path);
	db_rows_free(r);
}

/*
 * Jobs that no live worker serves (pgjob.unserved(), sql/032): a kind no
 * live worker handles, or a queue that no live worker of the kind claims
 * from (a typo at enqueue, a handler moved to another queue).  Unlike the
 * check above, this needs no config: it reads what the workers registered.
 */
static const char UNSERVED_SQL[] =
	"select kind, queue, jobs, kind_handled"
	" from pgjob.unserved($1::bigint * interval '1 ms') limit 100";

static void
check_unserved(struct doctor *d)
{
	char lease[24];
	snprintf(lease, sizeof(lease), "%lld", (long long)d->lease_ms);
	const char *p[] = {lease};
	struct db_rows *r =
		query(d, "jobs no worker serves", UNSERVED_SQL, 1, p);
	if (!r)
		return;
	for (int i = 0; i < db_rows_count(r); i++) {
		char *k = quoted(db_rows_text(r, i, 0));
		char *q = quoted(db_rows_text(r, i, 1));
		int handled = db_rows_text(r, i, 3)[0] == 't';
		add(d, ST_WARN, "jobs no worker serves",
		    "check the queue's name (a typo at enqueue?), give a "
		    "worker a handler for the kind in that queue, or cancel "
		    "them (pgjob jobs --queue QUEUE --kind KIND --state "
		    "available)",
		    "kind %s in queue %s: %s jobs wait, %s", k, q,
		    db_rows_text(r, i, 2),
		    handled ? "and no live worker takes that kind from that "
			      "queue"
			    : "and no live worker handles that kind");
		free(q);
		free(k);
	}
	if (db_rows_count(r) == 0)
		add(d, ST_OK, "jobs no worker serves", NULL,
		    "a live worker serves the kind and queue of every waiting "
		    "job");
	db_rows_free(r);
}

/* --- instances --------------------------------------------------------- */

static const char STALE_SQL[] =
	"select host, supervisor_pid, count(*),"
	"  extract(epoch from now() - max(heartbeat_at))::float8"
	" from pgjob.workers group by host, supervisor_pid"
	" having max(heartbeat_at) < now() - $1::bigint * interval '1 ms'"
	" order by 4 desc limit 100";

/* An instance is live while one of its workers' heartbeats is younger
 * than a lease (three heartbeat periods), as pgjob status counts them. */
static void
check_instances(struct doctor *d)
{
	char lease[24], a[32];
	snprintf(lease, sizeof(lease), "%lld", (long long)d->lease_ms);
	const char *p[] = {lease};
	struct db_rows *r = query(d, "instances", STALE_SQL, 1, p);
	if (!r)
		return;
	for (int i = 0; i < db_rows_count(r); i++)
		add(d, ST_WARN, "instances",
		    "check pgjobd on that host (systemctl status pgjobd); its "
		    "rows in pgjob.workers go a day after their last "
		    "heartbeat, its jobs are claimed again when their leases "
		    "run out",
		    "the instance on %s (supervisor pid %s, %s workers) "
		    "stopped heartbeating %s ago",
		    db_rows_text(r, i, 0), db_rows_text(r, i, 1),
		    db_rows_text(r, i, 2),
		    cli_format_age(atof(db_rows_text(r, i, 3)), a, sizeof(a)));
	if (db_rows_count(r) == 0)
		add(d, ST_OK, "instances", NULL,
		    "every instance in pgjob.workers heartbeats");
	db_rows_free(r);
}

/* --- the pooler -------------------------------------------------------- */

/*
 * Whether the database is reached through a pooler that shares server
 * sessions (db/pooler.c; the check wants a pristine connection, so it gets
 * one of its own).  Workers refuse such a pool at start; enqueuers may use
 * one.  So it is a failure for the config's database.conninfo (the
 * workers'), and a warning for a --database of the operator's own.
 */
static void
check_pooler(struct doctor *d)
{
	const char *conninfo = d->cli->database;
	bool workers = !conninfo && d->cli->cfg;
	char *err = NULL, *msg = NULL;

	if (!conninfo && d->cli->cfg)
		conninfo = d->cli->cfg->conninfo;
	struct db_conn *c = db_connect(conninfo, "pgjob doctor", &err);
	if (!c) {
		add(d, ST_FAIL, "pooler", NULL, "cannot connect: %s", err);
		free(err);
		return;
	}
	switch (pooler_check(c, &msg)) {
	case POOLER_DIRECT:
		add(d, ST_OK, "pooler", NULL,
		    "none: a direct connection to PostgreSQL");
		break;
	case POOLER_SESSION:
		add(d, ST_OK, "pooler", NULL,
		    "%s (a session pool works for workers)", msg);
		break;
	case POOLER_SHARED:
		add(d, workers ? ST_FAIL : ST_WARN, "pooler",
		    "point database.conninfo (the workers') at PostgreSQL or "
		    "at a session-mode pool; enqueuers may keep a "
		    "transaction pool",
		    "%s%s", msg,
		    workers ? ""
			    : " (this is --database; workers that "
			      "use it refuse to start)");
		break;
	case POOLER_UNKNOWN: /* msg says that it could not be checked */
		add(d, ST_WARN, "pooler", NULL, "%s", msg);
		break;
	case POOLER_ERROR:
		add(d, ST_WARN, "pooler", NULL, "could not be checked: %s",
		    msg);
		break;
	}
	free(msg);
	db_close(c);
}

/* --- output ------------------------------------------------------------ */

static void
print_text(const struct doctor *d)
{
	for (size_t i = 0; i < d->n; i++) {
		const struct item *it = &d->v[i];
		char *check = cli_one_line(it->check, SIZE_MAX);
		char *detail = cli_one_line(it->detail, SIZE_MAX);
		printf("%-4s  %s: %s\n", status_names[it->st], check, detail);
		if (it->fix) {
			char *fix = cli_one_line(it->fix, SIZE_MAX);
			printf("      fix: %s\n", fix);
			free(fix);
		}
		free(check);
		free(detail);
	}
}

static void
print_json(const struct doctor *d)
{
	cJSON *a = cJSON_CreateArray();
	for (size_t i = 0; i < d->n; i++) {
		const struct item *it = &d->v[i];
		cJSON *o = cJSON_CreateObject();
		char st[8];
		size_t k = 0;
		for (const char *s = status_names[it->st]; *s; s++)
			st[k++] = (char)(*s - 'A' + 'a');
		st[k] = '\0';
		/* Valid UTF-8 whatever the database's encoding holds. */
		cJSON_AddItemToObject(o, "check", cli_json_string(it->check));
		cJSON_AddStringToObject(o, "status", st);
		cJSON_AddItemToObject(o, "detail", cli_json_string(it->detail));
		if (it->fix)
			cJSON_AddItemToObject(o, "fix",
					      cli_json_string(it->fix));
		else
			cJSON_AddNullToObject(o, "fix");
		cJSON_AddItemToArray(a, o);
	}
	cli_json_print(a);
}

static int
parse(int argc, char **argv, int *json)
{
	int rc = cli_parse_json_only("doctor", argc, argv, json);

	if (rc != 0)
		return rc;
	if (optind < argc)
		return cli_fail(CLI_EXIT_USAGE,
				"doctor: unexpected argument \"%s\"",
				argv[optind]);
	return 0;
}

static void
run_checks(struct doctor *d)
{
	struct health_report r;
	char *err = NULL;
	int schema = check_schema(d);
	if (health_read_now(d->conn, HEALTH_HOLDERS, &r, &err) < 0) {
		add(d, ST_FAIL, "xmin horizon", NULL, "could not check: %s",
		    err);
		free(err);
	} else {
		check_horizon(d, &r);
		if (schema) {
			check_tables(d, &r);
			check_bloat(d, &r);
		}
		health_report_free(&r);
	}
	check_autovacuum(d);
	if (schema) {
		check_running(d);
		check_kinds(d);
		check_unserved(d);
		check_instances(d);
	}
	check_pooler(d);
}

int
cli_doctor_run(struct cli *cli, int argc, char **argv)
{
	struct doctor d = {.cli = cli};
	int json = 0, rc;

	if ((rc = parse(argc, argv, &json)) != 0)
		return rc;
	d.xmin_warn_ms = cli->cfg ? cli->cfg->health_xmin_warn_ms : 300000;
	d.lease_ms = cli->cfg ? cli->cfg->lease_ms : 30000;
	if (!(d.conn = cli_connect(cli)))
		return 2;
	char *err = NULL;
	struct db_rows *set =
		db_query(d.conn,
			 "select set_config('datestyle', 'ISO, YMD', false),"
			 " set_config('jit', 'off', false)",
			 0, NULL, &err);
	db_rows_free(set);
	free(err);
	run_checks(&d);
	db_close(d.conn);
	if (json)
		print_json(&d);
	else
		print_text(&d);
	enum status worst = ST_OK;
	for (size_t i = 0; i < d.n; i++) {
		if (d.v[i].st > worst)
			worst = d.v[i].st;
		free(d.v[i].check);
		free(d.v[i].detail);
		free(d.v[i].fix);
	}
	free(d.v);
	return worst == ST_FAIL ? 2 : worst == ST_WARN ? 1 : 0;
}
