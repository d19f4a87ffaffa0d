-- One row of settings that the daemon's database side reads.
create table pgjob.settings (
	one boolean default true not null,
	max_payload_bytes integer default 1048576 not null,
	constraint settings_max_payload_check check (((max_payload_bytes >= 1) and (max_payload_bytes <= 1073741824))),
	constraint settings_one_check check (one)
);

alter table pgjob.settings add constraint settings_pkey primary key (one);

-- Its one row: an installer may set the limit with the setting
-- pgjob.max_payload_bytes (PGOPTIONS='-c pgjob.max_payload_bytes=...').
insert into pgjob.settings (max_payload_bytes)
values (coalesce(nullif(current_setting('pgjob.max_payload_bytes', true),
	'')::int, 1048576));
