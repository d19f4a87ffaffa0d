-- Applies a limits object ({"global_concurrency": 5, "rate": "10/s", ...};
-- a key set to null removes that limit) to q's row, as source src.  With
-- replace, keys left out are removed too (a config says everything).
-- A change of limits starts the counts again: the holders, busy_ub and
-- running_ub (the bound of an unlocked claim, version 28) are cleared.
-- (This text is the catalog's: versions 24 and 28 edited it in place.)
create or replace function pgjob.apply_limits(
	q text,
	lim jsonb,
	src text,
	replace boolean)
returns void
language plpgsql
as $$
declare
	k text;
	v jsonb;
	r pgjob.limits;
	rate_n int;
	rate_p bigint;
begin
	if lim is null or jsonb_typeof(lim) <> 'object' then
		raise exception 'pgjob: limits must be a JSON object, not %',
			coalesce(jsonb_typeof(lim), 'null') using errcode = '22023';
	end if;
	select * into r from pgjob.limits where queue = q for update;
	if not found then
		r.queue := q;
		r.paused := false;
		r.paused_kinds := '{}';
		r.fair := false;
	end if;
	if replace then
		r.global_concurrency := null; r.per_key_concurrency := null;
		r.rate := null; r.rate_period_ms := null; r.burst := null;
		r.rate_per_key := null; r.rate_per_key_period_ms := null;
		r.burst_per_key := null; r.fair := false;
	end if;
	for k, v in select * from jsonb_each(lim) loop
		if k not in ('global_concurrency', 'per_key_concurrency', 'rate',
			     'burst', 'rate_per_key', 'burst_per_key', 'fair') then
			raise exception 'pgjob: unknown limit "%"', k
				using errcode = '22023',
				hint = 'Limits are global_concurrency, per_key_concurrency, rate, burst, rate_per_key, burst_per_key and fair.';
		end if;
		if k in ('rate', 'rate_per_key') then
			if jsonb_typeof(v) not in ('string', 'null') then
				raise exception 'pgjob: limit "%" must be a string like "10/s", not %',
					k, v using errcode = '22023';
			end if;
			rate_n := null;
			rate_p := null;
			if jsonb_typeof(v) = 'string' then
				select p.n, p.period_ms into rate_n, rate_p
				  from pgjob.parse_rate(v #>> '{}') p;
			end if;
			if k = 'rate' then
				r.rate := rate_n; r.rate_period_ms := rate_p;
			else
				r.rate_per_key := rate_n; r.rate_per_key_period_ms := rate_p;
			end if;
		elsif k = 'fair' then
			if jsonb_typeof(v) not in ('boolean', 'null') then
				raise exception 'pgjob: limit "fair" must be true or false, not %', v
					using errcode = '22023';
			end if;
			r.fair := coalesce((v #>> '{}')::boolean, false);
		else
			if jsonb_typeof(v) = 'number' and (v #>> '{}') ~ '^[0-9]{1,9}$'
			   and (v #>> '{}')::int >= 1 then
				null;
			elsif jsonb_typeof(v) <> 'null' then
				raise exception 'pgjob: limit "%" must be a whole number from 1, not %',
					k, v using errcode = '22023';
			end if;
			case k
			when 'global_concurrency' then r.global_concurrency := (v #>> '{}')::int;
			when 'per_key_concurrency' then r.per_key_concurrency := (v #>> '{}')::int;
			when 'burst' then r.burst := (v #>> '{}')::int;
			when 'burst_per_key' then r.burst_per_key := (v #>> '{}')::int;
			end case;
		end if;
	end loop;
	if r.burst is not null and r.rate is null then
		raise exception 'pgjob: "burst" needs a "rate"' using errcode = '22023';
	end if;
	if r.burst_per_key is not null and r.rate_per_key is null then
		raise exception 'pgjob: "burst_per_key" needs a "rate_per_key"'
			using errcode = '22023';
	end if;
	r.source := src;
	r.updated_at := now();
	insert into pgjob.limits values (r.*)
	on conflict on constraint limits_pkey do update
	   set global_concurrency = excluded.global_concurrency,
	       per_key_concurrency = excluded.per_key_concurrency,
	       rate = excluded.rate, rate_period_ms = excluded.rate_period_ms,
	       burst = excluded.burst, rate_per_key = excluded.rate_per_key,
	       rate_per_key_period_ms = excluded.rate_per_key_period_ms,
	       burst_per_key = excluded.burst_per_key, fair = excluded.fair,
	       source = excluded.source, updated_at = excluded.updated_at,
	       holders = null, busy_ub = null, running_ub = null;
	perform pgjob.limits_tidy(q);
end
$$;
