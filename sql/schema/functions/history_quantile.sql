-- The q-quantile (0 < q <= 1) of histogram h (tables/history.sql) as the
-- upper bound of the bucket it falls in, in ms; null when h counts nothing.
create or replace function pgjob.history_quantile(h bigint[], q double precision)
returns double precision
language sql
immutable
as $$
	with b as (
		select i, sum(coalesce(h[i], 0)) over (order by i) as upto,
		       sum(coalesce(h[i], 0)) over () as total
		  from generate_series(1, coalesce(cardinality(h), 0)) i)
	select pgjob.history_bound(min(i))
	  from b
	 where total > 0 and upto >= q * total;
$$;
