-- pgjobd schema, version 4: idempotency keys for the application's own
-- requests (docs/idempotency.md).
--
-- A client sends a key with each request that changes something; the
-- application takes the key, makes the change and stores its response, all
-- in one transaction.  A retry after a dropped connection finds the stored
-- response instead of making the change twice.  The row is the lock: while
-- the first request has not committed, its uncommitted row makes a second
-- insert of the same key wait for it (PostgreSQL's unique index behaviour),
-- so the same key never runs twice, and a request that dies before its
-- commit leaves no trace at all.

create table pgjob.request_keys (
	-- Who the key belongs to (a user, a tenant): keys of different scopes
	-- never meet, so one client cannot read another's response by
	-- guessing its key.
	scope text not null default '',
	key text not null,
	-- What the request was, as the application chose to describe it (a
	-- hash of method, path and body): the same key with another
	-- fingerprint is refused, never answered with the wrong response.
	fingerprint text not null,
	-- 'in_progress' only ever exists inside the transaction that took the
	-- key: the request_keys_finished trigger refuses to commit it.
	status text not null default 'in_progress',
	response jsonb,
	response_status int,
	created_at timestamptz not null default now(),
	finished_at timestamptz,
	-- Past this time the key is free again, pruned or not.
	expires_at timestamptz not null,
	constraint request_keys_pkey primary key (scope, key),
	constraint request_keys_status_check check (status in
		('in_progress', 'done')),
	constraint request_keys_key_check check (key <> ''),
	constraint request_keys_done_check check (status = 'in_progress' or
		(response_status is not null and finished_at is not null))
-- Every key is inserted and then updated by request_finish in the same
-- transaction; the update touches no indexed column, so room on the page
-- keeps it a HOT update.
) with (fillfactor = 90);

-- Pruning deletes expired keys in batches, oldest first.
create index request_keys_expires_idx on pgjob.request_keys (expires_at);

-- Every request writes a row and pruning deletes it a day later: vacuum
-- early rather than at 20 % dead tuples, as for pgjob.jobs.
alter table pgjob.request_keys set (autovacuum_vacuum_scale_factor = 0.01,
	autovacuum_vacuum_insert_scale_factor = 0.05,
	autovacuum_analyze_scale_factor = 0.02);

-- Takes a key, waiting for a transaction that holds it uncommitted.  Returns
-- 'new' when this transaction now holds the key, 'done' with the stored
-- response of the request that finished it, or 'in_progress' when this very
-- transaction took it already.  Raises PJ422 for a live key with another
-- fingerprint.  Called by pgjob.request_begin(), which checks the
-- arguments.
create function pgjob.request_take(take_scope text, take_key text,
	take_fingerprint text, ttl interval)
returns table(state text, response jsonb, response_status int)
language plpgsql
as $$
declare
	r record;
begin
	loop
		-- A key that an uncommitted transaction inserted makes this
		-- insert wait until that transaction ends: on its rollback the
		-- insert goes ahead, on its commit it conflicts.
		insert into pgjob.request_keys as k (scope, key, fingerprint,
			expires_at)
		values (take_scope, take_key, take_fingerprint, now() + ttl)
		on conflict on constraint request_keys_pkey do nothing
		returning k.key into r;
		if found then
			return query select 'new'::text, null::jsonb, null::int;
			return;
		end if;
		-- An expired key is a new one, whatever it was before and
		-- whether or not pruning has reached it yet.  The row lock
		-- makes a concurrent taker wait here as it would at the insert.
		update pgjob.request_keys k
		   set fingerprint = take_fingerprint, status = 'in_progress',
		       response = null, response_status = null,
		       created_at = now(), finished_at = null,
		       expires_at = now() + ttl
		 where k.scope = take_scope and k.key = take_key
		   and k.expires_at <= now()
		returning k.key into r;
		if found then
			return query select 'new'::text, null::jsonb, null::int;
			return;
		end if;
		select k.fingerprint, k.status, k.response, k.response_status,
		       k.expires_at
		  into r from pgjob.request_keys k
		 where k.scope = take_scope and k.key = take_key;
		-- Gone (pruned, deleted) or expired between the statements:
		-- take it again.
		if found and r.expires_at > now() then
			if r.fingerprint <> take_fingerprint then
				raise exception 'pgjob: request key "%" was used for another request (a different fingerprint)',
					take_key
					using errcode = 'PJ422',
					hint = 'Send a new key for a new request; retry a request with its own key and the same body.';
			end if;
			return query select r.status, r.response,
				r.response_status;
			return;
		end if;
	end loop;
end
$$;

-- The same with NOWAIT semantics: a key that another transaction holds gives
-- 'in_progress' at once instead of a wait.  lock_timeout is set for this
-- function only and restored on return; catching the timeout costs a
-- subtransaction, which is why waiting is the default.  Any lock wait counts
-- (the key's row, or a table lock held by DDL): the answer is then
-- 'in_progress' too, a retry later is the right reaction to both.
create function pgjob.request_take_nowait(take_scope text, take_key text,
	take_fingerprint text, ttl interval)
returns table(state text, response jsonb, response_status int)
language plpgsql
set lock_timeout = '1ms'
as $$
declare
	r record;
begin
	begin
		select * into r from pgjob.request_take(take_scope, take_key,
			take_fingerprint, ttl) t;
	exception when lock_not_available then
		return query select 'in_progress'::text, null::jsonb,
			null::int;
		return;
	end;
	return query select r.state, r.response, r.response_status;
end
$$;

-- The first statement of a request's transaction: takes its idempotency key.
-- state 'new': this request holds the key, make the change in this
-- transaction and call pgjob.request_finish() before commit.  'done': an
-- earlier request with this key committed; here are its response and
-- status, change nothing.  'in_progress': another transaction holds the key
-- (only with nowait, or when the caller's own lock_timeout fires: without
-- nowait, a request waits for the holder to commit or roll back), or this
-- transaction took it already.  A live key with another fingerprint raises
-- SQLSTATE PJ422.  The key lives for ttl from now.
create function pgjob.request_begin(
	key text,
	fingerprint text,
	scope text default '',
	ttl interval default '24 hours',
	nowait boolean default false)
returns table(state text, response jsonb, response_status int)
language plpgsql
as $$
#variable_conflict use_variable
begin
	if key is null or length(key) not between 1 and 255 then
		raise exception 'pgjob.request_begin: key must be 1 to 255 characters'
			using errcode = '22023';
	end if;
	if fingerprint is null then
		raise exception 'pgjob.request_begin: fingerprint must not be null'
			using errcode = '22023';
	end if;
	scope := coalesce(scope, '');
	if length(scope) > 255 then
		raise exception 'pgjob.request_begin: scope must be at most 255 characters'
			using errcode = '22023';
	end if;
	if ttl is null or ttl <= interval '0' then
		raise exception 'pgjob.request_begin: ttl must be positive, not %',
			coalesce(ttl::text, 'null') using errcode = '22023';
	end if;
	if coalesce(nowait, false) then
		return query select * from pgjob.request_take_nowait(scope, key,
			fingerprint, ttl);
	else
		return query select * from pgjob.request_take(scope, key,
			fingerprint, ttl);
	end if;
end
$$;

-- The last statement before commit: stores the response of the request that
-- holds the key in this transaction.  Raises PJ002 when this transaction
-- holds no such key (no request_begin, a request_begin that answered 'done',
-- or a second request_finish).
create function pgjob.request_finish(
	key text,
	response jsonb,
	response_status int default 200,
	scope text default '')
returns void
language plpgsql
as $$
#variable_conflict use_variable
begin
	if response_status is null then
		raise exception 'pgjob.request_finish: response_status must not be null'
			using errcode = '22023';
	end if;
	-- Only this transaction's own row can be visible as 'in_progress':
	-- others' are uncommitted, and none is ever committed in that state.
	update pgjob.request_keys k
	   set status = 'done', response = response,
	       response_status = response_status, finished_at = now()
	 where k.scope = coalesce(scope, '') and k.key = key
	   and k.status = 'in_progress';
	if not found then
		raise exception 'pgjob.request_finish: this transaction holds no request key "%" in scope "%"',
			key, coalesce(scope, '') using errcode = 'PJ002',
			hint = 'Call pgjob.request_begin() first, and pgjob.request_finish() once, only when it answered ''new''.';
	end if;
end
$$;

-- At commit: a key taken in this transaction must have its response stored.
-- Otherwise a retry would find neither a response nor a request to wait for;
-- refusing the commit rolls the change back with it, loudly.  (A transaction
-- that says SET CONSTRAINTS ALL IMMEDIATE gets this check at request_begin:
-- do not.)
create function pgjob.request_keys_finished() returns trigger
language plpgsql
as $$
begin
	perform 1 from pgjob.request_keys k
	  where k.scope = new.scope and k.key = new.key
	    and k.status = 'in_progress';
	if found then
		raise exception 'pgjob: request key "%" in scope "%" was taken but no response was stored',
			new.key, new.scope using errcode = 'PJ002',
			hint = 'Call pgjob.request_finish() before commit, or roll back.';
	end if;
	return null;
end
$$;

create constraint trigger request_keys_finished
	after insert or update on pgjob.request_keys
	deferrable initially deferred
	for each row when (new.status = 'in_progress')
	execute function pgjob.request_keys_finished();

-- Deletes up to batch expired keys, oldest first, and returns how many.  One
-- batch per call, each in the caller's transaction: call it again while it
-- returns batch.  Skips rows that a request is taking over right now.
create function pgjob.prune_request_keys(batch int default 10000)
returns bigint
language sql
as $$
	with d as (
		delete from pgjob.request_keys k
		 where (k.scope, k.key) in (
			select e.scope, e.key from pgjob.request_keys e
			 where e.expires_at <= now()
			 order by e.expires_at
			 limit greatest(coalesce(batch, 10000), 0)
			 for update skip locked)
		   and k.expires_at <= now()
		returning 1)
	select count(*) from d;
$$;
