-- Who waits for whom.  resolved: how the parent ended, once the child has
-- counted it (null until then; a dead parent of a 'wait' child stays
-- unresolved until a retry of it ends done).
create table pgjob.job_deps (
	parent bigint not null,
	child bigint not null,
	resolved text
)
-- Room on each page for every edge's one update (resolved, when its
-- parent's end is counted), so that it is HOT: a fan-out's release writes
-- no index entry per edge (version 39).
with (fillfactor = '50');

alter table pgjob.job_deps add constraint job_deps_pkey primary key (parent, child);

create index job_deps_child_idx on pgjob.job_deps (child);
