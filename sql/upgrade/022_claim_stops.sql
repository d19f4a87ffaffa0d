-- pgjobd schema, version 22: where the last crowded claim stopped, kept
-- outside the jobs table.
--
-- A claim that takes its turn in a queue (src/db/queue.c, TURN_SQL) may
-- start past where the last claim of that queue stopped.  It used to find
-- that place by reading jobs_running_idx backwards, for the running job
-- whose lease ends last: an index on state, which every claim then has to
-- write an entry in, and whose entries of ended jobs a snapshot held open
-- elsewhere keeps for the read to pass (docs/performance.md, "Where a
-- crowded claim starts").
--
-- Now each claim in its turn sets its lane's sequence to the id of the
-- last job it took, and the next claim reads both lanes' and starts past
-- the further stop that holds.  One per lane: the claims of a lane take
-- turns, so the value of the reader's own lane is that of a claim that
-- committed, while the other lane's may be of a claim still in progress.
--
-- A sequence, not a row: setval() is not transactional and leaves no row
-- version behind, so a snapshot held open for hours costs nothing here,
-- where a row updated a hundred times a second would grow a chain of
-- versions for every read to walk.  Not transactional also means a claim
-- that rolls back leaves its value: the claim that reads it looks the job
-- up and goes past it only if it is running under a lease taken in the
-- last 200 ms by a worker that handles every kind the reader does; else
-- it starts from its own position.
--
-- Queues share the 64 sequences, 32 pairs (lane 0, lane 1) chosen by the
-- hash of the queue's name: pgjob.claim_stop_(2 * bucket + lane).  Two
-- queues in one bucket overwrite each other's value, and a value of
-- another queue's job is passed over like any other that does not hold.
do $$
begin
	for i in 0..63 loop
		execute format('create sequence pgjob.claim_stop_%s'
			' as bigint minvalue 0 start 0', i);
	end loop;
end
$$;
