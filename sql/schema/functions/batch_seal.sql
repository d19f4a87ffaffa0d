-- No more jobs join batch b; its callback comes when the last has ended
-- (at once, when they all have).  Sealing twice is harmless.  A batch the
-- session may not act on is no batch to it.
create or replace function pgjob.batch_seal(b bigint) returns void
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
begin
	update pgjob.batches x set sealed = true
	 where x.id = b and pgjob.session_may(x.opened_by, pgjob.session_reads());
	if not found then
		raise exception 'pgjob.batch_seal: no batch %', b using errcode = '23503';
	end if;
	perform pgjob.batch_check(b);
end
$$;
