-- At commit: a key taken in this transaction must have its response stored.
-- Otherwise a retry would find neither a response nor a request to wait for;
-- refusing the commit rolls the change back with it, loudly.  (A transaction
-- that says SET CONSTRAINTS ALL IMMEDIATE gets this check at request_begin:
-- do not.)
create or replace function pgjob.request_keys_finished() returns trigger
language plpgsql
as $$
begin
	perform 1 from pgjob.request_keys k
	  where k.scope = new.scope and k.key = new.key
	    and k.status = 'in_progress';
	if found then
		raise exception 'pgjob: request key "%" in scope "%" was taken but no response was stored',
			new.key, new.scope using errcode = 'PJ002',
			hint = 'Call pgjob.request_finish() before commit, or roll back.';
	end if;
	return null;
end
$$;
