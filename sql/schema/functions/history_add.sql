-- Two histograms of pgjob.history_minutes merged: element by element, the
-- shorter as if padded with zeros.
create or replace function pgjob.history_add(a integer[], b integer[])
returns integer[]
language sql
immutable
as $$
	select coalesce(array_agg(coalesce(a[i], 0) + coalesce(b[i], 0)
				  order by i), '{}')
	  from generate_series(1, greatest(coalesce(cardinality(a), 0),
					   coalesce(cardinality(b), 0))) i;
$$;
