/*
 * report: /metrics (with databases:, each database's series labelled
 * database="NAME"; the supervisor's own, reloads and process_*, once
 * without it), /healthz, and systemd's STATUS= line, from a snapshot of
 * the supervisor (report.h).
 */
#include "daemon/report.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include "common/metrics.h"
#include "common/stats.h"
#include "daemon/procmetrics.h"
#include "daemon/prom.h"

int
report_healthy(const struct report_snapshot *s, int64_t stale_ms, bool all,
	       struct buf *why)
{
	int healthy = 0;
	char one[160]; /* stats_healthy() needs 128 */
	for (int g = 0; g < s->ngroups; g++) {
		const struct report_group *gr = &s->groups[g];
		healthy +=
			stats_healthy(gr->stats, gr->sidx, gr->number,
				      gr->nactive, stale_ms, one, sizeof(one));
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
render_processes(const struct report_snapshot *s, struct buf *body)
{
	procmetrics_render(body, s->pids, s->npids);
}

/* Reloads: one count for the process, never per database. */
static void
render_reloads(const struct report_snapshot *s, struct buf *body)
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
render_groups(const struct report_snapshot *s, struct buf *body)
{
	if (!s->labelled) {
		prom_render(s->groups[0].stats, s->groups[0].sidx_high,
			    s->groups[0].workers, body);
		return;
	}
	struct buf parts[s->ngroups];
	const char *names[s->ngroups];
	for (int g = 0; g < s->ngroups; g++) {
		parts[g] = (struct buf){0};
		names[g] = s->groups[g].name;
		prom_render(s->groups[g].stats, s->groups[g].sidx_high,
			    s->groups[g].workers, &parts[g]);
	}
	metrics_merge(body, "database", names, parts, (size_t)s->ngroups);
	for (int g = 0; g < s->ngroups; g++)
		buf_free(&parts[g]);
}

int
report_http(const struct report_snapshot *s, const char *path, struct buf *body,
	    const char **content_type)
{
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
			3 * (s->lease_ms / 3 < 10000 ? s->lease_ms / 3 : 10000);
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
report_status_line(const struct report_snapshot *s, struct buf *b)
{
	for (int g = 0; g < s->ngroups; g++) {
		const struct stats *st = s->groups[g].stats;
		const int *idx = s->groups[g].sidx;
		int n = s->groups[g].nactive;
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
