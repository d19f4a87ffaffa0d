-- The last statement before commit: stores the response of the request that
-- holds the key in this transaction.  Raises PJ002 when this transaction
-- holds no such key (no request_begin, a request_begin that answered 'done',
-- or a second request_finish).
create or replace function pgjob.request_finish(
	key text,
	response jsonb,
	response_status int default 200,
	scope text default '')
returns void
language plpgsql
as $$
#variable_conflict use_variable
begin
	if response_status is null then
		raise exception 'pgjob.request_finish: response_status must not be null'
			using errcode = '22023';
	end if;
	-- Only this transaction's own row can be visible as 'in_progress':
	-- others' are uncommitted, and none is ever committed in that state.
	update pgjob.request_keys k
	   set status = 'done', response = response,
	       response_status = response_status, finished_at = now()
	 where k.scope = coalesce(scope, '') and k.key = key
	   and k.status = 'in_progress';
	if not found then
		raise exception 'pgjob.request_finish: this transaction holds no request key "%" in scope "%"',
			key, coalesce(scope, '') using errcode = 'PJ002',
			hint = 'Call pgjob.request_begin() first, and pgjob.request_finish() once, only when it answered ''new''.';
	end if;
end
$$;
