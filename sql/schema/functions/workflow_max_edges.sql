-- Limits of one workflow (docs/workflows.md, "Limits").
create or replace function pgjob.workflow_max_edges() returns int
language sql immutable as $$ select 100000 $$;
