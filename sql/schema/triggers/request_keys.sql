-- A request key taken in a transaction must have its response stored
-- before that transaction commits (pgjob.request_keys_finished()).
--
-- A constraint trigger has no `create or replace`: dropped first when
-- restated (without IF EXISTS's notice on a fresh install).
do $$
begin
	if exists (select 1 from pg_catalog.pg_trigger
		    where tgrelid = 'pgjob.request_keys'::regclass
		      and tgname = 'request_keys_finished') then
		drop trigger request_keys_finished on pgjob.request_keys;
	end if;
end
$$;
create constraint trigger request_keys_finished
	after insert or update on pgjob.request_keys
	deferrable initially deferred
	for each row when (new.status = 'in_progress')
	execute function pgjob.request_keys_finished();
