-- Empties every ring of jobs_done whose rows all ended before cutoff, and
-- with batch > 0 deletes up to batch rows older than cutoff from each ring
-- that also holds newer ones (`pgjob prune DURATION`; the duty passes 0 and
-- only truncates).  A ring it cannot lock within 100 ms (a reader holds it)
-- is left for the next call.  Returns how many rows went: exact for the
-- rows deleted, the statistics' estimate for a ring emptied.  It runs with its
-- owner's rights: TRUNCATE is a right of the table's owner, not one to
-- grant the worker role.  Sequential scans are off: "a row past the
-- cutoff?" is answered from the BRIN summary (an old ring: no range to
-- read) where a scan would read the whole ring to find none.
create or replace function pgjob.prune_done(cutoff timestamptz, batch int default 0)
returns bigint
language plpgsql
volatile
security definer
set search_path = pg_catalog, pg_temp
set enable_seqscan = off
as $$
declare
	n bigint := 0;
	k bigint;
	newer boolean;
	part regclass;
begin
	if cutoff is null then
		raise exception 'pgjob.prune_done: the cutoff must not be null'
			using errcode = '22004';
	end if;
	for i in 0..15 loop
		part := format('pgjob.jobs_done_%s', i)::regclass;
		execute format('select exists (select 1 from %s where'
			' finished_at >= $1)', part) into newer using cutoff;
		if newer then
			if batch > 0 then
				-- The attempt rows of the jobs done at a later
				-- attempt go with them.
				execute format('with d as (delete from %s where ctid in'
					' (select ctid from %s where finished_at < $1'
					' limit $2) returning id, lease_token),'
					' x as (delete from pgjob.attempts a using d'
					' where d.lease_token > 1 and a.job_id = d.id)'
					' select count(*) from d',
					part, part) into k using cutoff, batch;
				n := n + k;
			end if;
			continue;
		end if;
		execute format('select exists (select 1 from %s)', part)
			into newer;
		if not newer then
			continue;
		end if;
		-- How many it holds, for the log: the statistics' estimate
		-- (autovacuum analyzes a ring as it fills), or for a ring never
		-- analyzed a count of a million rows at most.  Never a count of
		-- the whole ring: this runs on a worker's connection, ahead of
		-- its claims and lease renewals, and a ring can hold a
		-- twelfth of the retention's jobs.
		select c.reltuples::bigint into k from pg_class c
		 where c.oid = part and c.reltuples >= 0;
		if k is null then
			execute format('select count(*) from (select 1 from %s'
				' limit 1000000) x', part) into k;
		end if;
		begin
			perform set_config('lock_timeout', '100ms', true);
			execute format('lock table %s in access exclusive mode', part);
		exception when lock_not_available then
			perform set_config('lock_timeout', '0', true);
			continue;
		end;
		perform set_config('lock_timeout', '0', true);
		execute format('select exists (select 1 from %s where'
			' finished_at >= $1)', part) into newer using cutoff;
		if not newer then
			-- The attempt rows of its jobs done at a later attempt
			-- (jobs_done_tried_idx: the ring is not read).
			execute format('delete from pgjob.attempts a using %s d'
				' where d.lease_token > 1 and a.job_id = d.id', part);
			execute format('truncate %s', part);
			n := n + k;
		end if;
	end loop;
	return n;
end
$$;
