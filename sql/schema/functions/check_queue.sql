-- Refuses a queue that no worker's config defines and no job uses.
create or replace function pgjob.check_queue(q text) returns void
language plpgsql
as $$
declare
	known text;
begin
	if q is null or q = '' then
		raise exception 'pgjob: the queue must not be empty'
			using errcode = '22023';
	end if;
	if exists (select 1 from pgjob.queues where name = q)
	   or exists (select 1 from pgjob.jobs where queue = q)
	   or exists (select 1 from pgjob.limits where queue = q) then
		return;
	end if;
	select string_agg(quote_literal(name), ', ' order by name) into known
	  from (select name from pgjob.queues order by name limit 20) k;
	raise exception 'pgjob: unknown queue %', quote_literal(q)
		using errcode = '42704',
		hint = 'Known queues: ' || coalesce(known, 'none yet') ||
			'.  A queue is known once a worker whose config defines it has connected, or a job uses it.';
end
$$;
