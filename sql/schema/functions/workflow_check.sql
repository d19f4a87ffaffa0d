-- What pgjob.workflow_step() checked of a step before it enqueued it, with
-- the same messages: the slow path of enqueue_workflow(), which finds the
-- step its one-pass check refused.  parents: whether the step has any.
create or replace function pgjob.workflow_check(fn text, st jsonb, parents boolean)
returns void
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
declare
	w text := format('%s: step "%s"', fn, st ->> 'name');
	c record;
	pr int;
	ma int;
	co int;
	ra timestamptz;
	pol text;
begin
	begin
		pr := coalesce((st ->> 'priority')::int, 0);
		ma := (st ->> 'max_attempts')::int;
		co := coalesce((st ->> 'cost')::int, 1);
		ra := (st ->> 'run_at')::timestamptz;
	exception when others then
		raise exception '%: %', w, sqlerrm using errcode = '22023';
	end;
	select * into c from pgjob.check_job(w, st ->> 'kind',
		coalesce(st -> 'payload', '{}'), ra, pr, ma, co);
	if parents then
		pol := coalesce(st ->> 'on_parent_failure', 'cancel');
		if pol not in ('cancel', 'run', 'wait') then
			raise exception 'pgjob.enqueue: on_parent_failure must be cancel, run or wait, not "%"',
				pol using errcode = '22023';
		end if;
		if c.checked ? 'pgjob' then
			raise exception 'pgjob.enqueue: a job with parents cannot have a "pgjob" key in its payload'
				using errcode = '22023',
				hint = 'Its parents'' results go there ("pgjob": {"parents": ...}).';
		end if;
	elsif st ? 'on_parent_failure' then
		raise exception '%: on_parent_failure needs after', w
			using errcode = '22023';
	end if;
end
$$;
