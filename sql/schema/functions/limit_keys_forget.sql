-- A queue's keys' holders are known only while its per_key_concurrency
-- stays set: claims made without it (no row, or no per-key limit) added
-- nothing.  A new row, or a change of it, forgets them.  (Two triggers: a
-- claim updates the row's tokens and cursor, and should not call a
-- function for it.)
create or replace function pgjob.limit_keys_forget() returns trigger
language plpgsql
as $$
begin
	update pgjob.limit_keys k set holders = null
	 where k.queue = new.queue and k.holders is not null;
	return null;
end
$$;
