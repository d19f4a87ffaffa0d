-- Where the last crowded claim of a queue stopped, kept outside the jobs
-- table (sql/upgrade/022_claim_stops.sql says why at length).  A claim
-- that takes its turn in a queue (src/db/queue.c, TURN_SQL) sets its
-- lane's sequence to the id of the last job it took; the next claim reads
-- both lanes' and starts past the further stop that holds.
--
-- A sequence, not a row: setval() is not transactional and leaves no row
-- version behind, so a snapshot held open for hours costs nothing here.
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
