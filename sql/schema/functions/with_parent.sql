-- payload with what its parents gave (add, parents_of()'s form) under
-- "pgjob".  A job with parents has no "pgjob" key of its own
-- (pgjob.enqueue() refuses it); a payload that is not an object (written
-- behind pgjob.enqueue()'s back) is kept as it is: never an error.
-- Stable, as jsonb_build_object() is: so the planner inlines it into the
-- update that releases children.  Declared immutable, it was a call of
-- its own per child (the planner inlines no immutable function whose
-- body is only stable), a tenth of a fan-out's release.
create or replace function pgjob.with_parent(payload jsonb, add jsonb) returns jsonb
language sql stable
as $$
	select case when jsonb_typeof(payload) = 'object' and add <> '{}'
		then payload || jsonb_build_object('pgjob', add)
		else payload end
$$;
