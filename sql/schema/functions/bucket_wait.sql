-- Milliseconds until a bucket holding tok tokens holds need: at most
-- 10^15 (31,700 years, the longest period), so that it always fits a
-- bigint and an interval.
create or replace function pgjob.bucket_wait(tok float8, need float8, n int,
	period_ms bigint) returns bigint
language sql
immutable
as $$
	select case when tok >= need then 0
		else least(ceil(least(need - tok, 1e13::float8) * period_ms / n),
			1e15::float8)::bigint end
$$;
