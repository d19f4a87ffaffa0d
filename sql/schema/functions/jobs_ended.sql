-- The row trigger: a job with children, or of a workflow or a batch,
-- ended.  It only notes the job's id (in setting pgjob.ended, local to the
-- transaction); pgjob.ends_count() counts the ends noted, set by set, at
-- the end of the statement (the statement trigger pgjob.jobs_ended_flush()).
-- Counted one row at a time, a fan-in of 10,000 parents updated its
-- child's row (and a workflow's row) once per parent: 10,000 versions of
-- one row, each read through the ones before; counted per statement, a
-- batch of ends updates each shared row once.
--
-- AFTER row triggers fire once the statement has written every row, so
-- the ends noted can be counted from here too: a statement that ends many
-- such jobs counts them some 2,000 at a time, which keeps the noted
-- list (a text rebuilt at each append) short.  While ends_count() runs,
-- the ends its own updates make (children it cancels) are only noted: its
-- loop takes them in turn, never a nested call (a chain of a thousand
-- would otherwise nest a thousand deep).
create or replace function pgjob.jobs_ended() returns trigger
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
	noted text := coalesce(current_setting('pgjob.ended', true), '')
		|| new.id::text || ',';
begin
	perform set_config('pgjob.ended', noted, true);
	-- octet_length: length() counts the characters of the list, a
	-- walk of it at every append (ids are ASCII: the same figure).
	if octet_length(noted) > 16000
	   and coalesce(current_setting('pgjob.releasing', true), '') <> 'on' then
		perform pgjob.ends_count();
	end if;
	return null;
end
$$;
