-- The rows of jobs deleted (see the head of this file): of those of ids
-- that no longer exist, in pgjob.jobs nor in pgjob.jobs_done (where a job
-- done at a later attempt goes, since version 40).  Called in the statement that deleted them, it
-- sees them gone (a volatile function's statements see the effects of the
-- statement that calls it, once its argument has been computed).  Returns
-- how many rows it deleted.
create or replace function pgjob.forget_attempts(ids bigint[]) returns bigint
language sql
volatile
security definer
set search_path = pg_catalog, pg_temp
as $$
	with f as (delete from pgjob.attempts a
		where a.job_id = any(ids)
		  and not exists (select 1 from pgjob.jobs j
			where j.id = a.job_id)
		  and not exists (select 1 from pgjob.jobs_done d
			where d.id = a.job_id)
		returning 1)
	select count(*) from f
$$;
