-- Cluster-wide leases with fencing tokens: leased tasks, the scheduler, the
-- pruning duty.  The token grows at every change of holder.
create table pgjob.leases (
	name text not null,
	holder text,
	token bigint default 0 not null,
	expires_at timestamp with time zone
);

alter table pgjob.leases add constraint leases_pkey primary key (name);
