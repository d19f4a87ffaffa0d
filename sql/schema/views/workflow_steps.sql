-- Each step of each workflow, with its parents' step names.
create or replace view pgjob.workflow_steps as
select j.workflow_id, j.id, j.step, j.kind, j.queue, j.state, j.attempts,
	j.parents_left, coalesce(j.on_parent_failure, 'cancel') as on_parent_failure,
	array(select coalesce(p.step, p.id::text) from pgjob.job_deps d
		join pgjob.jobs p on p.id = d.parent
	       where d.child = j.id order by p.id) as after,
	j.last_error, j.created_at, j.finished_at
  from pgjob.jobs j
 where j.workflow_id is not null;
