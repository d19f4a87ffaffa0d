-- The checks pgjob.enqueue() makes of a job, for every way in (fn names the
-- caller in the messages).  Returns the payload and run_at, defaulted.
create or replace function pgjob.check_job(fn text, kind text, payload jsonb,
	run_at timestamptz, priority int, max_attempts int, cost int,
	out checked jsonb, out at timestamptz)
language plpgsql
stable
set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_variable
declare
	size bigint;
	max_size bigint;
begin
	if kind is null or kind = '' then
		raise exception '%: kind must not be empty', fn
			using errcode = '22023';
	end if;
	payload := coalesce(payload, '{}');
	if jsonb_typeof(payload) <> 'object' then
		raise exception '%: payload must be a JSON object, not %', fn,
			jsonb_typeof(payload) using errcode = '22023';
	end if;
	select s.max_payload_bytes into max_size from pgjob.settings s;
	size := octet_length(payload::text);
	if size > coalesce(max_size, 1048576) then
		raise exception '%: payload of % bytes is over the limit of % bytes', fn,
			size, coalesce(max_size, 1048576) using errcode = '54000',
			hint = 'The limit is max_payload_bytes in table '
				'pgjob.settings (default 1048576); store large '
				'data elsewhere and put a reference to it in the '
				'payload.';
	end if;
	if priority not between -32768 and 32767 then
		raise exception '%: priority % is out of range', fn, priority
			using errcode = '22003';
	end if;
	run_at := coalesce(run_at, now());
	if not isfinite(run_at) then
		raise exception '%: run_at must be a finite time, not %', fn,
			run_at using errcode = '22008';
	end if;
	if max_attempts is not null and max_attempts < 1 then
		raise exception '%: max_attempts must be at least 1, not %', fn,
			max_attempts using errcode = '22023';
	end if;
	cost := coalesce(cost, 1);
	if cost not between 0 and 1000000 then
		raise exception '%: cost must be between 0 and 1000000, not %', fn,
			cost using errcode = '22023';
	end if;
	checked := payload;
	at := run_at;
end
$$;
