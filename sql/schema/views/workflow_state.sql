-- Each workflow and where it stands: its steps per state; running until
-- every step has ended, then done, or failed when one ended dead or
-- cancelled.  (A step that waits for a retry of a dead parent has not
-- ended.)
create or replace view pgjob.workflow_state as
select w.id, w.name, w.created_at,
	w.steps,
	count(*) filter (where j.state = 'waiting') as waiting,
	count(*) filter (where j.state = 'available') as available,
	count(*) filter (where j.state = 'running') as running,
	count(*) filter (where j.state = 'done') as done,
	count(*) filter (where j.state = 'dead') as dead,
	count(*) filter (where j.state = 'cancelled') as cancelled,
	case when w.finished_at is null then 'running'
	     when w.failed > 0 then 'failed' else 'done' end as state,
	w.finished_at
  from pgjob.workflows w
  left join pgjob.jobs j on j.workflow_id = w.id
 group by w.id;
