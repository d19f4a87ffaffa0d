-- The longest prefix of the candidates got (in claim order) whose costs
-- fit in tok tokens (null: no rate) and in ktok (null: no key rate).  A
-- first job costlier than a bucket can hold goes when the bucket is full,
-- and leaves it in debt.
create or replace function pgjob.take_prefix(got bigint[], tok float8, cap int,
	ktok float8, kcap int, out took bigint[], out spent bigint,
	out next_cost int)
language plpgsql
as $$
begin
	if tok is null and ktok is null then
		took := got;
		spent := 0;
		return;
	end if;
	select coalesce(array_agg(s.id order by s.n) filter (where s.fits), '{}'),
	       coalesce(sum(s.cost) filter (where s.fits), 0),
	       min(s.cost) filter (where not s.fits)
	  into took, spent, next_cost
	  from (select t.id, t.n, t.cost,
		  (tok is null or t.cum <= tok
		   or (t.n = 1 and tok >= least(t.cost, cap)))
		  and (ktok is null or t.cum <= ktok
		   or (t.n = 1 and ktok >= least(t.cost, kcap))) as fits
		  from (select u.id, u.n, j.cost,
			  sum(j.cost) over (order by u.n) as cum
			  from unnest(got) with ordinality u(id, n)
			  join pgjob.jobs j on j.id = u.id) t) s;
end
$$;
