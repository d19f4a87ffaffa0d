-- Placeholder for migration 030, which another branch of issue 46 writes
-- (SQL security).  It only lets this branch build and migrate on its own:
-- drop this file when merging that branch's sql/030_*.sql.
select 1;
