/*
 * unserved: see unserved.h.  One reading at a time, in a thread of its
 * own on a connection of its own, started by the overview that finds the
 * last one stale; the overviews meanwhile answer with the last one.
 */
#include "web/unserved.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "common/log.h"
#include "common/util.h"
#include "db/db.h"
#include "db/sqlstate.h"
#include "web/api_response.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	char *conninfo;	    /* NULL: not started */
	char *rows;	    /* the last reading, or NULL */
	double read_at;	    /* its CLOCK_MONOTONIC seconds */
	double took;	    /* the seconds it took */
	bool reading;	    /* a thread reads now */
	bool joinable;	    /* a thread ran and was not joined */
	pthread_t thread;   /* valid while joinable */
	struct db_conn *db; /* the reader's; only it and stop touch it */
	bool warned;	    /* a failure was logged, none since */
} u;

static double
now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One reading: the rows as JSON text, or NULL (*err set). */
static char *
read_rows(char **err)
{
	if (!u.db) {
		u.db = db_connect(u.conninfo, "pgjob web", err);
		/* Not the overview's 5 s: a backlog of millions may take
		 * longer, and nobody waits for this one. */
		if (u.db && db_exec(u.db,
				    "set statement_timeout = '60s'; "
				    "set jit = off",
				    err) < 0) {
			db_close(u.db);
			u.db = NULL;
		}
		if (!u.db)
			return NULL;
	}
	struct db_rows *res = db_query(u.db, WEB_UNSERVED_SQL, 0, NULL, err);
	if (!res) {
		/* A schema before the function: none to warn of. */
		if (sqlstate_is(*err, SQLSTATE_UNDEFINED_FUNCTION)) {
			free(*err);
			*err = NULL;
			return xstrdup("[]");
		}
		if (!db_connected(u.db)) {
			db_close(u.db);
			u.db = NULL;
		}
		return NULL;
	}
	cJSON *a = api_rows_array(res);
	db_rows_free(res);
	char *text = cJSON_PrintUnformatted(a);
	cJSON_Delete(a);
	if (!text)
		abort(); /* out of memory, as xmalloc() does */
	char *copy = xstrdup(text);
	cJSON_free(text);
	return copy;
}

static void *
reader(void *arg)
{
	char *err = NULL;
	double t0 = now_s();
	char *rows = read_rows(&err);

	pthread_mutex_lock(&lock);
	if (rows) {
		free(u.rows);
		u.rows = rows;
		u.warned = false;
	} else if (!u.warned) {
		log_warnx("web: the jobs no worker serves: %s (the overview "
			  "shows the last reading)",
			  err ? err : "?");
		u.warned = true;
	}
	/* A failure waits as long as a reading serves, too. */
	u.read_at = now_s();
	u.took = u.read_at - t0;
	u.reading = false;
	pthread_mutex_unlock(&lock);
	free(err);
	return NULL;
}

void
web_unserved_start(const char *conninfo)
{
	u.conninfo = xstrdup(conninfo);
	/* The first reading at once, so that the first overviews need not
	 * make it: with ten million jobs it can pass their 5 s. */
	u.reading = u.joinable =
		pthread_create(&u.thread, NULL, reader, NULL) == 0;
}

void
web_unserved_stop(void)
{
	pthread_mutex_lock(&lock);
	bool join = u.joinable;
	u.joinable = false;
	pthread_mutex_unlock(&lock);
	if (join)
		pthread_join(u.thread, NULL);
	db_close(u.db);
	free(u.rows);
	free(u.conninfo);
	u.db = NULL;
	u.rows = u.conninfo = NULL;
	u.reading = u.warned = false;
	u.took = 0;
}

char *
web_unserved_get(void)
{
	char *rows = NULL;
	pthread_t done;
	bool join = false;

	pthread_mutex_lock(&lock);
	if (!u.conninfo) {
		pthread_mutex_unlock(&lock);
		return NULL;
	}
	/* Stale after WEB_UNSERVED_REFRESH_S, or WEB_UNSERVED_SHARE times
	 * what the last reading took when that is longer. */
	double serves = u.took * WEB_UNSERVED_SHARE;
	if (serves < WEB_UNSERVED_REFRESH_S)
		serves = WEB_UNSERVED_REFRESH_S;
	if (!u.reading && (!u.rows || now_s() - u.read_at >= serves)) {
		/* The last reader has ended: joined here, outside the lock. */
		join = u.joinable;
		done = u.thread;
		u.reading = true;
		u.joinable = pthread_create(&u.thread, NULL, reader, NULL) == 0;
		u.reading = u.joinable;
	}
	/* None yet (the first reading is under way): none to show. */
	rows = xstrdup(u.rows ? u.rows : "[]");
	pthread_mutex_unlock(&lock);
	if (join)
		pthread_join(done, NULL);
	return rows;
}
