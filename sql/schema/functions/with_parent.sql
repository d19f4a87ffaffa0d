-- payload with what its parents gave (add, parents_of()'s form) under
-- "pgjob".  A job with parents has no "pgjob" key of its own
-- (pgjob.enqueue() refuses it); a payload that is not an object (written
-- behind pgjob.enqueue()'s back) is kept as it is: never an error.
create or replace function pgjob.with_parent(payload jsonb, add jsonb) returns jsonb
language sql immutable
as $$
	select case when jsonb_typeof(payload) = 'object' and add <> '{}'
		then payload || jsonb_build_object('pgjob', add)
		else payload end
$$;
