-- Any change of what a limit row says (not of its tokens or cursor) wakes
-- the workers: they claim at once, and so see it.
create or replace function pgjob.limits_notify() returns trigger
language plpgsql
as $$
begin
	if tg_op = 'DELETE' then
		perform pg_notify('pgjob_limits', old.queue);
	else
		perform pg_notify('pgjob_limits', new.queue);
	end if;
	return null;
end
$$;
