-- The first statement of a request's transaction: takes its idempotency key.
-- state 'new': this request holds the key, make the change in this
-- transaction and call pgjob.request_finish() before commit.  'done': an
-- earlier request with this key committed; here are its response and
-- status, change nothing.  'in_progress': another transaction holds the key
-- (only with nowait, or when the caller's own lock_timeout fires: without
-- nowait, a request waits for the holder to commit or roll back), or this
-- transaction took it already.  A live key with another fingerprint raises
-- SQLSTATE PJ422.  The key lives for ttl from now.
create or replace function pgjob.request_begin(
	key text,
	fingerprint text,
	scope text default '',
	ttl interval default '24 hours',
	nowait boolean default false)
returns table(state text, response jsonb, response_status int)
language plpgsql
as $$
#variable_conflict use_variable
begin
	if key is null or length(key) not between 1 and 255 then
		raise exception 'pgjob.request_begin: key must be 1 to 255 characters'
			using errcode = '22023';
	end if;
	if fingerprint is null then
		raise exception 'pgjob.request_begin: fingerprint must not be null'
			using errcode = '22023';
	end if;
	scope := coalesce(scope, '');
	if length(scope) > 255 then
		raise exception 'pgjob.request_begin: scope must be at most 255 characters'
			using errcode = '22023';
	end if;
	if ttl is null or ttl <= interval '0' then
		raise exception 'pgjob.request_begin: ttl must be positive, not %',
			coalesce(ttl::text, 'null') using errcode = '22023';
	end if;
	if coalesce(nowait, false) then
		return query select * from pgjob.request_take_nowait(scope, key,
			fingerprint, ttl);
	else
		return query select * from pgjob.request_take(scope, key,
			fingerprint, ttl);
	end if;
end
$$;
