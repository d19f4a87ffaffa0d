/*
 * jobctl: the statements of the operator's hand.  See jobctl.h.
 */
#include "db/jobctl.h"

const char jobctl_retry_pick_sql[] =
	"with c as (select id, unique_key from pgjob.jobs"
	"  where id = any($1::bigint[])"
	"   and state = any($2::text[])"
	"   and (state <> 'available'"
	"    or attempts > 0 or last_error is not null)"
	"  for update)"
	" select coalesce(array_agg(id order by id), '{}') from ("
	"  select id from c where unique_key is null"
	"  union all"
	"  select max(c.id) from c where c.unique_key is not null"
	"   and not exists (select 1 from pgjob.jobs o"
	"    where o.unique_key = c.unique_key"
	"     and o.finished_at is null and coalesce(o.parents_left, 0) = 0"
	"     and o.id not in (select id from c))"
	"   group by c.unique_key) s";

const char jobctl_restore_done_sql[] =
	"select pgjob.restore_done($1::bigint[])";

/* e.n: the edges of each job whose parent's end it has not counted. */
const char jobctl_retry_sql[] =
	"with e as (select p.id,"
	"   count(d.child) filter (where d.resolved is null) as n"
	"  from unnest($1::bigint[]) p(id)"
	"  left join pgjob.job_deps d on d.child = p.id group by p.id)"
	" update pgjob.jobs j set"
	"  state = case when j.parents_left > 0 and e.n > 0"
	"   then 'waiting' else 'available' end,"
	"  parents_left = case when j.parents_left > 0 then e.n::int"
	"   else j.parents_left end,"
	"  payload = case when j.parents_left > 0 and e.n = 0"
	"   then pgjob.with_parent(j.payload, coalesce((select x.add"
	"    from pgjob.parents_of(array[j.id]) x), '{}'))"
	"   else j.payload end,"
	"  run_at = now(),"
	"  attempts = 0, lost_attempts = 0, snoozes = 0, finished_at = null,"
	"  locked_by = null,"
	"  locked_until = null"
	" from e where j.id = e.id returning j.state, j.id";

const char jobctl_cancel_sql[] =
	"update pgjob.jobs set state = 'cancelled', finished_at = now(),"
	"  locked_by = null, locked_until = null"
	" where id = any($1::bigint[])"
	"  and state = any($2::text[])";

const char jobctl_pause_sql[] = "select pgjob.pause(queue => $1, kind => $2)";
const char jobctl_resume_sql[] = "select pgjob.resume(queue => $1, kind => $2)";
const char jobctl_set_limits_sql[] =
	"select pgjob.set_limits(queue => $1, limits => $2::jsonb)";
const char jobctl_reset_limits_sql[] = "select pgjob.reset_limits(queue => $1)";
