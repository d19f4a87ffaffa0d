-- Seconds per ring period for a retention of retention_ms.
create or replace function pgjob.done_width(retention_ms bigint) returns bigint
language sql
immutable
as $$
	select greatest(60, ceil(retention_ms / 12000.0))::bigint
$$;
