-- Enables or disables schedule name; returns whether it was enabled
-- before.
create or replace function pgjob.schedule_enable(name text, enabled boolean default true)
returns boolean
language plpgsql
as $$
#variable_conflict use_variable
declare
	was boolean;
begin
	if enabled is null then
		raise exception 'pgjob.schedule_enable: enabled must be true or false'
			using errcode = '22004';
	end if;
	perform pgjob.schedule_row(name);
	select s.enabled into was from pgjob.schedules s
	 where s.name = name for update;
	update pgjob.schedules s set enabled = schedule_enable.enabled
	 where s.name = name;
	return was;
end
$$;
