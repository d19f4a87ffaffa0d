-- pgjobd schema, version 25: the key-by-key claim's candidate scan planned
-- once, not at every turn.
--
-- pgjob.claim_limited() runs under plan_cache_mode = auto: its scan in the
-- queue's order needs a custom plan (a generic one sorted the whole
-- queue, version 18).  Its scan of one key's jobs, made at every turn of
-- the key-by-key claim (per_key_concurrency, rate_per_key, fair), was
-- planned again each time as well: 91 us of planning for 13 us of work a
-- turn, a sixth of the limited claim's time with per_key_concurrency 2
-- (pg_stat_statements, track = all, track_planning; docs/performance.md).
-- That scan now lives in pgjob.key_candidates(), which keeps one generic
-- plan: jobs_limit_key_idx in its order, the key and queue its index
-- condition, whatever the key (test_flow checks the plan).  The statement
-- is version 10's; claim_limited()'s text is rewritten to call it.

create function pgjob.key_candidates(q text, k text, kinds text[],
	paused_kinds text[], clk timestamptz, room int, queue_mode text)
returns bigint[]
language plpgsql
set plan_cache_mode = force_generic_plan
as $$
begin
	return array(select j.id from pgjob.jobs j
		where j.queue = q and j.state = 'available'
		  and (j.limit_key is not null or j.ordering_key is not null)
		  and coalesce(j.limit_key, j.ordering_key) = k
		  and j.run_at <= clk and j.kind = any(kinds)
		  and j.kind <> all(paused_kinds)
		  and (queue_mode <> 'per_key' or j.ordering_key is null
		   or not exists (select 1 from pgjob.jobs o
			where o.queue = q and o.ordering_key = j.ordering_key
			  and o.id < j.id
			  and o.state in ('available', 'running')))
		order by j.priority, j.run_at, j.id
		limit room for update skip locked);
end
$$;

-- The one place in claim_limited()'s text: found by a pattern that
-- ignores how the lines are indented, and refused unless found once.
do $$
declare
	def text;
	pat text := 'got := array\(select j\.id from pgjob\.jobs j\s+'
		'where j\.queue = q and j\.state = ''available''.*?'
		'limit room for update skip locked\);';
	n int;
begin
	select pg_get_functiondef(p.oid) into def from pg_proc p
	  join pg_namespace n on n.oid = p.pronamespace
	  where n.nspname = 'pgjob' and p.proname = 'claim_limited';
	select count(*) into n from regexp_matches(def, pat, 'g');
	if n <> 1 then
		raise exception 'pgjob.claim_limited(): the key''s candidate '
			'scan was found % times, not once', n;
	end if;
	execute regexp_replace(def, pat, 'got := pgjob.key_candidates(q, k, '
		'kinds, l.paused_kinds, clk, room, queue_mode);');
end
$$;
