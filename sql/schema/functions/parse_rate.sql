-- "10/s", "600/min", "100/10s", "5/1.5h": (count, period in ms).  The same
-- grammar as the config's (src/common/rate.c).
create or replace function pgjob.parse_rate(spec text, out n int, out period_ms bigint)
language plpgsql
immutable
as $$
declare
	m text[];
	num numeric;
	unit_ms numeric;
begin
	-- ASCII white space only, not \s: that follows the server's locale
	-- (U+3000 is a space under C.UTF-8), and a rate must mean the same on
	-- every server and in the config (tests/fixtures/rates.txt).
	m := regexp_match(spec, '^[ \t\n\r\f\v]*([0-9]{1,9})[ \t\n\r\f\v]*/[ \t\n\r\f\v]*([0-9]{1,15}(\.[0-9]{1,6})?)?[ \t\n\r\f\v]*([a-z]+)[ \t\n\r\f\v]*$');
	if m is null then
		raise exception 'pgjob: rate "%" is not COUNT/PERIOD (10/s, 600/min, 100/10s)',
			spec using errcode = '22023';
	end if;
	unit_ms := case m[4]
		when 'ms' then 1
		when 's' then 1000 when 'sec' then 1000 when 'second' then 1000
		when 'm' then 60000 when 'min' then 60000 when 'minute' then 60000
		when 'h' then 3600000 when 'hour' then 3600000
		when 'd' then 86400000 when 'day' then 86400000
	end;
	if unit_ms is null then
		raise exception 'pgjob: rate "%": unknown unit "%" (ms, s, min, h, d)',
			spec, m[4] using errcode = '22023';
	end if;
	n := m[1]::int;
	num := coalesce(m[2]::numeric, 1);
	if n < 1 then
		raise exception 'pgjob: rate "%": the count must be at least 1', spec
			using errcode = '22023';
	end if;
	if round(num * unit_ms) < 1 or round(num * unit_ms) > 1000000000000000 then
		raise exception 'pgjob: rate "%": the period must be between 1ms and 31,000 years',
			spec using errcode = '22023';
	end if;
	period_ms := round(num * unit_ms)::bigint;
end
$$;
