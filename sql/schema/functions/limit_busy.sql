-- Running jobs and held slots of q (of key, when given) at clk, and when
-- the first of them expires.  A job counts while its lease holds: a worker
-- killed with its jobs gives their slots back when their leases expire.
create or replace function pgjob.limit_busy(
	q text,
	key text,
	clk timestamp with time zone,
	out busy integer,
	out first_expiry timestamp with time zone)
returns record
language plpgsql
stable
as $$
#variable_conflict use_variable
declare
	n1 bigint;
	f1 timestamptz;
	n2 bigint;
	f2 timestamptz;
begin
	if key is null then
		select count(*), min(x.locked_until) into n1, f1 from pgjob.jobs x
		 where x.queue = q and x.finished_at is null and coalesce(x.parents_left, 0) = 0 and x.state = 'running' and x.locked_until >= clk;
	else
		select count(*), min(x.locked_until) into n1, f1 from pgjob.jobs x
		 where x.queue = q and x.finished_at is null and coalesce(x.parents_left, 0) = 0 and x.state = 'running'
		   and (x.limit_key is not null or x.ordering_key is not null)
		   and x.cost is not null
		   and coalesce(x.limit_key, x.ordering_key) = key
		   and x.locked_until >= clk;
	end if;
	select count(*), min(z.expires_at) into n2, f2 from pgjob.limit_holds z
	 where z.queue = q and z.expires_at >= clk and (key is null or z.key = key);
	busy := n1 + n2;
	first_expiry := least(f1, f2);
end
$$;
