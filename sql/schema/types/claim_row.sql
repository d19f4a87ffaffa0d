-- What an unlocked claim returns, kept until its bound is written
-- (pgjob.claim_limited()).
create type pgjob.claim_row as (t text, id bigint, kind text, queue text,
	payload text, attempts int, max_attempts int, token bigint,
	ordering_key text, pr smallint, ra bigint, lost int, bytes bigint);
