/*
 * unserved: the overview's jobs that no live worker serves
 * (pgjob.unserved(), sql/upgrade/032_worker_queues.sql), kept by `pgjob
 * web` and read again in the background when an overview finds them
 * older than WEB_UNSERVED_REFRESH_S (or longer, below).  That function groups
 * every available job by kind and queue: with a backlog of a million, a second
 * of the database's time, which the overview, asked every 2 seconds by every
 * open page, must not wait for (docs/console.md, "Overview").
 */
#ifndef PGJOBD_WEB_UNSERVED_H
#define PGJOBD_WEB_UNSERVED_H

/* Seconds a reading serves before the next overview starts another; or,
 * when longer, WEB_UNSERVED_SHARE times what it took: a reading of ten
 * million jobs takes seconds of the database's time, read again no more
 * than a twentieth of the time, and the overviews beside it keep to
 * their 100 ms. */
#define WEB_UNSERVED_REFRESH_S 10
#define WEB_UNSERVED_SHARE     20

/* The statement, for those that ask without the cache. */
#define WEB_UNSERVED_SQL                                                       \
	"select kind, queue, jobs, due, oldest_due_at, kind_handled"           \
	" from pgjob.unserved() limit 100"

/*
 * Keeps the readings from now on, each made on a connection of its own to
 * conninfo (copied), the first at once; web_unserved_stop() waits for a
 * reading under way and closes it.  Called before the server's threads
 * start (with the signals they must not take already blocked) and after
 * they stopped.
 */
void web_unserved_start(const char *conninfo);
void web_unserved_stop(void);

/*
 * The last reading's rows as a JSON array's text (caller frees), started
 * again in the background when it is older than WEB_UNSERVED_REFRESH_S
 * (the old one is returned meanwhile); "[]" until the first reading is
 * in; NULL when web_unserved_start() was not called: then the caller asks
 * itself.
 */
char *web_unserved_get(void);

#endif
