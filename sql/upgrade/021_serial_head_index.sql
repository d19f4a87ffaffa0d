-- pgjobd schema, version 21: the serial head's index is the serial head's
-- alone.
--
-- jobs_queue_order_idx (queue, id) and jobs_claim_idx (queue, priority,
-- run_at, id) had the same predicate, state = 'available', so the planner
-- could read a queue's due jobs for the parallel claim along either: along
-- the claim index in order, from the claim's position on; or along the
-- serial head's index, every available row of the queue, then sort them.
-- Costed on the statistics that autovacuum leaves under a snapshot held
-- open elsewhere, the second won now and then: in a 12-minute churn run at
-- 38,000 jobs/s, the generic plan made again after the VACUUM of minute 3
-- sorted the queue in every claim (1.1-1.6 s each instead of 10-20 ms),
-- and throughput fell to 10,216 jobs/s for that minute, until the next
-- VACUUM a minute later replanned it (docs/performance.md, "A plan that
-- sorted the queue").
--
-- Now the serial head's index holds the same rows under a predicate that
-- only the serial head's queries state: lease_token is not null, true of
-- every row (the column is NOT NULL), but implied by nothing the parallel
-- claim says, so the planner cannot use the index there.  The serial head
-- (the daemon's claim, src/db/queue.c, and pgjob.claim_limited() below)
-- says it.  A PostgreSQL that learns to drop IS NOT NULL on NOT NULL
-- columns from queries (17 does) would leave the serial head without this
-- index: test_plans checks that it still uses it.
drop index pgjob.jobs_queue_order_idx;
create index jobs_queue_order_idx on pgjob.jobs (queue, id)
	where state = 'available' and lease_token is not null;

-- pgjob.claim_limited() as version 18 left it, with the serial head's
-- condition added: its text is rewritten here rather than repeated whole,
-- and the rewrite must find the one place it changes.
do $$
declare
	def text;
	old text := 'where h.queue = q and h.state = ''available'')';
	new text := 'where h.queue = q and h.state = ''available'''
		' and h.lease_token is not null)';
begin
	select pg_get_functiondef(p.oid) into def from pg_proc p
	  join pg_namespace n on n.oid = p.pronamespace
	  where n.nspname = 'pgjob' and p.proname = 'claim_limited';
	if def is null or position(old in def) = 0
	   or position(old in substr(def, position(old in def) + 1)) <> 0 then
		raise exception 'pgjob.claim_limited(): the serial head''s '
			'condition was not found once';
	end if;
	execute replace(def, old, new);
end
$$;
