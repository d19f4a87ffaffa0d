-- Limits of one workflow (docs/workflows.md, "Limits").
create or replace function pgjob.workflow_max_steps() returns int
language sql immutable as $$ select 10000 $$;
