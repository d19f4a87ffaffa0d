/*
 * health: the read-only statement of the database health guard.  See
 * health.h.
 */
#include "db/health.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "common/util.h"
#include "db/internal.h"

/* At most this many pgjob tables and indexes are read (the schema has
 * fewer). */
#define HEALTH_MAX_RELS 64

/*
 * One statement, one row per thing watched, all with the same columns:
 *   what, name, n1, n2, n3, application_name, client_addr, state, since,
 *   xmin (holders: the transaction id it holds, as text)
 * holders:  n1 = xid age, n2 = seconds (null: unknown), n3 = pid
 * tables:   n1 = dead tuples, n2 = seconds since a vacuum (null: none),
 *           n3 = live tuples
 * indexes:  n1 = estimated bloat (0..1), n3 = bytes
 *
 * Holders: sessions of this database, and walsenders (a physical one has
 * no database, and holds the horizon for hot_standby_feedback), with a
 * snapshot (backend_xmin) or a transaction id (backend_xid: an idle
 * writing transaction in read committed has no snapshot but still holds
 * the horizon), the replication slots with an xmin (a logical slot's
 * catalog_xmin holds back only the catalogs, not pgjob's tables), and the
 * prepared transactions of this database.  Ordered by their age in
 * transactions, the horizon's true order across the three kinds; this
 * statement's own backend is left out.
 *
 * Not autovacuum's processes, nor the other processes without a database
 * (a backend still starting, the launchers): they hold a snapshot for a
 * moment (an ANALYZE, a read of the shared catalogs), with no user and no
 * start time, and were taken for a session of another role hidden from
 * this one (CI saw doctor warn about a backend "of user \"\"", 0
 * transactions old, and tell a superuser to grant itself pg_monitor).  No
 * grant or pg_terminate_backend() is the fix for them.  A session hidden
 * from this role (no pg_monitor) shows no backend_type, and stays: the
 * check counts what it cannot see.
 *
 * The index bloat estimate: a b-tree leaf holds, per entry, an 8-byte
 * tuple header, the key (the average widths from pg_stats, 8 bytes for an
 * expression or a column without statistics, rounded up to 8) and a 4-byte
 * line pointer, in pages of block_size less the page header (24) and the
 * b-tree special space (16), filled to the default fillfactor (90 %).
 * The pages that reltuples entries need this way, plus the meta page,
 * against relpages, gives the share not needed.  It ignores inner pages
 * and deduplication (both make it overstate a little), so it is a coarse
 * estimate of the kind of the well-known ioguix query; indexes under 10
 * pages, or not analyzed yet (reltuples < 0), count as 0.
 */
static const char health_sql[] =
	"with h as ("
	"  select 'backend' as what, usename::text as name,"
	"   greatest(age(backend_xmin), age(backend_xid))::float8 as n1,"
	"   extract(epoch from now() - coalesce(xact_start, query_start))"
	"    ::float8 as n2,"
	"   pid::bigint as n3, application_name::text as app,"
	"   client_addr::text as client, state::text as state,"
	"   coalesce(xact_start, query_start) as since,"
	"   coalesce(backend_xmin, backend_xid)::text as xmin"
	"  from pg_stat_activity"
	"  where (backend_xmin is not null or backend_xid is not null)"
	"   and pid <> pg_backend_pid()"
	"   and coalesce(backend_type, '') not like 'autovacuum%'"
	"   and (datname = current_database()"
	"    or (datid is null"
	"     and coalesce(backend_type, 'walsender') = 'walsender'))"
	"  union all"
	"  select 'replication_slot', slot_name::text, age(xmin)::float8,"
	"   null, active_pid::bigint, null, null,"
	"   case when active then 'active' else 'inactive' end, null,"
	"   xmin::text"
	"  from pg_replication_slots where xmin is not null"
	"  union all"
	"  select 'prepared_xact', gid, age(transaction)::float8,"
	"   extract(epoch from now() - prepared)::float8, null, null, null,"
	"   null, prepared, transaction::text"
	"  from pg_prepared_xacts where database = current_database())"
	" (select * from h order by n1 desc, n2 desc nulls last limit $1)"
	" union all"
	" (select 'table', relname::text, n_dead_tup::float8,"
	"   extract(epoch from now() - greatest(last_vacuum,"
	"    last_autovacuum))::float8,"
	"   n_live_tup, null, null, null,"
	"   greatest(last_vacuum, last_autovacuum), null"
	"  from pg_stat_user_tables where schemaname = 'pgjob'"
	"  order by relname limit $2)"
	" union all"
	" (select 'index', c.relname::text,"
	"   case when c.relpages < 10 or c.reltuples < 0 then 0"
	"    else greatest(0, 1 - (1 + ceil(c.reltuples"
	"     * (12 + ceil(kw.w / 8.0) * 8)"
	"     / ((current_setting('block_size')::int - 40) * 0.9)))"
	"     / c.relpages) end::float8,"
	"   null, c.relpages::bigint"
	"    * current_setting('block_size')::bigint,"
	"   null, null, null, null, null"
	"  from pg_index i"
	"  join pg_class c on c.oid = i.indexrelid"
	"  join pg_class t on t.oid = i.indrelid"
	"  join pg_namespace n on n.oid = c.relnamespace"
	"  join pg_am am on am.oid = c.relam"
	"  cross join lateral (select coalesce(sum(coalesce(s.avg_width, 8)),"
	"    8) as w"
	"   from unnest(i.indkey::int2[]) k(attnum)"
	"   left join pg_attribute a on a.attrelid = i.indrelid"
	"    and a.attnum = k.attnum"
	"   left join pg_stats s on s.schemaname = n.nspname"
	"    and s.tablename = t.relname and s.attname = a.attname) kw"
	"  where n.nspname = 'pgjob' and am.amname = 'btree'"
	"  order by c.relname limit $2)";

const char *
health_kind_name(enum health_kind k)
{
	static const char *const names[HEALTH_KINDS] = {
		"backend", "replication_slot", "prepared_xact"};
	return k < HEALTH_KINDS ? names[k] : "unknown";
}

static char *
text_or_null(const PGresult *res, int row, int col)
{
	return PQgetisnull(res, row, col) ? NULL
					  : xstrdup(PQgetvalue(res, row, col));
}

static double
num(const PGresult *res, int row, int col, double null)
{
	return PQgetisnull(res, row, col)
		       ? null
		       : strtod(PQgetvalue(res, row, col), NULL);
}

/* Fills r from the rows of health_sql. */
static void
parse(const PGresult *res, struct health_report *r)
{
	int n = PQntuples(res);
	memset(r, 0, sizeof(*r));
	r->holders = xcalloc((size_t)n + 1, sizeof(*r->holders));
	r->tables = xcalloc((size_t)n + 1, sizeof(*r->tables));
	r->indexes = xcalloc((size_t)n + 1, sizeof(*r->indexes));
	for (int i = 0; i < n; i++) {
		const char *what = PQgetvalue(res, i, 0);
		if (strcmp(what, "table") == 0) {
			struct health_table *t = &r->tables[r->ntables++];
			t->name = text_or_null(res, i, 1);
			t->dead = (long long)num(res, i, 2, 0);
			t->vacuum_age_s = num(res, i, 3, -1);
			t->live = (long long)num(res, i, 4, 0);
		} else if (strcmp(what, "index") == 0) {
			struct health_index *x = &r->indexes[r->nindexes++];
			x->name = text_or_null(res, i, 1);
			x->bloat = num(res, i, 2, 0);
			x->bytes = (long long)num(res, i, 4, 0);
		} else {
			struct health_holder *h = &r->holders[r->nholders++];
			h->kind = strcmp(what, "backend") == 0 ? HEALTH_BACKEND
				  : strcmp(what, "replication_slot") == 0
					  ? HEALTH_SLOT
					  : HEALTH_PREPARED;
			h->name = text_or_null(res, i, 1);
			h->xids = (long long)num(res, i, 2, 0);
			h->age_s = num(res, i, 3, -1);
			h->pid = (int)num(res, i, 4, 0);
			h->application_name = text_or_null(res, i, 5);
			h->client_addr = text_or_null(res, i, 6);
			h->state = text_or_null(res, i, 7);
			h->since = text_or_null(res, i, 8);
			h->xmin = text_or_null(res, i, 9);
		}
	}
}

void
health_report_free(struct health_report *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->nholders; i++) {
		struct health_holder *h = &r->holders[i];
		free(h->name);
		free(h->application_name);
		free(h->client_addr);
		free(h->state);
		free(h->since);
		free(h->xmin);
	}
	for (size_t i = 0; i < r->ntables; i++)
		free(r->tables[i].name);
	for (size_t i = 0; i < r->nindexes; i++)
		free(r->indexes[i].name);
	free(r->holders);
	free(r->tables);
	free(r->indexes);
	memset(r, 0, sizeof(*r));
}

const char *
health_client(const struct health_holder *h)
{
	if (h->client_addr)
		return h->client_addr;
	return h->state ? "local" : "unknown";
}

/* 1 when the character at p needs an escape in the literal: a backslash,
 * a control character (C0, DEL or C1) or a byte that is not UTF-8.  *len
 * is its length in bytes (1 for such a byte), *cp its code point. */
static int
needs_escape(const char *p, size_t *len, uint32_t *cp)
{
	*len = text_char(p, cp);
	if (*len == 0) {
		*len = 1;
		*cp = (unsigned char)*p;
		return 1;
	}
	return *p == '\\' || text_is_control(*cp);
}

char *
health_sql_literal(const char *s)
{
	struct buf b = {0};
	size_t n;
	uint32_t cp;
	int e = 0;
	for (const char *p = s; *p; p += n)
		e |= needs_escape(p, &n, &cp);
	buf_append(&b, e ? "E'" : "'", e ? 2 : 1);
	for (; *s; s += n) {
		int esc = needs_escape(s, &n, &cp);
		if (*s == '\'')
			buf_append(&b, "''", 2);
		else if (*s == '\\')
			buf_append(&b, "\\\\", 2);
		else if (!esc)
			buf_append(&b, s, n);
		else if (n == 1)
			buf_appendf(&b, "\\x%02x", (unsigned char)*s);
		else
			buf_appendf(&b, "\\u%04x", (unsigned)cp); /* C1 */
	}
	buf_append(&b, "'", 1);
	return b.data;
}

char *
health_fix(const struct health_holder *h)
{
	char *lit, *fix;
	if (h->kind == HEALTH_BACKEND)
		return xasprintf("select pg_terminate_backend(%d)", h->pid);
	lit = health_sql_literal(h->name ? h->name : "");
	if (h->kind == HEALTH_SLOT)
		fix = xasprintf("select pg_drop_replication_slot(%s)", lit);
	else
		fix = xasprintf("rollback prepared %s", lit);
	free(lit);
	return fix;
}

static void
read_health(const struct db_call *c, const struct db_status *st,
	    const PGresult *res)
{
	struct health_report r;
	if (st->error != DB_OK) {
		((health_fn *)c->cb)(c->arg, st, NULL);
		return;
	}
	parse(res, &r);
	((health_fn *)c->cb)(c->arg, st, &r);
	health_report_free(&r);
}

int
health_read(struct dbev *d, int max_holders, health_fn *cb, void *arg)
{
	char lim[16], rels[16];
	snprintf(lim, sizeof(lim), "%d", max_holders);
	snprintf(rels, sizeof(rels), "%d", HEALTH_MAX_RELS);
	const char *p[] = {lim, rels};
	struct db_call call = DB_CALL(cb, arg);
	return dbev_call(d, health_sql, 0, 2, p, read_health, &call);
}

/* health_read_now() with at most max_rels tables and indexes (0: none;
 * a LIMIT 0 reads neither, and the indexes' bloat estimate, which joins
 * pg_stats, is most of the statement's time). */
static int
read_now(struct db_conn *c, int max_holders, int max_rels,
	 struct health_report *out, char **err)
{
	char lim[16], rels[16];
	snprintf(lim, sizeof(lim), "%d", max_holders);
	snprintf(rels, sizeof(rels), "%d", max_rels);
	const char *p[] = {lim, rels};
	PGconn *pg = db_pgconn(c);
	PGresult *res = PQexecParams(pg, health_sql, 2, NULL, p, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		*err = db_error_text(pg, res);
		PQclear(res);
		return -1;
	}
	parse(res, out);
	PQclear(res);
	return 0;
}

int
health_read_now(struct db_conn *c, int max_holders, struct health_report *out,
		char **err)
{
	return read_now(c, max_holders, HEALTH_MAX_RELS, out, err);
}

int
health_read_holders_now(struct db_conn *c, int max_holders,
			struct health_report *out, char **err)
{
	return read_now(c, max_holders, 0, out, err);
}
