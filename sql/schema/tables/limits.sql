-- A queue's flow control (docs/queues.md, "Flow control"): pause,
-- concurrency, rate limits and throttle, set from the config (source
-- 'config') or by SQL ('sql'), and the claim's state of them (tokens,
-- holders, running_ub, the key cursor).  A row is deleted again when
-- nothing is left in it, so that the queue goes back to the ordinary
-- claim.  Its changes are announced on channel pgjob_limits
-- (triggers/limits.sql).
create table pgjob.limits (
	queue text not null,
	paused boolean default false not null,
	paused_kinds text[] default '{}'::text[] not null,
	global_concurrency integer,
	per_key_concurrency integer,
	rate integer,
	rate_period_ms bigint,
	burst integer,
	rate_per_key integer,
	rate_per_key_period_ms bigint,
	burst_per_key integer,
	fair boolean default false not null,
	source text default 'config'::text not null,
	throttled_until timestamp with time zone,
	tokens double precision,
	tokens_at timestamp with time zone,
	key_cursor text,
	holders bigint[],
	busy_ub integer,
	pos_pr smallint,
	pos_ra timestamp with time zone,
	pos_id bigint,
	pos_at timestamp with time zone,
	updated_at timestamp with time zone default now() not null,
	running_ub integer,
	key_taken integer,
	constraint limits_burst_check check (((burst >= 1) and ((burst is null) or (rate is not null)))),
	constraint limits_burst_per_key_check check (((burst_per_key >= 1) and ((burst_per_key is null) or (rate_per_key is not null)))),
	constraint limits_global_check check ((global_concurrency >= 1)),
	constraint limits_per_key_check check ((per_key_concurrency >= 1)),
	constraint limits_queue_check check (((length(queue) >= 1) and (length(queue) <= 200))),
	constraint limits_rate_check check (((rate >= 1) and ((rate_period_ms >= 1) and (rate_period_ms <= '1000000000000000'::bigint)) and ((rate is null) = (rate_period_ms is null)))),
	constraint limits_rate_per_key_check check (((rate_per_key >= 1) and ((rate_per_key_period_ms >= 1) and (rate_per_key_period_ms <= '1000000000000000'::bigint)) and ((rate_per_key is null) = (rate_per_key_period_ms is null)))),
	constraint limits_source_check check ((source = any (array['config'::text, 'sql'::text])))
)
with (fillfactor='50');

alter table pgjob.limits add constraint limits_pkey primary key (queue);
