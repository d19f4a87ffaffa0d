-- Idempotency keys for the application's own requests
-- (docs/idempotency.md).  A client sends a key with each request that
-- changes something; the application takes the key, makes the change and
-- stores its response, all in one transaction.  The row is the lock: while
-- the first request has not committed, its uncommitted row makes a second
-- insert of the same key wait for it, so the same key never runs twice.
create table pgjob.request_keys (
	scope text default ''::text not null,
	key text not null,
	fingerprint text not null,
	status text default 'in_progress'::text not null,
	response jsonb,
	response_status integer,
	created_at timestamp with time zone default now() not null,
	finished_at timestamp with time zone,
	expires_at timestamp with time zone not null,
	constraint request_keys_done_check check (((status = 'in_progress'::text) or ((response_status is not null) and (finished_at is not null)))),
	constraint request_keys_key_check check ((key <> ''::text)),
	constraint request_keys_status_check check ((status = any (array['in_progress'::text, 'done'::text])))
)
with (fillfactor='90', autovacuum_vacuum_scale_factor='0.01', autovacuum_vacuum_insert_scale_factor='0.05', autovacuum_analyze_scale_factor='0.02');

alter table pgjob.request_keys add constraint request_keys_pkey primary key (scope, key);

create index request_keys_expires_idx on pgjob.request_keys (expires_at);
