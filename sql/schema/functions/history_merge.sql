-- Sums histograms over rows (pgjob.history(), pgjob.history_summary()):
-- bigint elements, as a long range may count more than an integer holds.
create or replace function pgjob.history_merge_step(s bigint[], h integer[])
returns bigint[]
language sql
immutable
as $$
	select coalesce(array_agg(coalesce(s[i], 0) + coalesce(h[i], 0)
				  order by i), '{}')
	  from generate_series(1, greatest(coalesce(cardinality(s), 0),
					   coalesce(cardinality(h), 0))) i;
$$;

create or replace aggregate pgjob.history_merge(integer[]) (
	sfunc = pgjob.history_merge_step,
	stype = bigint[],
	initcond = '{}'
);
