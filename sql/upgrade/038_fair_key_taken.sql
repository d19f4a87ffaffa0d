-- Version 38: a fair key's turn that a claim's own size cut short goes on
-- in the next claim (pgjob.claim_limited(), restated from its file), so
-- that a key of weight 3 gets three jobs a turn however few each claim
-- asks: what the key at the cursor has had of its turn so far.
-- Nullable with no default: a change of the catalog only.
alter table pgjob.limits add column key_taken integer;
