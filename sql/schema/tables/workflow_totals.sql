-- Workflows the pruning duty deleted, by outcome: with those still in
-- pgjob.workflows, the metrics' totals.
create table pgjob.workflow_totals (
	one boolean default true not null,
	done bigint default 0 not null,
	failed bigint default 0 not null,
	constraint workflow_totals_one_check check (one)
);

alter table pgjob.workflow_totals add constraint workflow_totals_pkey primary key (one);

insert into pgjob.workflow_totals default values;
