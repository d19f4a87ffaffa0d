-- Takes a key, waiting for a transaction that holds it uncommitted.  Returns
-- 'new' when this transaction now holds the key, 'done' with the stored
-- response of the request that finished it, or 'in_progress' when this very
-- transaction took it already.  Raises PJ422 for a live key with another
-- fingerprint.  Called by pgjob.request_begin(), which checks the
-- arguments.
create or replace function pgjob.request_take(take_scope text, take_key text,
	take_fingerprint text, ttl interval)
returns table(state text, response jsonb, response_status int)
language plpgsql
as $$
declare
	r record;
begin
	loop
		-- A key that an uncommitted transaction inserted makes this
		-- insert wait until that transaction ends: on its rollback the
		-- insert goes ahead, on its commit it conflicts.
		insert into pgjob.request_keys as k (scope, key, fingerprint,
			expires_at)
		values (take_scope, take_key, take_fingerprint, now() + ttl)
		on conflict on constraint request_keys_pkey do nothing
		returning k.key into r;
		if found then
			return query select 'new'::text, null::jsonb, null::int;
			return;
		end if;
		-- An expired key is a new one, whatever it was before and
		-- whether or not pruning has reached it yet.  The row lock
		-- makes a concurrent taker wait here as it would at the insert.
		update pgjob.request_keys k
		   set fingerprint = take_fingerprint, status = 'in_progress',
		       response = null, response_status = null,
		       created_at = now(), finished_at = null,
		       expires_at = now() + ttl
		 where k.scope = take_scope and k.key = take_key
		   and k.expires_at <= now()
		returning k.key into r;
		if found then
			return query select 'new'::text, null::jsonb, null::int;
			return;
		end if;
		select k.fingerprint, k.status, k.response, k.response_status,
		       k.expires_at
		  into r from pgjob.request_keys k
		 where k.scope = take_scope and k.key = take_key;
		-- Gone (pruned, deleted) or expired between the statements:
		-- take it again.
		if found and r.expires_at > now() then
			if r.fingerprint <> take_fingerprint then
				raise exception 'pgjob: request key "%" was used for another request (a different fingerprint)',
					take_key
					using errcode = 'PJ422',
					hint = 'Send a new key for a new request; retry a request with its own key and the same body.';
			end if;
			return query select r.status, r.response,
				r.response_status;
			return;
		end if;
	end loop;
end
$$;
