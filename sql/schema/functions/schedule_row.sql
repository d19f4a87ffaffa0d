-- The row of schedule name, made if it has not ticked yet (its ticks then
-- count from now on, as when the scheduler first sees it); refuses a name
-- that no worker defines and no row has.
create or replace function pgjob.schedule_row(name text) returns void
language plpgsql
as $$
#variable_conflict use_variable
declare
	known text;
begin
	if exists (select 1 from pgjob.schedules s where s.name = name) then
		return;
	end if;
	if not exists (select 1 from pgjob.workers w
			where w.schedules ? name) then
		select string_agg(quote_literal(l.name), ', ' order by l.name)
		  into known
		  from (select l.name from pgjob.schedule_list l
			 order by l.name limit 20) l;
		raise exception 'pgjob: unknown schedule %',
			quote_literal(coalesce(name, 'null'))
			using errcode = '42704',
			hint = 'Known schedules: ' || coalesce(known, 'none yet') ||
				'.  A schedule is known once a worker whose config defines it has connected.';
	end if;
	insert into pgjob.schedules (name, last_tick)
	values (name, date_trunc('second', now()))
	on conflict do nothing;
end
$$;
