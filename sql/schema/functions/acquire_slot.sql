-- Holds one of q's concurrency slots (and one of key's, with
-- per_key_concurrency) until pgjob.release_slot(), or until ttl passes
-- without pgjob.renew_slot(): the application's share of the limit its
-- jobs obey.  Returns the hold's id, or null when the limit is reached.
-- Like take_rate(), it locks q's limit row until the transaction ends.  A
-- slot acquired counts against an unlocked claim's bound (running_ub) at
-- once.  The hold records the role that took it (held_by): only it may
-- release or renew it by id.
create or replace function pgjob.acquire_slot(queue text, key text default null,
	ttl interval default '1 minute', holder text default null)
returns bigint
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_variable
declare
	l pgjob.limits;
	clk timestamptz;
	b int;
	new_id bigint;
begin
	if ttl is null or ttl <= interval '0' or ttl > interval '1 day' then
		raise exception 'pgjob.acquire_slot: ttl must be more than 0 and at most a day, not %',
			ttl using errcode = '22023';
	end if;
	select * into l from pgjob.limits x where x.queue = queue for update;
	if not found or (l.global_concurrency is null
			 and (l.per_key_concurrency is null or key is null)) then
		perform pgjob.check_queue(queue);
		raise exception 'pgjob.acquire_slot: queue % has no concurrency limit%',
			quote_literal(queue), case when key is null then '' else ' for keys' end
			using errcode = '55000';
	end if;
	clk := clock_timestamp();
	if l.global_concurrency is not null then
		select x.busy into b from pgjob.limit_busy(queue, null, clk) x;
		if b >= l.global_concurrency then
			return null;
		end if;
	end if;
	if key is not null and l.per_key_concurrency is not null then
		select x.busy into b from pgjob.key_busy(l, key, clk) x;
		if b >= l.per_key_concurrency then
			return null;
		end if;
	end if;
	update pgjob.limits x set running_ub = x.running_ub + 1
	 where x.queue = l.queue and x.running_ub is not null;
	insert into pgjob.limit_holds (queue, key, holder, expires_at, held_by)
	values (queue, key, left(holder, 200), clk + ttl,
		quote_ident(session_user)::regrole)
	returning id into new_id;
	return new_id;
end
$$;
