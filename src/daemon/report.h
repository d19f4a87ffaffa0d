/*
 * report: what the supervisor tells the outside about its workers, read
 * from the stats areas they write: /metrics, /healthz and systemd's
 * STATUS= line.  It is handed a snapshot that the supervisor fills when
 * asked (supervisor.c), and never reads or changes the supervisor itself.
 */
#ifndef PGJOBD_DAEMON_REPORT_H
#define PGJOBD_DAEMON_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/util.h"

struct stats;

/* The workers of one database (one group without a name when the config
 * has no databases:). */
struct report_group {
	const char *name;	   /* the database's name, or NULL */
	const struct stats *stats; /* the group's stats area */
	int sidx_high;		   /* entries ever used: /metrics sums them */
	int workers;		   /* the workers the config asks for */
	/* The active workers: their stats entries (-1: none yet) and their
	 * worker=N numbers, nactive of each. */
	int *sidx, *number;
	int nactive;
};

/* What the supervisor is now, as report.c needs it. */
struct report_snapshot {
	struct report_group *groups;
	int ngroups;
	bool labelled; /* databases:: each group's series get database= */
	pid_t *pids;   /* the live workers, active and retired */
	int npids;
	/* Reloads (SIGHUP): the process's, not a database's. */
	uint64_t reloads_ok, reloads_failed;
	int last_reload_ok;
	int64_t last_reload_s;
	bool stopping;
	int64_t lease_ms; /* the config's, for /healthz's staleness */
};

/*
 * Whether every group's workers hold a slot and reached their database
 * within stale_ms (all: /healthz), or those of at least one group (any:
 * READY=1, so that one database down at start does not hold the others'
 * start back).  why (may be NULL) gets a line per group, each after
 * "database NAME: " with databases:.
 */
int report_healthy(const struct report_snapshot *s, int64_t stale_ms, bool all,
		   struct buf *why);
/* "2 workers, slots 1,2, 1234 jobs done" for STATUS=; with databases:,
 * "a: 2 workers, ...; b: ...". */
void report_status_line(const struct report_snapshot *s, struct buf *b);
/* /metrics and /healthz into body, as the metrics server's handler
 * answers them (httpd.h); returns the HTTP status. */
int report_http(const struct report_snapshot *s, const char *path,
		struct buf *body, const char **content_type);

#endif
