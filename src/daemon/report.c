/*
 * report: what the supervisor tells the outside about its workers, read
 * from the stats areas they write: /metrics (with databases:, each
 * database's series labelled database="NAME"; the supervisor's own, reloads
 * and process_*, once without it), /healthz, and systemd's
 * STATUS= line.  It reads; it never changes the supervisor's state.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include "common/config.h"
#include "common/metrics.h"
#include "common/stats.h"
#include "common/util.h"
#include "daemon/internal.h"
#include "daemon/procmetrics.h"
#include "daemon/prom.h"

/* The stats entries of group g's active workers, for the health checks,
 * and their worker=N numbers (number may be NULL); returns how many. */
static int
active_entries(const struct supervisor *s, int g, int *idx, int *number)
{
	int n = 0;
	for (int i = 0; i < supervisor_nworkers(s) && i < s->nchildren; i++)
		if (supervisor_group_of(s, i) == g) {
			if (number)
				number[n] = i + 1;
			idx[n++] = s->children[i].sidx;
		}
	return n;
}

int
report_healthy(const struct supervisor *s, int64_t stale_ms, bool all,
	       struct buf *why)
{
	int idx[s->nchildren + 1], number[s->nchildren + 1], healthy = 0;
	char one[160]; /* stats_healthy() needs 128 */
	for (int g = 0; g < s->ngroups; g++) {
		int n = active_entries(s, g, idx, number);
		healthy += stats_healthy(s->groups[g].stats, idx, number, n,
					 stale_ms, one, sizeof(one));
		if (why && s->groups[g].name)
			buf_appendf(why, "database %s: ", s->groups[g].name);
		if (why)
			buf_appendf(why, "%s", one);
	}
	return all ? healthy == s->ngroups : healthy > 0;
}

/* build_info and process_*: the supervisor's own, and its live workers'
 * (daemon/procmetrics.c). */
static void
render_processes(const struct supervisor *s, struct buf *body)
{
	pid_t pids[s->nchildren + 1 + supervisor_running(s)];
	int n = 0;
	for (int i = 0; i < s->nchildren; i++)
		if (s->children[i].pid > 0)
			pids[n++] = s->children[i].pid;
	for (const struct child *r = s->retired; r; r = r->next)
		pids[n++] = r->pid;
	procmetrics_render(body, pids, n);
}

/* Reloads: one count for the process, never per database. */
static void
render_reloads(const struct supervisor *s, struct buf *body)
{
	metrics_header(body, "pgjobd_config_reloads_total", "counter",
		       "Config reloads (SIGHUP), by result.");
	metrics_counter(body, "pgjobd_config_reloads_total", NULL,
			"result=\"success\"", (double)s->reloads_ok);
	metrics_counter(body, "pgjobd_config_reloads_total", NULL,
			"result=\"failure\"", (double)s->reloads_failed);
	metrics_gauge(body, "pgjobd_config_last_reload_successful",
		      "1 when the last reload succeeded (and before any).",
		      NULL, s->last_reload_ok);
	metrics_gauge(body, "pgjobd_config_last_reload_timestamp_seconds",
		      "When the last reload was tried (the start before any).",
		      NULL, (double)s->last_reload_s);
}

/* Every group's series; with databases:, each labelled database="name"
 * (metrics_merge()).  One database keeps the series it always had. */
static void
render_groups(const struct supervisor *s, struct buf *body)
{
	if (!s->cfg->ndatabases) {
		prom_render(s->groups[0].stats, s->groups[0].sidx_high,
			    supervisor_nworkers(s), body);
		return;
	}
	struct buf parts[s->ngroups];
	const char *names[s->ngroups];
	for (int g = 0; g < s->ngroups; g++) {
		parts[g] = (struct buf){0};
		names[g] = s->groups[g].name;
		prom_render(s->groups[g].stats, s->groups[g].sidx_high,
			    supervisor_group_workers(s, g), &parts[g]);
	}
	metrics_merge(body, "database", names, parts, (size_t)s->ngroups);
	for (int g = 0; g < s->ngroups; g++)
		buf_free(&parts[g]);
}

int
report_http(void *arg, const char *path, struct buf *body,
	    const char **content_type)
{
	struct supervisor *s = arg;
	if (strcmp(path, "/metrics") == 0) {
		*content_type = METRICS_CONTENT_TYPE;
		render_groups(s, body);
		render_reloads(s, body);
		render_processes(s, body);
		return 200;
	}
	if (strcmp(path, "/healthz") == 0) {
		/* A worker reaches the database at least every heartbeat. */
		int64_t stale =
			3 * (s->cfg->lease_ms / 3 < 10000 ? s->cfg->lease_ms / 3
							  : 10000);
		if (s->stopping) {
			buf_appendf(body, "stopping\n");
			return 503;
		}
		return report_healthy(s, stale, true, body) ? 200 : 503;
	}
	buf_appendf(body, "not found: try /metrics or /healthz\n");
	return 404;
}

void
report_status_line(const struct supervisor *s, struct buf *b)
{
	int idx[s->nchildren + 1];
	for (int g = 0; g < s->ngroups; g++) {
		const struct stats *st = s->groups[g].stats;
		int n = active_entries(s, g, idx, NULL);
		uint64_t done = 0;
		if (s->groups[g].name)
			buf_appendf(b, "%s%s: ", g ? "; " : "",
				    s->groups[g].name);
		buf_appendf(b, "%d workers, slots ", n);
		for (int i = 0; i < n; i++) {
			if (idx[i] < 0 || idx[i] >= STATS_MAX_WORKERS)
				continue;
			const struct stats_worker *w = &st->w[idx[i]];
			buf_appendf(
				b, "%s%d", i ? "," : "",
				__atomic_load_n(&w->slot, __ATOMIC_RELAXED));
		}
		for (int i = 0; i < s->groups[g].sidx_high; i++) {
			const struct stats_worker *w = &st->w[i];
			uint32_t nk =
				__atomic_load_n(&w->nkinds, __ATOMIC_ACQUIRE);
			for (uint32_t k = 0; k < nk; k++)
				done += __atomic_load_n(&w->kinds[k].done,
							__ATOMIC_RELAXED);
		}
		buf_appendf(b, ", %llu jobs done", (unsigned long long)done);
	}
}
