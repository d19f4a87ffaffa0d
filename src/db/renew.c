/*
 * renew: the renewal of every lease a worker holds, in one statement:
 * each (id, token) still held is extended, and the answer says, per
 * attempt, whether it was, and whether an operator cancelled it.  Apart
 * from the claim and the finish: it runs on its own timer, and touches
 * only rows it holds.
 */
#include "db/renew.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/failpoint.h"
#include "common/util.h"
#include "db/db.h"
#include "db/internal.h"

/*
 * Renews every (id, token) still held; returns one row per job asked for:
 * id, renewed, whether an operator cancelled it (pgjob cancel sets a
 * running job's state to cancelled, and its worker stops the handler), and
 * the token asked for: an answer is about one attempt, and the worker may
 * hold the same job again under a newer token by the time it comes.
 *
 * Like the finish (finish.c): the rows by j.id = any($1), the token of
 * each at its position in $2 (DB_AT_ID(); queue_renew() sends the ids
 * sorted); and whether a job was cancelled, by a lookup per element that
 * OFFSET 0 keeps a lookup (a join could read the whole table).
 */
/* clang-format off */
const char queue_renew_sql[] =
	"with u as (update pgjob.jobs j"
	"  set locked_until = now() + $3::bigint * interval '1 millisecond',"
	/* The holder's name: a worker that reconnected to another slot
	 * moves its jobs there (session.c's slot_acquire()). */
	"   locked_by = $4::text"
	"  where j.id = any($1::bigint[])"
	"   and j.lease_token = " DB_AT_ID("$2", "bigint[]")
	/* Not j.state = 'running': the planner, which believes few jobs
	 * run, would read every entry of jobs_running_idx and join them to
	 * the batch, rather than look each job up by primary key.  Under a
	 * snapshot held open elsewhere that index keeps an entry for every
	 * job claimed since, and a renewal that read them all would hold up
	 * its worker's claims and ends behind it for seconds
	 * (tests/bench/churn.sh --snapshot). */
	"   and coalesce(j.state, '') = 'running'"
	/* In a queue with a concurrency limit, a lease that expired gave
	 * its slot back: it cannot be taken back (docs/queues.md). */
	"   and (j.locked_until >= clock_timestamp() or not exists ("
	"    select 1 from pgjob.limits l where l.queue = j.queue"
	"     and (l.global_concurrency is not null"
	"      or l.per_key_concurrency is not null)))"
	"  returning j.id)"
	" select r.id, r.id in (select id from u), coalesce(c.cancelled, false),"
	"  r.token"
	" from unnest($1::bigint[], $2::bigint[]) as r(id, token)"
	"  left join lateral (select j.state = 'cancelled'"
	"   and j.lease_token = r.token as cancelled from pgjob.jobs j"
	"   where j.id = r.id offset 0) c on true";
/* clang-format on */

static void
read_renew(const struct db_call *c, const struct db_status *st,
	   const PGresult *res)
{
	int rows = st->error == DB_OK ? PQntuples(res) : 0;
	struct queue_renewal *r = xcalloc((size_t)rows + 1, sizeof(*r));
	for (int k = 0; k < rows; k++)
		r[k] = (struct queue_renewal){
			.id = strtoll(PQgetvalue(res, k, 0), NULL, 10),
			.renewed = *PQgetvalue(res, k, 1) == 't',
			.cancelled = *PQgetvalue(res, k, 2) == 't',
			.token = strtoll(PQgetvalue(res, k, 3), NULL, 10),
		};
	((queue_renew_fn *)c->cb)(c->arg, st, r, (size_t)rows);
	free(r);
}

int
queue_renew(struct dbev *d, const int64_t *ids, const int64_t *tokens, size_t n,
	    int64_t lease_ms, const char *locked_by, queue_renew_fn *cb,
	    void *arg)
{
	/* In id order, each token beside its id (queue_renew_sql);
	 * db_cmp_int64 compares the first of a pair. */
	int64_t(*pairs)[2] = xcalloc(n + 1, sizeof(*pairs));
	for (size_t i = 0; i < n; i++) {
		pairs[i][0] = ids[i];
		pairs[i][1] = tokens[i];
	}
	qsort(pairs, n, sizeof(*pairs), db_cmp_int64);
	int64_t *sid = xcalloc(n + 1, sizeof(int64_t));
	int64_t *stok = xcalloc(n + 1, sizeof(int64_t));
	for (size_t i = 0; i < n; i++) {
		sid[i] = pairs[i][0];
		stok[i] = pairs[i][1];
	}
	char *a = db_int_array(sid, n);
	char *b = db_int_array(stok, n);
	free(pairs);
	free(sid);
	free(stok);
	char lease[24];
	snprintf(lease, sizeof(lease), "%lld", (long long)lease_ms);
	const char *p[] = {a, b, lease, locked_by};
	struct db_call call = DB_CALL(cb, arg);
	dbev_failpoints(d, FP_RENEW_SEND, FP_RENEW_RESULT);
	int rc = dbev_call(d, "pgjob_renew", 1, QUEUE_RENEW_NPARAMS, p,
			   read_renew, &call);
	free(a);
	free(b);
	return rc;
}
