-- A job of workflow wf and batch b (either null) ended in state st
-- (delta 1), or left that end for a retry (delta -1).  A batch whose last
-- job this was fires its callback.
create or replace function pgjob.count_end(wf bigint, b bigint, st text, delta int)
returns void
language plpgsql
as $$
begin
	if wf is not null then
		update pgjob.workflows w set ended = w.ended + delta,
			failed = w.failed + case when st <> 'done' then delta else 0 end,
			finished_at = case when w.ended + delta >= w.steps
				then coalesce(w.finished_at, now()) end
		 where w.id = wf;
	end if;
	if b is not null then
		update pgjob.batches x set
			done = x.done + case when st = 'done' then delta else 0 end,
			dead = x.dead + case when st = 'dead' then delta else 0 end,
			cancelled = x.cancelled
				+ case when st = 'cancelled' then delta else 0 end
		 where x.id = b;
		perform pgjob.batch_check(b);
	end if;
end
$$;
