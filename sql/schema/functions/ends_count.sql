-- Count the ends noted by the row trigger (pgjob.jobs_ended()): each
-- workflow's and batch's counts once for all its jobs that ended, then the
-- children of the parents among them released or cancelled
-- (pgjob.parents_ended()).  The children that cancels end in turn: their
-- row triggers note them, and the loop counts them next, until nothing is
-- noted.  Released children are announced with one NOTIFY.
--
-- Rows are locked in id order within each kind (children, then
-- workflows, then batches), so two transactions that share some take them
-- in the same order; and the children before the workflows, as a cancel
-- of a step does (it holds the step's row, then counts its end for the
-- workflow): until version 49 a parent's end took the workflow's row
-- first, and its end and a cancel of its child at the same moment
-- deadlocked (test_workflow_ends' test_cancel_beside_parents_end).  The
-- state read is the one the statement wrote: the noted jobs have ended,
-- and nothing here changes an ended job.
create or replace function pgjob.ends_count() returns void
language plpgsql
as $$
declare
	ids bigint[];
	par bigint[];
	wf boolean;
	bt boolean;
	b bigint;
	due int := 0;
begin
	perform set_config('pgjob.releasing', 'on', true);
	loop
		ids := string_to_array(rtrim(current_setting('pgjob.ended', true),
			','), ',')::bigint[];
		exit when coalesce(cardinality(ids), 0) = 0;
		perform set_config('pgjob.ended', '', true);
		select array_agg(j.id) filter (where j.children),
		       bool_or(j.workflow_id is not null),
		       bool_or(j.batch_id is not null)
		  into par, wf, bt
		  from pgjob.jobs j where j.id = any(ids);
		if par is not null then
			due := due + pgjob.parents_ended(par);
		end if;
		if wf then
			perform 1 from pgjob.workflows w
			 where w.id = any(array(select j.workflow_id
				from pgjob.jobs j where j.id = any(ids)))
			 order by w.id for update;
			update pgjob.workflows w set ended = w.ended + x.n,
				failed = w.failed + x.f,
				finished_at = case when w.ended + x.n >= w.steps
					then coalesce(w.finished_at, now()) end
			  from (select j.workflow_id, count(*)::int as n,
				       (count(*) filter (where j.state <> 'done'))::int as f
				  from pgjob.jobs j
				 where j.id = any(ids) and j.workflow_id is not null
				 group by j.workflow_id) x
			 where w.id = x.workflow_id;
		end if;
		if bt then
			perform 1 from pgjob.batches x
			 where x.id = any(array(select j.batch_id
				from pgjob.jobs j where j.id = any(ids)))
			 order by x.id for update;
			update pgjob.batches x set done = x.done + c.done,
				dead = x.dead + c.dead,
				cancelled = x.cancelled + c.cancelled
			  from (select j.batch_id,
				       (count(*) filter (where j.state = 'done'))::int as done,
				       (count(*) filter (where j.state = 'dead'))::int as dead,
				       (count(*) filter (where j.state = 'cancelled'))::int as cancelled
				  from pgjob.jobs j
				 where j.id = any(ids) and j.batch_id is not null
				 group by j.batch_id) c
			 where x.id = c.batch_id;
			for b in select distinct j.batch_id from pgjob.jobs j
				  where j.id = any(ids) and j.batch_id is not null
				  order by 1 loop
				perform pgjob.batch_check(b);
			end loop;
		end if;
	end loop;
	perform set_config('pgjob.releasing', '', true);
	if due > 0 then
		perform pg_notify('pgjob', pg_current_xact_id()::text || ' ' || due);
	end if;
end
$$;
