-- A job of a workflow or a batch that had ended runs again (pgjob retry):
-- its end no longer counts.  A batch whose callback was enqueued stays
-- done.
create or replace function pgjob.jobs_reopened() returns trigger
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
begin
	perform pgjob.count_end(new.workflow_id, new.batch_id, old.state, -1);
	return null;
end
$$;
