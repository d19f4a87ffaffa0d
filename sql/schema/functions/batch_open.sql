-- Opens a batch (docs/workflows.md, "Batches"): its callback job, of kind
-- callback_kind with callback_payload, is enqueued once the batch is
-- sealed and all its jobs have ended; always, or only when all ended done
-- (callback_on => 'success').  Returns the batch's id; the batch records
-- the role that opened it (opened_by).
create or replace function pgjob.batch_open(callback_kind text default null,
	callback_payload jsonb default '{}', callback_on text default 'always',
	callback_queue text default null, name text default null)
returns bigint
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
	b bigint;
	c record;
begin
	if callback_on is null or callback_on not in ('always', 'success') then
		raise exception 'pgjob.batch_open: callback_on must be always or success, not "%"',
			callback_on using errcode = '22023';
	end if;
	if callback_kind is not null then
		select * into c from pgjob.check_job('pgjob.batch_open', callback_kind,
			callback_payload, null, 0, null, 1);
		if c.checked ? 'pgjob' then
			raise exception 'pgjob.batch_open: the callback''s payload cannot have a "pgjob" key'
				using errcode = '22023',
				hint = 'The batch''s counts go there ("pgjob": {"batch": ...}).';
		end if;
	end if;
	insert into pgjob.batches (name, callback_kind, callback_payload,
		callback_on, callback_queue, opened_by)
	values (name, callback_kind, coalesce(callback_payload, '{}'),
		callback_on, callback_queue, quote_ident(session_user)::regrole)
	returning id into b;
	return b;
end
$$;
