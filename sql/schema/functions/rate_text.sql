-- (count, period) as the shortest spelling: 10/s, 600/min, 3/1500ms.
create or replace function pgjob.rate_text(n int, period_ms bigint) returns text
language sql
immutable
as $$
	select case when n is null then null
		else n::text || '/' || case
		when period_ms = 1000 then 's'
		when period_ms = 60000 then 'min'
		when period_ms = 3600000 then 'h'
		when period_ms = 86400000 then 'd'
		when period_ms % 86400000 = 0 then (period_ms / 86400000)::text || 'd'
		when period_ms % 3600000 = 0 then (period_ms / 3600000)::text || 'h'
		when period_ms % 60000 = 0 then (period_ms / 60000)::text || 'min'
		when period_ms % 1000 = 0 then (period_ms / 1000)::text || 's'
		else period_ms::text || 'ms' end end
$$;
