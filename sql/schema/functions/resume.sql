-- Resumes the queue (kind null), or one kind of it.  Each pause is undone
-- by its own resume: resuming the queue leaves a kind paused on its own
-- (for its own reason) paused.
create or replace function pgjob.resume(queue text, kind text default null)
returns void
language plpgsql
as $$
#variable_conflict use_variable
begin
	perform pgjob.check_queue(queue);
	update pgjob.limits l
	   set paused = case when kind is null then false else l.paused end,
	       paused_kinds = case when kind is null then l.paused_kinds
		else array_remove(l.paused_kinds, kind) end,
	       updated_at = now()
	 where l.queue = queue;
	perform pgjob.limits_tidy(queue);
end
$$;
