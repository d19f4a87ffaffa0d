-- The triggers of pgjob.limits.

-- A change of a queue's limits that the workers act on is announced on
-- channel pgjob_limits (pgjob.limits_notify()).
--
-- The update triggers name the columns their conditions compare (version
-- 48; every update before): a limited claim writes the row's bucket,
-- bound and position at every call (pgjob.claim_limited()), and each
-- statement that fired them compiled their conditions again, ~20 us of a
-- claim of four jobs.  A change of those columns names them.
create or replace trigger limits_notify_insert_delete after insert or delete
	on pgjob.limits for each row execute function pgjob.limits_notify();
create or replace trigger limits_notify_update after update of paused,
	paused_kinds, global_concurrency, per_key_concurrency, rate,
	rate_period_ms, burst, rate_per_key, rate_per_key_period_ms,
	burst_per_key, fair, throttled_until on pgjob.limits
	for each row when ((old.paused, old.paused_kinds, old.global_concurrency,
		old.per_key_concurrency, old.rate, old.rate_period_ms, old.burst,
		old.rate_per_key, old.rate_per_key_period_ms, old.burst_per_key,
		old.fair, old.throttled_until)
	 is distinct from (new.paused, new.paused_kinds,
		new.global_concurrency, new.per_key_concurrency, new.rate,
		new.rate_period_ms, new.burst, new.rate_per_key,
		new.rate_per_key_period_ms, new.burst_per_key, new.fair,
		new.throttled_until))
	execute function pgjob.limits_notify();

-- A queue's key holders are forgotten when its per-key concurrency
-- changes (pgjob.limit_keys_forget()).
create or replace trigger limits_forget_keys_insert after insert on pgjob.limits
	for each row execute function pgjob.limit_keys_forget();
create or replace trigger limits_forget_keys_update
	after update of per_key_concurrency on pgjob.limits
	for each row
	when (old.per_key_concurrency is distinct from new.per_key_concurrency)
	execute function pgjob.limit_keys_forget();
