-- The schema every pgjobd object lives in.  It may exist already, empty:
-- an administrator may create it for the role that runs `pgjob migrate`
-- (create schema pgjob authorization ...), which then needs no right to
-- create schemas in the database.
create schema if not exists pgjob;
