/*
 * lease: slot locks and the worker registry.
 */
#include "lease.h"

#include <stdio.h>
#include <stdlib.h>

#include "db.h"
#include "failpoint.h"
#include "util.h"

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
		"  started_at = now(), heartbeat_at = now()",
		6, NULL, p, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		return failed(conn, res, "registering the worker", err);
	PQclear(res);
	return 0;
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
