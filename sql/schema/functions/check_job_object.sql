-- Element j of pgjob.enqueue_many()'s array, checked on the slow path:
-- raises the error that refuses it, with what ("pgjob.enqueue_many:
-- jobs[3]") in front, or returns when it would go in.  Values from the
-- caller are quoted as JSON (control characters escaped) and cut at 64
-- characters in a message.
create or replace function pgjob.check_job_object(what text, j jsonb)
returns void
language plpgsql
stable
as $$
#variable_conflict use_variable
declare
	extra text;
	f text;
	pri int;
	att int;
	cst int;
	at timestamptz;
begin
	if jsonb_typeof(j) is distinct from 'object' then
		raise exception '%: a job must be a JSON object, not %', what,
			coalesce(jsonb_typeof(j), 'null') using errcode = '22023';
	end if;
	select min(k) into extra
	  from jsonb_object_keys(j - pgjob.job_keys()) k;
	if extra in ('depends_on', 'on_parent_failure', 'batch_id') then
		raise exception '%: % is not taken here', what, extra
			using errcode = '22023',
			hint = 'Enqueue a job with parents or of a batch with pgjob.enqueue().';
	elsif extra is not null then
		raise exception '%: unknown key %', what,
			left(to_json(extra)::text, 64) using errcode = '22023',
			hint = 'A job has the keys kind, payload, queue, run_at, '
				'priority, max_attempts, unique_key, ordering_key, '
				'limit_key and cost.';
	end if;
	if jsonb_typeof(j->'kind') is distinct from 'string' then
		raise exception '%: kind must be a string', what
			using errcode = '22023';
	end if;
	foreach f in array array['queue', 'unique_key', 'ordering_key',
		'limit_key'] loop
		if coalesce(jsonb_typeof(j->f), 'null') not in ('string', 'null') then
			raise exception '%: % must be a string, not %', what, f,
				jsonb_typeof(j->f) using errcode = '22023';
		end if;
	end loop;
	begin
		f := 'priority';
		pri := coalesce((j->>'priority')::int, 0);
		f := 'max_attempts';
		att := (j->>'max_attempts')::int;
		f := 'cost';
		cst := coalesce((j->>'cost')::int, 1);
		f := 'run_at';
		at := (j->>'run_at')::timestamptz;
	exception when data_exception then
		raise exception '%: % must be %, not %', what, f,
			case when f = 'run_at' then 'a time' else 'an integer' end,
			left((j->f)::text, 64) using errcode = '22023';
	end;
	perform pgjob.check_job(what, j->>'kind',
		nullif(j->'payload', 'null'), at, pri, att, cst);
end
$$;
