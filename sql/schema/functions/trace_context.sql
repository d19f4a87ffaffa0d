-- The W3C trace context a new job keeps (docs/tracing.md): the traceparent
-- given, else the session's setting pgjob.traceparent (so that an
-- application sets it once per request and its calls stay as they are),
-- else null.  Only version 00 of https://www.w3.org/TR/trace-context/ is
-- taken, exactly: 00-<32 lowercase hex, not all zeros>-<16 lowercase hex,
-- not all zeros>-<2 hex>.  Anything else is ignored with a WARNING and the
-- job has no trace: the header usually comes from an incoming request,
-- which an enqueue must not fail for, and the W3C recommendation says a
-- traceparent that does not parse is dropped (a new trace starts).
create or replace function pgjob.trace_context(tp text)
returns text
language plpgsql
stable
set search_path = pg_catalog, pg_temp
as $$
begin
	tp := coalesce(tp, nullif(current_setting('pgjob.traceparent', true), ''));
	if tp is null
	   or (tp ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$'
	       and substr(tp, 4, 32) <> repeat('0', 32)
	       and substr(tp, 37, 16) <> repeat('0', 16)) then
		return tp;
	end if;
	raise warning 'pgjob: traceparent "%" is not a W3C trace context of version 00: the job has no trace',
		left(tp, 64)
		using hint = 'The form is 00-<32 lowercase hex>-<16 lowercase hex>-<2 hex>, ids not all zeros.';
	return null;
end
$$;
