-- pgjobd schema, version 3: the last tick enqueued per schedule.
--
-- The worker that holds the scheduler lease advances last_tick and enqueues
-- the tick's job in one transaction, fenced by its lease token, so a tick is
-- enqueued once across the cluster even across failovers.
create table pgjob.schedules (
	name text primary key,
	last_tick timestamptz not null
);
