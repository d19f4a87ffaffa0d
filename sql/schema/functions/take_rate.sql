-- Takes cost tokens from q's rate limit (and from key's, with
-- rate_per_key), in the caller's transaction: the same budget as the
-- queue's jobs.  taken false: not enough tokens; retry_after says when
-- there will be.  A rollback gives the tokens back.  It locks q's limit row
-- until the transaction ends: call it late, in a short transaction.  The
-- cost is bounded as a job's is.
create or replace function pgjob.take_rate(queue text, cost int default 1,
	key text default null, out taken boolean, out retry_after interval)
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_variable
declare
	l pgjob.limits;
	clk timestamptz;
	tok float8;
	ktok float8;
	kb pgjob.limit_keys;
	w bigint := 0;
begin
	if cost is null or cost not between 0 and 1000000 then
		raise exception 'pgjob.take_rate: cost must be between 0 and 1000000, not %',
			coalesce(cost::text, 'null') using errcode = '22023';
	end if;
	select * into l from pgjob.limits x where x.queue = queue for update;
	if not found or (l.rate is null and (l.rate_per_key is null or key is null)) then
		perform pgjob.check_queue(queue);
		raise exception 'pgjob.take_rate: queue % has no rate limit',
			quote_literal(queue) using errcode = '55000';
	end if;
	clk := clock_timestamp();
	if l.rate is not null then
		tok := pgjob.bucket(l.tokens, l.tokens_at, clk, l.rate,
			l.rate_period_ms, coalesce(l.burst, l.rate));
		w := pgjob.bucket_wait(tok, least(cost, coalesce(l.burst, l.rate)),
			l.rate, l.rate_period_ms);
	end if;
	if key is not null and l.rate_per_key is not null then
		select * into kb from pgjob.limit_keys k
		 where k.queue = queue and k.key = key;
		ktok := pgjob.bucket(kb.tokens, kb.tokens_at, clk, l.rate_per_key,
			l.rate_per_key_period_ms, coalesce(l.burst_per_key, l.rate_per_key));
		w := greatest(w, pgjob.bucket_wait(ktok,
			least(cost, coalesce(l.burst_per_key, l.rate_per_key)),
			l.rate_per_key, l.rate_per_key_period_ms));
	end if;
	taken := w = 0;
	retry_after := w * interval '1 millisecond';
	if not taken then
		return;
	end if;
	if l.rate is not null then
		update pgjob.limits x set tokens = tok - cost, tokens_at = clk
		 where x.queue = queue;
	end if;
	if ktok is not null then
		insert into pgjob.limit_keys as k values (queue, key, ktok - cost, clk)
		on conflict on constraint limit_keys_pkey do update
		   set tokens = excluded.tokens, tokens_at = excluded.tokens_at;
	end if;
end
$$;
