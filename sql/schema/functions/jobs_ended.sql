-- The row trigger: a job with children, or of a workflow or a batch,
-- ended.  It counts the end, then releases or cancels the children;
-- children cancelled by it are ended too, and their children are taken in
-- turn here (not by the trigger nested in this one, which only counts:
-- a chain of a thousand would otherwise nest a thousand deep).
create or replace function pgjob.jobs_ended() returns trigger
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
	work bigint[];
	i int := 1;
	r record;
	due int := 0;
begin
	if new.workflow_id is not null or new.batch_id is not null then
		perform pgjob.count_end(new.workflow_id, new.batch_id, new.state, 1);
	end if;
	if new.children is not true
	   or current_setting('pgjob.releasing', true) = 'on' then
		return null;
	end if;
	perform set_config('pgjob.releasing', 'on', true);
	select * into r from pgjob.parent_ended(new.id, new.state,
		coalesce(new.step, new.id::text));
	work := r.cancelled;
	due := r.due;
	while i <= cardinality(work) loop
		select pe.* into r from pgjob.jobs j
		 cross join lateral pgjob.parent_ended(j.id, j.state,
			coalesce(j.step, j.id::text)) pe
		 where j.id = work[i] and j.children;
		i := i + 1;
		if found then
			work := work || r.cancelled;
			due := due + r.due;
		end if;
	end loop;
	perform set_config('pgjob.releasing', '', true);
	if due > 0 then
		perform pg_notify('pgjob', pg_current_xact_id()::text || ' ' || due);
	end if;
	return null;
end
$$;
