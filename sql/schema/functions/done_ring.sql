-- The ring of a job that ended at t under a retention of retention_ms.
create or replace function pgjob.done_ring(t timestamptz, retention_ms bigint)
returns smallint
language sql
stable
as $$
	select (floor(extract(epoch from t)
		/ pgjob.done_width(retention_ms))::bigint % 16)::smallint
$$;
