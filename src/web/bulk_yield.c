/*
 * bulk_yield: see bulk_yield.h.
 *
 * A bulk action on a million jobs is a thousand statements of a thousand
 * row changes each; run back to back on a 2-core machine, its backend takes
 * a core the workers were using, and they ran at half their rate beside it
 * (tests/bench/web_bulk.sh: retry 0.51, delete 0.47 of the rate before).
 * Paused for nine times each statement's time, it uses at most a tenth of
 * the time it shares (the workers kept 0.77 of their rate, not 0.51; nineteen
 * times kept 0.74: the rest is the vacuum and the WAL of the rows it changed,
 * which pauses only spread out, docs/performance.md); alone with the
 * database it does not pause, and runs as fast as before.
 *
 * "Busy" is the database's commit rate, from pg_stat_database, without the
 * action's own commits: it needs no privilege (pg_stat_activity hides
 * other roles' sessions' state) and counts any work, not only pgjobd's.
 * Backends report their counts about once a second, so the rate is read
 * over windows of READ_EVERY_MS or more; between readings the last verdict
 * holds.  One reading serves every thread of pgjob web (a mutex), and the
 * action's own commits, of every thread, are taken off it.
 */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "common/util.h"
#include "web/bulk_yield.h"

/* Others' commits a second past which the database counts as busy: an idle
 * pgjobd and a console's refreshes commit a few a second; working workers
 * hundreds to tens of thousands. */
#define BUSY_COMMITS_S 50.0
/* The pause after a statement, in multiples of its time: the action takes
 * at most 1 / (1 + YIELD_FACTOR) of the time. */
#define YIELD_FACTOR 9.0
/* No pause longer: a statement slowed by a lock wait does not stop the
 * action for minutes. */
#define YIELD_MAX_MS  2000.0
#define READ_EVERY_MS 1000.0
/* A reading older than this starts a new window without a verdict. */
#define STALE_MS 10000.0

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static double read_at;	       /* ms; 0: never read */
static long long read_commits; /* the database's commits then */
static long long read_oid;     /* and which database (a test's process
				* calls this for several) */
static long long own;	       /* the action's commits since */
static bool busy;

/* The database's commits and rollbacks so far and its oid, or -1. */
static long long
commits(struct db_conn *db, long long *oid)
{
	char *err = NULL;
	struct db_rows *r = db_query(db,
				     "select xact_commit + xact_rollback, "
				     "datid from pg_stat_database"
				     " where datname = current_database()",
				     0, NULL, &err);
	long long n = -1;

	if (r && db_rows_count(r) == 1) {
		n = atoll(db_rows_text(r, 0, 0));
		*oid = atoll(db_rows_text(r, 0, 1));
	}
	db_rows_free(r);
	free(err);
	return n;
}

bool
bulk_yield(struct db_conn *db, double took_ms)
{
	double now = (double)util_now_us() / 1e3, pause = 0;

	pthread_mutex_lock(&lock);
	own++; /* the statement just ended */
	if (!read_at || now - read_at >= READ_EVERY_MS) {
		own++; /* the reading's own transaction */
		long long oid = 0, n = commits(db, &oid);
		if (n < 0) {
			busy = false;
			read_at = 0;
		} else {
			if (read_at && now - read_at < STALE_MS &&
			    oid == read_oid) {
				double others =
					(double)(n - read_commits - own);
				busy = others * 1e3 / (now - read_at) >
				       BUSY_COMMITS_S;
			} else {
				busy = false; /* a first window */
			}
			read_at = now;
			read_commits = n;
			read_oid = oid;
			own = 0;
		}
	}
	if (busy) {
		pause = took_ms * YIELD_FACTOR;
		if (pause > YIELD_MAX_MS)
			pause = YIELD_MAX_MS;
	}
	pthread_mutex_unlock(&lock);
	if (pause > 0) {
		long long ns = (long long)(pause * 1e6);
		struct timespec ts = {(time_t)(ns / 1000000000),
				      (long)(ns % 1000000000)};
		while (nanosleep(&ts, &ts) < 0)
			;
	}
	return pause > 0;
}
