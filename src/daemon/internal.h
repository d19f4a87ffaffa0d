/*
 * The supervisor's own structures, shared by supervisor.c (fork, reap,
 * restart, stop, reload) and groups.c (its workers counted by group, and
 * the snapshot of them that report.c reads: report.h).  Not for other
 * layers.
 */
#ifndef PGJOBD_DAEMON_INTERNAL_H
#define PGJOBD_DAEMON_INTERNAL_H

#include <ev.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/stats.h"
#include "common/util.h"

struct config;
struct httpd;

/*
 * A worker process.  The active ones are s->children[index]; a worker
 * retired by a reload moves to s->retired (a copy of its own) until it
 * exits.
 */
struct child {
	struct supervisor *s;
	int index;  /* place in s->children; -1 once retired */
	int number; /* worker=N in log lines: index + 1, kept when retired */
	int sidx;   /* its entry in its group's stats area; -1: none yet */
	int group;  /* its database's group (struct group), set at spawn */
	pid_t pid;
	int pipe_wr;
	int restarts;
	int64_t started_ms;
	ev_child watcher;
	ev_timer restart;
	struct child *next; /* in s->retired */
};

/*
 * The workers of one database, with databases: (docs/configuration.md,
 * "Several databases"); the single-database form has one group without a
 * name.  Each group has a stats area of its own, as an instance of its
 * own would: queue depths, the health guard and NOTIFY shares are one
 * database's.  The groups are made at start; a reload keeps their names
 * (a reload that changes them is refused: see same_databases()).
 */
struct group {
	char *name;	     /* the database's name, or NULL */
	struct stats *stats; /* shared with its workers */
	/* Which entries of the stats area a live worker uses. */
	unsigned char sidx_used[STATS_MAX_WORKERS];
	int sidx_high; /* entries ever used: /metrics sums them all */
};

struct supervisor {
	struct ev_loop *loop;
	const char *config_path;
	struct config *cfg;
	int workers_override;
	const char *database; /* overrides database.conninfo, or NULL */
	struct child *children;
	int nchildren;
	struct child *retired; /* old workers finishing their jobs */
	struct group *groups;  /* one per database; one without databases: */
	int ngroups;
	int stopping; /* 0, 1 draining, 2 stopping now */
	int exit_code;
	ev_signal sigterm, sigint, sighup;
	ev_timer kill_timer;
	ev_timer status; /* readiness, STATUS= and WATCHDOG=1 */
	/* Reloads (SIGHUP), for /metrics: the process's, not a database's;
	 * the last one's outcome (1 ok, also before any) and when (Unix
	 * seconds; the start before any). */
	uint64_t reloads_ok, reloads_failed;
	int last_reload_ok;
	int64_t last_reload_s;
	struct httpd *metrics;
	int ready;	     /* READY=1 sent for the current config */
	int64_t watchdog_ms; /* 0: no watchdog */
	int64_t last_watchdog;
	int64_t last_status; /* when STATUS= was last sent */
};

struct report_snapshot;

/* groups.c. */
/* The workers of group g: -w, else its database's, else workers:. */
int supervisor_group_workers(const struct supervisor *s, int g);
/* All the workers: the groups' in turn, in s->children. */
int supervisor_nworkers(const struct supervisor *s);
/* The group of the worker at index in s->children (current config). */
int supervisor_group_of(const struct supervisor *s, int index);
/* Worker processes alive: active and retired. */
int supervisor_running(const struct supervisor *s);
/* What report.c reads (report.h), as s is now; undone by
 * supervisor_snapshot_free(). */
void supervisor_snapshot(const struct supervisor *s, struct report_snapshot *r);
void supervisor_snapshot_free(struct report_snapshot *r);

#endif
