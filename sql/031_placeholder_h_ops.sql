-- PLACEHOLDER of branch h-ops, not a migration: version 31 belongs to
-- another branch, and the migrations must be numbered without a gap
-- (cmake/embed_sql.cmake).  Delete this file when that branch's
-- sql/031_*.sql is merged.
select 1;
