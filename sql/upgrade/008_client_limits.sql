-- pgjobd schema, version 8: what an application can write is what
-- pgjob.enqueue() would write, and no row can stop other jobs
-- (docs/security.md).
--
-- 1. run_at is finite.  A job enqueued at '-infinity' made every claim of
--    its queue fail (its position cannot be written as microseconds), and
--    the queue-depth query with it.  Rows that have one already are
--    repaired: '-infinity' runs now, 'infinity' far in the future (never,
--    as it meant).
-- 2. lost_attempts: attempts whose worker vanished (its lease expired
--    without an end written).  They are not failures: see the claim in
--    src/queue.c and docs/daemon.md, "Attempts".
-- 3. The payload limit lives in pgjob.settings, which only the owner can
--    change, instead of a setting that any session could SET for itself.
--    The database's pgjob.max_payload_bytes, where an operator had set
--    one, is carried over.
-- 4. pgjob.enqueue() is SECURITY DEFINER: the enqueue-only role needs
--    EXECUTE on it and no right on pgjob.jobs, so it cannot write a row
--    enqueue() would not (a 'running' row locked for a century, another
--    state, a payload over the limit).  Its search_path is pinned, and
--    EXECUTE is no longer granted to PUBLIC: grant it to the roles that
--    enqueue (docs/security.md).

update pgjob.jobs set run_at = case when run_at = '-infinity' then now()
	else timestamptz '9999-12-31 00:00:00+00' end
 where not isfinite(run_at);
alter table pgjob.jobs add constraint jobs_run_at_finite_check
	check (isfinite(run_at));

alter table pgjob.jobs add column lost_attempts int not null default 0;
alter table pgjob.jobs add constraint jobs_lost_attempts_check
	check (lost_attempts >= 0);

-- One row of settings that the daemon's database side reads.
create table pgjob.settings (
	one boolean primary key default true,
	-- pgjob.enqueue() refuses a payload whose text is longer.
	max_payload_bytes int not null default 1048576,
	constraint settings_one_check check (one),
	constraint settings_max_payload_check
		check (max_payload_bytes between 1 and 1073741824)
);
insert into pgjob.settings (max_payload_bytes)
values (coalesce(nullif(current_setting('pgjob.max_payload_bytes', true),
	'')::int, 1048576));

create or replace function pgjob.enqueue(
	kind text,
	payload jsonb default '{}',
	queue text default 'default',
	run_at timestamptz default now(),
	priority int default 0,
	max_attempts int default null,
	unique_key text default null,
	ordering_key text default null)
returns bigint
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_variable
declare
	new_id bigint;
	size bigint;
	max_size bigint;
begin
	if kind is null or kind = '' then
		raise exception 'pgjob.enqueue: kind must not be empty'
			using errcode = '22023';
	end if;
	payload := coalesce(payload, '{}');
	if jsonb_typeof(payload) <> 'object' then
		raise exception 'pgjob.enqueue: payload must be a JSON object, not %',
			jsonb_typeof(payload) using errcode = '22023';
	end if;
	select s.max_payload_bytes into max_size from pgjob.settings s;
	size := octet_length(payload::text);
	if size > coalesce(max_size, 1048576) then
		raise exception 'pgjob.enqueue: payload of % bytes is over the limit of % bytes',
			size, coalesce(max_size, 1048576) using errcode = '54000',
			hint = 'The limit is max_payload_bytes in table '
				'pgjob.settings (default 1048576); store large '
				'data elsewhere and put a reference to it in the '
				'payload.';
	end if;
	if priority not between -32768 and 32767 then
		raise exception 'pgjob.enqueue: priority % is out of range', priority
			using errcode = '22003';
	end if;
	run_at := coalesce(run_at, now());
	if not isfinite(run_at) then
		raise exception 'pgjob.enqueue: run_at must be a finite time, not %',
			run_at using errcode = '22008';
	end if;
	if max_attempts is not null and max_attempts < 1 then
		raise exception 'pgjob.enqueue: max_attempts must be at least 1, not %',
			max_attempts using errcode = '22023';
	end if;
	loop
		-- The only unique index a new row can hit is jobs_unique_key_idx.
		insert into pgjob.jobs (kind, payload, queue, run_at, priority,
			max_attempts, unique_key, ordering_key)
		values (kind, payload, coalesce(queue, 'default'), run_at,
			priority, max_attempts, unique_key, ordering_key)
		on conflict do nothing
		returning id into new_id;
		if new_id is not null or unique_key is null then
			return new_id;
		end if;
		select j.id into new_id from pgjob.jobs j
		 where j.unique_key = unique_key
		   and j.state in ('available', 'running');
		if new_id is not null then
			return new_id;
		end if;
		-- The holder of the key finished between the two statements:
		-- try the insert again.
	end loop;
end
$$;

revoke execute on function pgjob.enqueue(text, jsonb, text, timestamptz, int,
	int, text, text) from public;
