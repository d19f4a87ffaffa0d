-- As in version 1, but the error says what happened to the lease: taken
-- over (a newer token), released by its holder, or expired (since when).
-- A null token is refused too; it used to pass.
create or replace function pgjob.fence(lease_name text, fencing_token bigint)
returns void
language plpgsql
as $$
declare
	l record;
begin
	select x.token, x.holder, x.expires_at into l from pgjob.leases x
	 where x.name = lease_name for share;
	if not found then
		raise exception 'pgjob.fence: no lease named "%"', lease_name
			using errcode = '55000';
	end if;
	if fencing_token is null or fencing_token > l.token then
		raise exception 'pgjob.fence: token % for lease "%" was never issued (current token %)',
			coalesce(fencing_token::text, 'null'), lease_name, l.token
			using errcode = '55000';
	end if;
	if fencing_token < l.token then
		raise exception 'pgjob.fence: token % for lease "%" is stale: the lease was taken over (current token %)',
			fencing_token, lease_name, l.token using errcode = '55000';
	end if;
	if l.holder is null or l.expires_at is null then
		raise exception 'pgjob.fence: token % for lease "%" is stale: the lease was released by its holder',
			fencing_token, lease_name using errcode = '55000';
	end if;
	if l.expires_at < now() then
		raise exception 'pgjob.fence: token % for lease "%" is stale: the lease expired at % (% ago)',
			fencing_token, lease_name,
			to_char(l.expires_at at time zone 'UTC',
				'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
			date_trunc('milliseconds', now() - l.expires_at)
			using errcode = '55000';
	end if;
end
$$;
