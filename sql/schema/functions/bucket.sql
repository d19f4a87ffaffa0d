-- A token bucket of rate n per period_ms holding at most cap tokens, that
-- held tokens at tokens_at (null: full): its tokens at clk, never below
-- -10^12 (no cost reaches that: they are at most 10^6).  The time between
-- the two is taken in seconds as numbers, not as an interval, which
-- cannot hold every difference of two timestamps.
create or replace function pgjob.bucket(tokens float8, tokens_at timestamptz,
	clk timestamptz, n int, period_ms bigint, cap int) returns float8
language sql
immutable
as $$
	select case when tokens is null or tokens_at is null then cap::float8
		else greatest(-1e12::float8, least(cap::float8, tokens
			+ greatest(0, (extract(epoch from clk)
				- extract(epoch from tokens_at)) * 1000)::float8
			* n::float8 / period_ms)) end
$$;
