-- How much more key k of the queue whose row is l may start at clk: room
-- (jobs), ktok (the key's tokens, null without rate_per_key), and when
-- room is 0, why and when to look again.
-- A key's busy jobs are counted by pgjob.key_busy(), which counts its
-- slots too (version 24: from the ids its claims let start, not through an
-- index of running jobs).  (This text is the catalog's: version 24 edited
-- version 10's in place.)
create or replace function pgjob.key_room(
	l pgjob.limits,
	k text,
	clk timestamp with time zone,
	out room integer,
	out ktok double precision,
	out why text,
	out wait_ms bigint)
returns record
language plpgsql
as $$
declare
	b int;
	fx timestamptz;
	kb pgjob.limit_keys;
begin
	room := 1000000000;
	if k is null then
		return;
	end if;
	if l.per_key_concurrency is not null then
		select x.busy, x.first_expiry into b, fx
		  from pgjob.key_busy(l, k, clk) x;
		room := l.per_key_concurrency - b;
		if room <= 0 then
			why := 'key_concurrency';
			wait_ms := ceil(extract(epoch from fx - clk) * 1000)::bigint + 1;
			return;
		end if;
	end if;
	if l.rate_per_key is not null then
		select * into kb from pgjob.limit_keys x
		 where x.queue = l.queue and x.key = k;
		ktok := pgjob.bucket(kb.tokens, kb.tokens_at, clk, l.rate_per_key,
			l.rate_per_key_period_ms,
			coalesce(l.burst_per_key, l.rate_per_key));
		if ktok < 1 then
			room := 0;
			why := 'key_rate';
			wait_ms := pgjob.bucket_wait(ktok, 1, l.rate_per_key,
				l.rate_per_key_period_ms);
		end if;
	end if;
end
$$;
