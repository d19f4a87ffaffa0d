/*
 * health: the read-only statement of the database health guard
 * (docs/operations.md, "Database health"): what holds the xmin horizon
 * back, the dead tuples and last vacuum of every pgjob table, and an
 * estimate of the bloat of every pgjob index.
 *
 * The same statement serves the health duty (worker/health.c, on the
 * worker's pipelined connection) and `pgjob doctor` (synchronously).  It
 * reads only catalog views, so it works as any role: without pg_monitor
 * (or pg_read_all_stats) the sessions of other roles show their
 * backend_xmin but not their state or start time, and the age in seconds
 * of such a holder is unknown (age_s < 0; its age in transactions is
 * always known).
 */
#ifndef PGJOBD_HEALTH_H
#define PGJOBD_HEALTH_H

#include <stddef.h>

/* How many holders the worker's health duty and `pgjob doctor` read: the
 * oldest, in transactions. */
#define HEALTH_HOLDERS 20

struct db_conn;
struct db_status;
struct dbev;

/* What holds the xmin horizon; the order is that of the metric's labels. */
enum health_kind {
	HEALTH_BACKEND,	 /* a session: an open transaction or snapshot */
	HEALTH_SLOT,	 /* a replication slot's xmin */
	HEALTH_PREPARED, /* a prepared transaction */
	HEALTH_KINDS
};

/* "backend", "replication_slot", "prepared_xact". */
const char *health_kind_name(enum health_kind k);

/*
 * One holder of the horizon.  Every string is the server's text as it is
 * (application_name, a gid: client-written, hostile to a terminal); NULL
 * when the server did not say.
 */
struct health_holder {
	enum health_kind kind;
	char *name;	/* backend: its role; slot: its name; prepared: gid */
	long long xids; /* age of the xmin it holds, in transactions */
	double age_s;	/* seconds since its transaction (or snapshot, or
			   PREPARE) began; < 0: unknown (a slot, or a session
			   of another role without pg_monitor) */
	int pid;	/* backend; a slot's active_pid; else 0 */
	char *application_name, *client_addr; /* backend */
	char *state; /* backend: pg_stat_activity.state; slot: "active" or
			"inactive" */
	char *since; /* backend: transaction start; prepared: PREPARE time */
	char *xmin;  /* the transaction id it holds back, as text */
};

/* A table of schema pgjob (pg_stat_user_tables). */
struct health_table {
	char *name;
	long long dead, live;
	double vacuum_age_s; /* since the last vacuum or autovacuum; < 0: none
				since the statistics were reset */
};

/* A b-tree index of schema pgjob. */
struct health_index {
	char *name;
	long long bytes;
	double bloat; /* 0..1: the share of its pages an estimate says are
			 not needed (health.c says how it is made) */
};

struct health_report {
	struct health_holder *holders; /* oldest (in transactions) first */
	size_t nholders;
	struct health_table *tables;
	size_t ntables;
	struct health_index *indexes;
	size_t nindexes;
};

void health_report_free(struct health_report *r);

/* Where a session holder connects from: its address, "local" (a Unix
 * socket), or "unknown" when pg_stat_activity hides it (a session of
 * another role, without pg_monitor).  Borrowed from h. */
const char *health_client(const struct health_holder *h);

/*
 * s as an SQL string literal for an operator to paste into psql (the fix
 * that ends a prepared transaction names its gid, which any client
 * chose): 'text' with ' doubled, or E'...' when s holds a backslash, a
 * control character or a byte that is not UTF-8: \\, \xNN for a C0
 * control, DEL or such a byte, \uXXXX for a C1 control.  The literal itself
 * is then printable ASCII plus s's other UTF-8, and a terminal shows it
 * as it is, so that the statement pasted from it names the same text.
 * Caller frees.
 */
char *health_sql_literal(const char *s);

/*
 * The statement that ends holder h, without a final semicolon: select
 * pg_terminate_backend(pid) for a session, pg_drop_replication_slot() for
 * a slot, rollback prepared for a prepared transaction (its name as
 * health_sql_literal() writes it).  Caller frees.
 */
char *health_fix(const struct health_holder *h);

/* r is borrowed for the call; NULL when the statement failed (st says
 * why). */
typedef void health_fn(void *arg, const struct db_status *st,
		       const struct health_report *r);
/*
 * Reads the report on the worker's connection, at most max_holders holders
 * (the oldest).  cb is called once, later.  Returns 0, or -1 when the
 * connection is already lost (cb is still called).
 */
int health_read(struct dbev *d, int max_holders, health_fn *cb, void *arg);
/*
 * The same, now, on a synchronous connection.  Returns 0 with *out filled
 * (free with health_report_free()), or -1 with *err set (caller frees).
 */
int health_read_now(struct db_conn *c, int max_holders,
		    struct health_report *out, char **err);
/* The same without the tables and indexes: the holders of the xmin
 * horizon alone (the web console's overview, at every refresh). */
int health_read_holders_now(struct db_conn *c, int max_holders,
			    struct health_report *out, char **err);

#endif
