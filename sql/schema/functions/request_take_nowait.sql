-- The same with NOWAIT semantics: a key that another transaction holds gives
-- 'in_progress' at once instead of a wait.  lock_timeout is set for this
-- function only and restored on return; catching the timeout costs a
-- subtransaction, which is why waiting is the default.  Any lock wait counts
-- (the key's row, or a table lock held by DDL): the answer is then
-- 'in_progress' too, a retry later is the right reaction to both.
create or replace function pgjob.request_take_nowait(take_scope text, take_key text,
	take_fingerprint text, ttl interval)
returns table(state text, response jsonb, response_status int)
language plpgsql
set lock_timeout = '1ms'
as $$
declare
	r record;
begin
	begin
		select * into r from pgjob.request_take(take_scope, take_key,
			take_fingerprint, ttl) t;
	exception when lock_not_available then
		return query select 'in_progress'::text, null::jsonb,
			null::int;
		return;
	end;
	return query select r.state, r.response, r.response_status;
end
$$;
