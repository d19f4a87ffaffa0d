-- The schema's version: max(version).  One row per released step of
-- sql/upgrade/ the schema includes; a fresh install writes every one of
-- them at once (sql/README.md).
create table pgjob.schema_version (
	version integer not null,
	name text not null,
	applied_at timestamp with time zone default now() not null
);

alter table pgjob.schema_version add constraint schema_version_pkey primary key (version);
