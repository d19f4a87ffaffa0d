-- Batch b, once sealed with every job ended: done, and its callback
-- enqueued, once (its row is locked by the caller's update or here, and
-- finished_at is set in the same statement).
create or replace function pgjob.batch_check(b bigint) returns void
language plpgsql
as $$
declare
	x pgjob.batches;
	cb bigint;
begin
	select * into x from pgjob.batches where id = b for update;
	if not found or not x.sealed or x.finished_at is not null
	   or x.done + x.dead + x.cancelled < x.total then
		return;
	end if;
	if x.callback_kind is not null
	   and (x.callback_on = 'always' or x.dead + x.cancelled = 0) then
		insert into pgjob.jobs (kind, payload, queue)
		values (x.callback_kind, x.callback_payload || jsonb_build_object(
			'pgjob', jsonb_build_object('batch', jsonb_build_object(
				'id', x.id, 'name', x.name, 'total', x.total,
				'done', x.done, 'dead', x.dead,
				'cancelled', x.cancelled))),
			coalesce(x.callback_queue, 'default'))
		returning id into cb;
	end if;
	update pgjob.batches set finished_at = now(), callback_job = cb
	 where id = b;
end
$$;
