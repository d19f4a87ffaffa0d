-- What pgjob limits and pgjob status show: each limited queue, its
-- limits, and where it stands now.
create or replace view pgjob.queue_limits as
select l.queue, l.paused, l.paused_kinds, l.global_concurrency,
	l.per_key_concurrency, pgjob.rate_text(l.rate, l.rate_period_ms) as rate,
	case when l.rate is not null then coalesce(l.burst, l.rate) end as burst,
	pgjob.rate_text(l.rate_per_key, l.rate_per_key_period_ms) as rate_per_key,
	case when l.rate_per_key is not null
		then coalesce(l.burst_per_key, l.rate_per_key) end as burst_per_key,
	l.fair, l.source,
	case when l.throttled_until > clock_timestamp()
		then l.throttled_until end as throttled_until,
	case when l.rate is not null then pgjob.bucket(l.tokens, l.tokens_at,
		clock_timestamp(), l.rate, l.rate_period_ms,
		coalesce(l.burst, l.rate)) end as tokens,
	b.busy as running
  from pgjob.limits l
  cross join lateral pgjob.limit_busy(l.queue, null, clock_timestamp()) b;
