-- The upper bound in ms of bucket i (from 1) of the history's histograms
-- (tables/history.sql): 1 ms, then a factor of the square root of 2 a
-- bucket; the 55th is open (above 2^26.5 ms, about 26 hours), and says
-- its lower bound.  Null for null (strict): no bucket, no bound.
create or replace function pgjob.history_bound(i integer)
returns double precision
language sql
immutable
strict
as $$
	select round(power(2::double precision, (least(i, 54) - 1) / 2.0)::numeric, 1)::double precision;
$$;
