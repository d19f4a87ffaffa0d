/*
 * lease: slot locks, the worker registry, and named leases.
 */
#include "db/lease.h"

#include <stdio.h>
#include <stdlib.h>

#include "common/config.h"
#include "db/db.h"
#include "common/failpoint.h"
#include "db/queue.h"
#include "common/util.h"

static int
failed(PGconn *conn, PGresult *res, const char *what, char **err)
{
	char *text = db_error_text(conn, res);
	*err = xasprintf("%s: %s", what, text);
	free(text);
	PQclear(res);
	return -1;
}

int
lease_slot_acquire(PGconn *conn, int64_t lock_class, int max_slots, char **err)
{
	char cls[24], max[16];
	snprintf(cls, sizeof(cls), "%lld", (long long)lock_class);
	snprintf(max, sizeof(max), "%d", max_slots);
	const char *p[] = {cls, max};
	/* The filter runs row by row in order and LIMIT stops at the first
	 * lock taken, so at most one slot is locked: the lowest free one. */
	PGresult *res =
		PQexecParams(conn,
			     "select n from generate_series(1, $2::int) n"
			     " where pg_try_advisory_lock($1::int, n) limit 1",
			     2, NULL, p, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		return failed(conn, res, "taking a slot", err);
	int slot = PQntuples(res) ? atoi(PQgetvalue(res, 0, 0)) : 0;
	PQclear(res);
	return slot;
}

int
lease_worker_register(PGconn *conn, const struct lease_worker *w, char **err)
{
	char slot[16], pid[16], spid[16];
	snprintf(slot, sizeof(slot), "%d", w->slot);
	snprintf(pid, sizeof(pid), "%d", w->pid);
	snprintf(spid, sizeof(spid), "%d", w->supervisor_pid);
	const char *p[] = {slot, w->host, pid, spid, w->version, w->kinds};
	PGresult *res = PQexecParams(
		conn,
		"insert into pgjob.workers (slot, host, pid, supervisor_pid,"
		"  version, kinds)"
		" values ($1, $2, $3, $4, $5, $6::text[])"
		" on conflict (slot) do update set host = excluded.host,"
		"  pid = excluded.pid, supervisor_pid = "
		"excluded.supervisor_pid,"
		"  version = excluded.version, kinds = excluded.kinds,"
		"  tasks = '{}', schedules = '{}', defined_at = null,"
		"  started_at = now(), heartbeat_at = now()",
		6, NULL, p, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		return failed(conn, res, "registering the worker", err);
	PQclear(res);
	return 0;
}

int
lease_worker_publish(struct dbev *d, int slot, int pid,
		     const struct config *cfg, const char *defined_at,
		     dbev_result_fn cb, void *arg)
{
	size_t nt = cfg ? cfg->ntasks : 0, ns = cfg ? cfg->nschedules : 0;
	const char **tn = xcalloc(nt + 1, sizeof(char *));
	int64_t *tp = xcalloc(nt + 1, sizeof(int64_t));
	const char **col[7];
	for (int k = 0; k < 7; k++)
		col[k] = xcalloc(ns + 1, sizeof(char *));
	for (size_t i = 0; i < nt; i++) {
		tn[i] = cfg->tasks[i].name;
		tp[i] = cfg->tasks[i].partitions;
	}
	for (size_t i = 0; i < ns; i++) {
		const struct schedule_conf *s = &cfg->schedules[i];
		const struct handler_conf *h = config_handler(cfg, s->kind);
		col[0][i] = s->name;
		col[1][i] = s->cron;
		col[2][i] = s->timezone;
		col[3][i] = s->kind;
		col[4][i] = s->payload;
		col[5][i] = s->queue ? s->queue : h ? h->queue : "default";
		col[6][i] = s->catch_up_all ? "all" : "latest";
	}
	char sl[16], pd[16];
	snprintf(sl, sizeof(sl), "%d", slot);
	snprintf(pd, sizeof(pd), "%d", pid);
	/* Arrays by the one escaping writer; the JSON is built by the
	 * database, so no name or payload is ever spliced into text. */
	char *a[9] = {queue_text_array(tn, nt), queue_int_array(tp, nt)};
	for (int k = 0; k < 7; k++)
		a[2 + k] = queue_text_array(col[k], ns);
	const char *p[] = {sl,	 pd,   a[0], a[1], a[2], a[3],
			   a[4], a[5], a[6], a[7], a[8], defined_at};
	int rc = dbev_send(
		d,
		"update pgjob.workers set"
		" tasks = coalesce((select jsonb_object_agg(n, p)"
		"  from unnest($3::text[], $4::int[]) t(n, p)), '{}'),"
		" schedules = coalesce((select jsonb_object_agg(n,"
		"   jsonb_build_object('cron', c, 'timezone', z, 'kind', k,"
		"    'payload', j::jsonb, 'queue', q, 'catch_up', u))"
		"  from unnest($5::text[], $6::text[], $7::text[],"
		"   $8::text[], $9::text[], $10::text[], $11::text[])"
		"   s(n, c, z, k, j, q, u)), '{}'),"
		" defined_at = coalesce($12::timestamptz, now())"
		" where slot = $1 and pid = $2"
		" returning to_char(defined_at at time zone 'UTC',"
		"  'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')",
		12, p, cb, arg);
	for (int k = 0; k < 9; k++)
		free(a[k]);
	for (int k = 0; k < 7; k++)
		free(col[k]);
	free(tn);
	free(tp);
	return rc;
}

int
lease_task_workers(struct dbev *d, const struct config *cfg, int64_t window_ms,
		   dbev_result_fn cb, void *arg)
{
	size_t nt = cfg->ntasks;
	const char **tn = xcalloc(nt + 1, sizeof(char *));
	int64_t *tp = xcalloc(nt + 1, sizeof(int64_t));
	for (size_t i = 0; i < nt; i++) {
		tn[i] = cfg->tasks[i].name;
		tp[i] = cfg->tasks[i].partitions;
	}
	char *a = queue_text_array(tn, nt), *b = queue_int_array(tp, nt);
	char ms[24];
	snprintf(ms, sizeof(ms), "%lld", (long long)window_ms);
	const char *p[] = {a, b, ms};
	int rc = dbev_send(
		d,
		"select t.i, count(w.slot)"
		" from unnest($1::text[], $2::int[]) with ordinality"
		"  t(name, partitions, i)"
		" left join pgjob.workers w"
		"  on w.heartbeat_at > now() - $3::bigint * interval '1 ms'"
		"  and w.tasks -> t.name = to_jsonb(t.partitions)"
		" group by t.i",
		3, p, cb, arg);
	free(a);
	free(b);
	free(tn);
	free(tp);
	return rc;
}

int
lease_worker_heartbeat(struct dbev *d, int slot, int pid, dbev_result_fn cb,
		       void *arg)
{
	char s[16], p[16];
	snprintf(s, sizeof(s), "%d", slot);
	snprintf(p, sizeof(p), "%d", pid);
	const char *params[] = {s, p};
	dbev_failpoints(d, FP_HEARTBEAT_SEND, 0);
	return dbev_send(d,
			 "update pgjob.workers set heartbeat_at = now()"
			 " where slot = $1 and pid = $2",
			 2, params, cb, arg);
}

void
lease_worker_unregister(PGconn *conn, int slot, int pid)
{
	char s[16], p[16];
	snprintf(s, sizeof(s), "%d", slot);
	snprintf(p, sizeof(p), "%d", pid);
	const char *params[] = {s, p};
	PQclear(PQexecParams(conn,
			     "delete from pgjob.workers"
			     " where slot = $1 and pid = $2",
			     2, NULL, params, NULL, NULL, 0));
}

int
lease_acquire(struct dbev *d, const char *name, const char *holder, int64_t ms,
	      dbev_result_fn cb, void *arg)
{
	char m[24];
	snprintf(m, sizeof(m), "%lld", (long long)ms);
	const char *p[] = {name, holder, m};
	dbev_failpoints(d, FP_LEASE_ACQUIRE, 0);
	return dbev_send(
		d,
		"insert into pgjob.leases as l (name, holder, token, "
		"expires_at)"
		" values ($1, $2, 1, now() + $3::bigint * interval '1 ms')"
		" on conflict (name) do update set holder = excluded.holder,"
		"  token = l.token + 1, expires_at = excluded.expires_at"
		"  where l.expires_at is null or l.expires_at < now()"
		"   or l.holder = excluded.holder"
		" returning token",
		3, p, cb, arg);
}

int
lease_renew(struct dbev *d, const char *name, const char *holder, int64_t token,
	    int64_t ms, dbev_result_fn cb, void *arg)
{
	char t[24], m[24];
	snprintf(t, sizeof(t), "%lld", (long long)token);
	snprintf(m, sizeof(m), "%lld", (long long)ms);
	const char *p[] = {name, holder, t, m};
	return dbev_send(
		d,
		"update pgjob.leases"
		" set expires_at = now() + $4::bigint * interval '1 ms'"
		" where name = $1 and holder = $2 and token = $3"
		"  and expires_at >= now()"
		" returning token",
		4, p, cb, arg);
}

int
lease_release(struct dbev *d, const char *name, const char *holder,
	      int64_t token, dbev_result_fn cb, void *arg)
{
	char t[24];
	snprintf(t, sizeof(t), "%lld", (long long)token);
	const char *p[] = {name, holder, t};
	return dbev_send(d,
			 "update pgjob.leases set holder = null,"
			 "  expires_at = null"
			 " where name = $1 and holder = $2 and token = $3"
			 " returning token",
			 3, p, cb, arg);
}
