-- Extends a hold that has not expired (one that has may have been given to
-- someone else, as an expired lease is).
create or replace function pgjob.renew_slot(hold bigint,
	ttl interval default '1 minute')
returns boolean
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
begin
	if ttl is null or ttl <= interval '0' or ttl > interval '1 day' then
		raise exception 'pgjob.renew_slot: ttl must be more than 0 and at most a day, not %',
			ttl using errcode = '22023';
	end if;
	update pgjob.limit_holds x set expires_at = clock_timestamp() + ttl
	 where x.id = hold and x.expires_at >= clock_timestamp()
	   and pgjob.session_may(x.held_by, pgjob.session_reads());
	return found;
end
$$;
