-- Pauses queue, or only its jobs of kind (docs/queues.md, "Pause and
-- resume"); resume() undoes it.  Its row's change is announced on channel
-- pgjob_limits.
create or replace function pgjob.pause(queue text, kind text default null)
returns void
language plpgsql
as $$
#variable_conflict use_variable
begin
	perform pgjob.check_queue(queue);
	if kind = '' then
		raise exception 'pgjob.pause: the kind must not be empty'
			using errcode = '22023';
	end if;
	insert into pgjob.limits as l (queue, paused, paused_kinds)
	values (queue, kind is null, case when kind is null then '{}'
		else array[kind] end)
	on conflict on constraint limits_pkey do update
	   set paused = l.paused or kind is null,
	       paused_kinds = case when kind is null or kind = any(l.paused_kinds)
		then l.paused_kinds else l.paused_kinds || kind end,
	       updated_at = now();
end
$$;
