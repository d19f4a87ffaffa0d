/*
 * claim_limited: the statements of flow control (docs/queues.md).  A queue
 * with a row in pgjob.limits is claimed by pgjob.claim_limited() alone,
 * one queue a statement, under its limits; its answer is read as the
 * ordinary claim's (claimed.c).  And the two writes a worker makes of
 * limits: the config's published again, a queue throttled.  Apart from
 * the ordinary claim: the limits' rules live in the schema's function,
 * and here is only their call.
 */
#include "db/claim_limited.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/failpoint.h"
#include "common/util.h"
#include "db/db.h"
#include "db/internal.h"

/* Column 13, as pgjob_claim's: a claimed job's time in the queue, which
 * the function gives in c_ra of its 'c' rows
 * (sql/upgrade/018_claim_limited_wait.sql).  Columns 14 to 16, its
 * traceparent (docs/tracing.md) and for a job in a trace its spans' times
 * before the attempt (claim.c says which), by pgjob.claimed_traces() once
 * for the claimed ids: a volatile function, whose snapshot is taken after
 * the claim's.  This statement's own snapshot is older than the ones
 * pgjob.claim_limited() claims under, and misses a job whose enqueue
 * committed in between (a join here read them before schema version 37, and
 * such a job ran outside its trace: test_trace's test_limited_race).  The
 * rows keep the function's order (ordinality). */
const char queue_claim_limited_sql[] =
	"with c as (select * from pgjob.claim_limited($1, $2::int,"
	"  $3::text[], $4, $5, $6::bigint, $7::bigint) with ordinality c),"
	" t as (select * from pgjob.claimed_traces("
	"  array(select c_id from c where c_t = 'c')))"
	" select c.c_t, c.c_id, c.c_kind, c.c_queue, c.c_payload,"
	" c.c_attempts, c.c_max_attempts, c.c_token, c.c_ordering_key, c.c_pr,"
	" c.c_ra, c.c_lost, c.c_bytes, case when c.c_t = 'c' then c.c_ra end,"
	" t.traceparent, t.since_created_us, t.since_due_us"
	" from c left join t on c.c_t = 'c' and t.id = c.c_id"
	" order by c.ordinality";

int
queue_claim_limited(struct dbev *d, const struct queue_limited_req *req,
		    queue_claim_fn *cb, void *arg)
{
	char want[16], lease[24], maxp[24];
	snprintf(want, sizeof(want), "%d", req->want);
	snprintf(lease, sizeof(lease), "%lld", (long long)req->lease_ms);
	snprintf(maxp, sizeof(maxp), "%lld", (long long)req->max_payload_bytes);
	char *kinds = db_text_array(req->kinds, req->nkinds);
	const char *p[] = {req->queue,	   want,  kinds, req->mode,
			   req->locked_by, lease, maxp};
	struct db_call call = DB_CALL(cb, arg);
	call.n = 1;
	call.names = xcalloc(2, sizeof(char *));
	call.names[0] = xstrdup(req->queue);
	dbev_failpoints(d, FP_CLAIM_SEND, FP_CLAIM_RESULT);
	int rc = dbev_call(d, "pgjob_claim_limited", 1,
			   QUEUE_CLAIM_LIMITED_NPARAMS, p, queue_claimed_read,
			   &call);
	free(kinds);
	return rc;
}

int
queue_publish_limits(struct dbev *d, const char *limits_json)
{
	const char *p[] = {limits_json};
	return dbev_send(d, "select pgjob.publish_limits($1::jsonb)", 1, p,
			 dbev_ignore, NULL);
}

int
queue_throttle(struct dbev *d, const char *queue, int64_t ms)
{
	char v[24];
	snprintf(v, sizeof(v), "%lld", (long long)ms);
	const char *p[] = {queue, v};
	return dbev_send(d, "select pgjob.throttle($1, $2::bigint)", 2, p,
			 dbev_ignore, NULL);
}
