-- pgjobd schema, version 5: pgjob.enqueue() refuses a payload larger than
-- the database's limit (docs/security.md).
--
-- The limit is the text size of the payload in bytes, as pgjob.enqueue()
-- writes it and a worker reads it back: the setting pgjob.max_payload_bytes
-- when it is set (per database, role or session), else 1 MiB, the default of
-- the daemon's own max_payload_bytes.  An operator sets it with
--   alter database app set pgjob.max_payload_bytes = 65536;
-- A payload over it fails with SQLSTATE 54000 (program_limit_exceeded) and
-- a message that names both sizes; nothing is written.  Everything else is
-- pgjob.enqueue() of version 1, unchanged: same signature, same checks,
-- same answer for a unique_key that an unfinished job already holds.

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
	max_size := coalesce(nullif(current_setting('pgjob.max_payload_bytes',
		true), '')::int, 1048576);
	size := octet_length(payload::text);
	if size > max_size then
		raise exception 'pgjob.enqueue: payload of % bytes is over the limit of % bytes',
			size, max_size using errcode = '54000',
			hint = 'The limit is the setting pgjob.max_payload_bytes '
				'(default 1048576); store large data elsewhere '
				'and put a reference to it in the payload.';
	end if;
	if priority not between -32768 and 32767 then
		raise exception 'pgjob.enqueue: priority % is out of range', priority
			using errcode = '22003';
	end if;
	loop
		-- The only unique index a new row can hit is jobs_unique_key_idx.
		insert into pgjob.jobs (kind, payload, queue, run_at, priority,
			max_attempts, unique_key, ordering_key)
		values (kind, payload, coalesce(queue, 'default'),
			coalesce(run_at, now()), priority, max_attempts,
			unique_key, ordering_key)
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
