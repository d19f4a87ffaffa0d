-- Placeholder for the lead's migration 008 (another branch), so that this
-- branch's 009 builds: embed_sql.cmake wants consecutive numbers.  Delete
-- this file when merging; 009 does not depend on 008.
select 1;
