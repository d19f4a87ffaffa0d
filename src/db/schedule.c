/*
 * schedule: the scheduler's statements.  See schedule.h.
 */
#include "db/schedule.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/failpoint.h"
#include "common/util.h"
#include "db/internal.h"

static const char *
value(const PGresult *res, int r, int c)
{
	return PQgetisnull(res, r, c) ? NULL : PQgetvalue(res, r, c);
}

static void
read_round(const struct db_call *c, const struct db_status *st,
	   const PGresult *res)
{
	int n = st->error == DB_OK ? PQntuples(res) : 0;
	struct schedule_row *rows = xcalloc((size_t)n + 1, sizeof(*rows));
	for (int r = 0; r < n; r++)
		rows[r] = (struct schedule_row){
			.name = PQgetvalue(res, r, 0),
			.cron = PQgetvalue(res, r, 1),
			.timezone = value(res, r, 2),
			.kind = PQgetvalue(res, r, 3),
			.payload = PQgetvalue(res, r, 4),
			.queue = PQgetvalue(res, r, 5),
			.catch_up_all =
				strcmp(PQgetvalue(res, r, 6), "all") == 0,
			.publisher = PQgetvalue(res, r, 7),
			.other = value(res, r, 8),
			.has_last_tick = !PQgetisnull(res, r, 9),
			.last_tick = strtoll(PQgetvalue(res, r, 9), NULL, 10),
			.now_us = strtoll(PQgetvalue(res, r, 10), NULL, 10),
			.enabled = strcmp(PQgetvalue(res, r, 11), "t") == 0,
			.has_run_request = !PQgetisnull(res, r, 12),
			.run_requested_us =
				strtoll(PQgetvalue(res, r, 12), NULL, 10),
		};
	((schedule_round_fn *)c->cb)(c->arg, st, rows, (size_t)n);
	free(rows);
}

int
schedule_round(struct dbev *d, int64_t window_ms, schedule_round_fn *cb,
	       void *arg)
{
	char window[24];
	snprintf(window, sizeof(window), "%lld", (long long)window_ms);
	const char *p[] = {window};
	struct db_call call = DB_CALL(cb, arg);
	return dbev_call(
		d,
		"with d as (select s.key as name, s.value as def,"
		"   w.host || '/' || w.pid as publisher,"
		"   row_number() over (partition by s.key"
		"    order by w.defined_at desc, w.host || '/' || w.pid desc)"
		"    as rank"
		"  from pgjob.workers w, jsonb_each(w.schedules) s"
		"  where w.heartbeat_at > now() - $1::bigint * interval '1 ms')"
		" select d.name, d.def->>'cron', d.def->>'timezone',"
		"  d.def->>'kind', d.def->'payload', d.def->>'queue',"
		"  d.def->>'catch_up', d.publisher,"
		"  (select o.publisher from d o where o.name = d.name"
		"    and o.def <> d.def order by o.rank limit 1),"
		"  extract(epoch from s.last_tick)::bigint,"
		"  (extract(epoch from now()) * 1000000)::bigint,"
		"  coalesce(s.enabled, true),"
		"  (extract(epoch from s.run_requested_at) * 1000000)::bigint"
		" from d left join pgjob.schedules s on s.name = d.name"
		" where d.rank = 1 order by d.name",
		0, 1, p, read_round, &call);
}

int
schedule_begin(struct dbev *d, const char *name)
{
	const char *p[] = {name};
	return dbev_send(d,
			 "insert into pgjob.schedules (name, last_tick)"
			 " values ($1, date_trunc('second', now()))"
			 " on conflict (name) do nothing",
			 1, p, dbev_ignore, NULL);
}

struct tick_ctx {
	schedule_ticked_fn *cb;
	void *arg;
};

static void
on_ticked(void *arg, PGresult **res, int n)
{
	struct tick_ctx *c = arg;
	char *t0, *t1;
	struct db_status fence = db_status_of(res[0], &t0);
	struct db_status enq = db_status_of(n > 1 ? res[1] : NULL, &t1);
	c->cb(c->arg, &fence, &enq);
	free(t0);
	free(t1);
	free(c);
}

int
schedule_tick(struct dbev *d, const char *lease, int64_t token,
	      const struct schedule_row *s, int64_t tick, const char *when,
	      schedule_ticked_fn *cb, void *arg)
{
	char epoch[24], tok[24];
	snprintf(epoch, sizeof(epoch), "%lld", (long long)tick);
	snprintf(tok, sizeof(tok), "%lld", (long long)token);
	char *key = xasprintf("schedule:%s:%s", s->name, when);
	const char *pf[] = {lease, tok};
	const char *pe[] = {s->name,  epoch, s->kind, s->payload,
			    s->queue, key,   when};
	struct dbev_stmt st[] = {
		{"select pgjob.fence($1, $2)", 2, NULL, pf, NULL},
		{"with s as (update pgjob.schedules"
		 "   set last_tick = to_timestamp($2::bigint)"
		 "   where name = $1 and last_tick < to_timestamp($2::bigint)"
		 "   returning 1)"
		 " select pgjob.enqueue($3,"
		 "  case when $4::jsonb ? 'pgjob' then $4::jsonb"
		 "   else $4::jsonb || jsonb_build_object('pgjob',"
		 "    jsonb_build_object('schedule', $1::text,"
		 "     'tick', $7::text))"
		 "  end,"
		 "  queue => $5, run_at => to_timestamp($2::bigint),"
		 "  unique_key => $6) from s",
		 7, NULL, pe, NULL},
	};
	struct tick_ctx *ctx = xcalloc(1, sizeof(*ctx));
	*ctx = (struct tick_ctx){cb, arg};
	dbev_failpoints(d, FP_SCHEDULE_TICK, 0);
	int rc = dbev_send_group(d, st, 2, on_ticked, ctx);
	free(key);
	return rc;
}

/* The fence and one statement after it, in one transaction (on_ticked). */
static int
send_fenced(struct dbev *d, const char *lease, int64_t token, const char *sql,
	    int nparams, const char *const *params, schedule_ticked_fn *cb,
	    void *arg)
{
	char tok[24];
	snprintf(tok, sizeof(tok), "%lld", (long long)token);
	const char *pf[] = {lease, tok};
	struct dbev_stmt st[] = {
		{"select pgjob.fence($1, $2)", 2, NULL, pf, NULL},
		{sql, nparams, NULL, params, NULL},
	};
	struct tick_ctx *ctx = xcalloc(1, sizeof(*ctx));
	*ctx = (struct tick_ctx){cb, arg};
	return dbev_send_group(d, st, 2, on_ticked, ctx);
}

int
schedule_skip(struct dbev *d, const char *lease, int64_t token,
	      const struct schedule_row *s, int64_t tick,
	      schedule_ticked_fn *cb, void *arg)
{
	char epoch[24];
	snprintf(epoch, sizeof(epoch), "%lld", (long long)tick);
	const char *p[] = {s->name, epoch};
	return send_fenced(d, lease, token,
			   "update pgjob.schedules"
			   " set last_tick = to_timestamp($2::bigint)"
			   " where name = $1 and not enabled"
			   "  and last_tick < to_timestamp($2::bigint)",
			   2, p, cb, arg);
}

int
schedule_run(struct dbev *d, const char *lease, int64_t token,
	     const struct schedule_row *s, schedule_ticked_fn *cb, void *arg)
{
	char req[24];
	snprintf(req, sizeof(req), "%lld", (long long)s->run_requested_us);
	const char *p[] = {s->name, req, s->kind, s->payload, s->queue};
	/* The request compared as it was read, to the microsecond. */
	return send_fenced(
		d, lease, token,
		"with o as (select run_requested_at as r from pgjob.schedules"
		"   where name = $1 and (extract(epoch from run_requested_at)"
		"    * 1000000)::bigint = $2::bigint),"
		" s as (update pgjob.schedules x set run_requested_at = null"
		"   from o where x.name = $1 and x.run_requested_at = o.r"
		"   returning to_char(o.r at time zone 'UTC',"
		"    'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') as at)"
		" select pgjob.enqueue($3,"
		"  case when $4::jsonb ? 'pgjob' then $4::jsonb"
		"   else $4::jsonb || jsonb_build_object('pgjob',"
		"    jsonb_build_object('schedule', $1::text,"
		"     'run_requested_at', s.at))"
		"  end,"
		"  queue => $5, unique_key => 'schedule:' || $1 || ':run:' || "
		"s.at)"
		" from s",
		5, p, cb, arg);
}
