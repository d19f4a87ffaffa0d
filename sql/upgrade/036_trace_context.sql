-- Version 36: W3C trace context from enqueue to handler (docs/tracing.md).
-- A job keeps the traceparent it was enqueued in (pgjob.enqueue()'s new
-- last argument, or the session's pgjob.traceparent, pgjob.trace_context());
-- a child inherits its parent's; the claims return it to the worker (the
-- limited claim's caller reads it by id: src/db/claim_limited.c).
-- Nullable with no default: a change of the catalog only.
alter table pgjob.jobs add column traceparent text;
alter table pgjob.jobs_done add column traceparent text;

-- The functions whose arguments or results change are dropped by their old
-- signatures (the restatement creates them).  Whoever was granted one by
-- name (the enqueue role, the worker role) gets the new one back in
-- 036_trace_context.after.sql: kept here until then.
create temporary table pgjob_036_grants on commit drop as
select r.rolname as grantee, f.new_sig
  from (values
	('pgjob.enqueue(text, jsonb, text, timestamptz, integer, integer, text, text, text, integer, bigint[], text, bigint)',
	 'pgjob.enqueue(text, jsonb, text, timestamptz, integer, integer, text, text, text, integer, bigint[], text, bigint, text)'),
	('pgjob.enqueue_batched(text, jsonb, text, timestamptz, integer, integer, text, text, text, integer, bigint[], text, bigint)',
	 'pgjob.enqueue_batched(text, jsonb, text, timestamptz, integer, integer, text, text, text, integer, bigint[], text, bigint, text)'),
	('pgjob.enqueue_child(text, jsonb, text, timestamptz, integer, integer, text, text, integer, bigint[], text, text, bigint, text, bigint)',
	 'pgjob.enqueue_child(text, jsonb, text, timestamptz, integer, integer, text, text, integer, bigint[], text, text, bigint, text, bigint, text)'))
	f(old, new_sig)
  join pg_catalog.pg_proc p on p.oid = to_regprocedure(f.old)
  cross join lateral pg_catalog.aclexplode(p.proacl) a
  join pg_catalog.pg_roles r on r.oid = a.grantee
 where a.privilege_type = 'EXECUTE' and a.grantee <> 0
   and a.grantee <> p.proowner;

drop function if exists pgjob.enqueue(text, jsonb, text, timestamptz, integer,
	integer, text, text, text, integer, bigint[], text, bigint);
drop function if exists pgjob.enqueue_batched(text, jsonb, text, timestamptz,
	integer, integer, text, text, text, integer, bigint[], text, bigint);
drop function if exists pgjob.enqueue_child(text, jsonb, text, timestamptz,
	integer, integer, text, text, integer, bigint[], text, text, bigint,
	text, bigint);
