/*
 * groups: the supervisor's workers counted by group (internal.h): how many
 * each database's group asks for, which group a worker is in, how many are
 * alive; and the snapshot of them that report.c reads (report.h).
 */
#include <stdlib.h>

#include "common/config.h"
#include "common/util.h"
#include "daemon/internal.h"
#include "daemon/report.h"

/* The workers of group g: -w, else its database's, else workers:. */
int
supervisor_group_workers(const struct supervisor *s, int g)
{
	if (s->workers_override > 0)
		return s->workers_override;
	return s->cfg->ndatabases ? s->cfg->databases[g].workers
				  : s->cfg->workers;
}

/* All the workers: the groups' in turn, in s->children. */
int
supervisor_nworkers(const struct supervisor *s)
{
	int n = 0;
	for (int g = 0; g < s->ngroups; g++)
		n += supervisor_group_workers(s, g);
	return n;
}

/* The group of the worker at index in s->children (current config). */
int
supervisor_group_of(const struct supervisor *s, int index)
{
	for (int g = 0; g < s->ngroups; g++) {
		if (index < supervisor_group_workers(s, g))
			return g;
		index -= supervisor_group_workers(s, g);
	}
	return s->ngroups - 1;
}

/* Worker processes alive: active and retired. */
int
supervisor_running(const struct supervisor *s)
{
	int n = 0;
	for (int i = 0; i < s->nchildren; i++)
		n += s->children[i].pid > 0;
	for (const struct child *r = s->retired; r; r = r->next)
		n++;
	return n;
}

void
supervisor_snapshot(const struct supervisor *s, struct report_snapshot *r)
{
	int nw = supervisor_nworkers(s), k = 0;
	*r = (struct report_snapshot){
		.ngroups = s->ngroups,
		.labelled = s->cfg->ndatabases > 0,
		.reloads_ok = s->reloads_ok,
		.reloads_failed = s->reloads_failed,
		.last_reload_ok = s->last_reload_ok,
		.last_reload_s = s->last_reload_s,
		.stopping = s->stopping != 0,
		.lease_ms = s->cfg->lease_ms,
	};
	r->groups = xcalloc((size_t)s->ngroups, sizeof(*r->groups));
	/* Two entries per child (sidx, number) in one block for all groups. */
	int *ints = xcalloc(2 * (size_t)s->nchildren + 1, sizeof(int));
	for (int g = 0; g < s->ngroups; g++) {
		struct report_group *rg = &r->groups[g];
		rg->name = s->groups[g].name;
		rg->stats = s->groups[g].stats;
		rg->sidx_high = s->groups[g].sidx_high;
		rg->workers = supervisor_group_workers(s, g);
		rg->sidx = ints + k;
		rg->number = ints + s->nchildren + k;
		for (int i = 0; i < nw && i < s->nchildren; i++)
			if (supervisor_group_of(s, i) == g) {
				rg->number[rg->nactive] = i + 1;
				rg->sidx[rg->nactive++] = s->children[i].sidx;
			}
		k += rg->nactive;
	}
	r->pids = xcalloc((size_t)supervisor_running(s) + 1, sizeof(pid_t));
	for (int i = 0; i < s->nchildren; i++)
		if (s->children[i].pid > 0)
			r->pids[r->npids++] = s->children[i].pid;
	for (const struct child *c = s->retired; c; c = c->next)
		r->pids[r->npids++] = c->pid;
}

void
supervisor_snapshot_free(struct report_snapshot *r)
{
	/* The block of every group's entries starts at the first's. */
	if (r->ngroups)
		free(r->groups[0].sidx);
	free(r->groups);
	free(r->pids);
}
