-- The schema every pgjobd object lives in.
create schema pgjob;
