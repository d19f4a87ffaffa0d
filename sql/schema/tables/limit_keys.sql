-- Per-key token buckets (rate_per_key); a key without a row has a full
-- bucket.  Rows whose bucket is full again are pruned.
create table pgjob.limit_keys (
	queue text not null,
	key text not null,
	tokens double precision,
	tokens_at timestamp with time zone,
	holders bigint[]
)
with (fillfactor='50');

alter table pgjob.limit_keys add constraint limit_keys_pkey primary key (queue, key);
