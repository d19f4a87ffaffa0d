-- The jobs of a limited claim written running, by their row versions (tids,
-- the candidates a claim that did not lock the queue's row read and locked)
-- or by their ids: what pgjob.claim_limited() returns of each ('c' rows of
-- pgjob.claim_row).  A function of its own for its plan: pgjob.claim_limited()
-- runs under plan_cache_mode = auto (its candidate scan wants custom plans),
-- where this update was planned again at every claim (55 µs, more than its
-- run; version 45), and its plan does not depend on its parameters.
create or replace function pgjob.claim_write(tids tid[], ids bigint[],
	holder text, lease_ms bigint, clk timestamptz, max_payload bigint)
returns pgjob.claim_row[]
language plpgsql
set plan_cache_mode = force_generic_plan
as $$
declare
	crows pgjob.claim_row[];
begin
	-- By id: the claim's rows, each locked by its candidate scan, so the
	-- version found now is the one to write.
	if tids is null then
		tids := array(select j.ctid from pgjob.jobs j
			       where j.id = any(ids));
	end if;
	with u as (
		update pgjob.jobs j set state = 'running',
			locked_by = holder,
			locked_until = clk + lease_ms * interval '1 millisecond',
			lease_token = j.lease_token + 1,
			attempts = j.attempts + 1,
			lost_attempts = j.lost_attempts
				+ case when j.state = 'running' then 1 else 0 end,
			attempted_at = clk
		 where j.ctid = any(tids)
		returning j.id, j.kind, j.queue, j.payload::text as p,
			j.attempts, j.max_attempts, j.lease_token,
			j.ordering_key, j.lost_attempts, j.run_at)
	select array_agg(row('c', u.id, u.kind, u.queue,
			case when octet_length(u.p) <= max_payload then u.p end,
			u.attempts, coalesce(u.max_attempts, 0), u.lease_token,
			u.ordering_key, null,
			(extract(epoch from now() - u.run_at) * 1000)::bigint,
			u.lost_attempts, octet_length(u.p))::pgjob.claim_row)
	  into crows from u;
	return coalesce(crows, '{}');
end
$$;
