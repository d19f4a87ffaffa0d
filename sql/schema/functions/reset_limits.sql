-- Drops what pgjob.set_limits() set: the configs' limits apply again (the
-- running workers publish theirs at once, on the notification).
create or replace function pgjob.reset_limits(queue text)
returns void
language plpgsql
as $$
#variable_conflict use_variable
begin
	perform pgjob.check_queue(queue);
	perform pgjob.apply_limits(queue, '{}', 'config', true);
	perform pg_notify('pgjob_limits', 'reset ' || queue);
end
$$;
