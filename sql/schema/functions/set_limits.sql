-- Changes q's limits at runtime: {"global_concurrency": 5, "rate": "10/s"};
-- a key set to null removes that limit, keys left out keep their value.
-- The limits are then the database's: the configs no longer change them
-- until pgjob.reset_limits(q).
create or replace function pgjob.set_limits(queue text, limits jsonb)
returns void
language plpgsql
as $$
#variable_conflict use_variable
begin
	perform pgjob.check_queue(queue);
	perform pgjob.apply_limits(queue, limits, 'sql', false);
end
$$;
