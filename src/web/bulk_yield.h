/*
 * bulk_yield: a bulk action of the console gives way to the work it shares
 * the database with (docs/console.md, "Bulk actions"): while other sessions
 * are busy, it pauses after each of its statements for YIELD_FACTOR times
 * that statement's time.
 */
#ifndef PGJOBD_WEB_BULK_YIELD_H
#define PGJOBD_WEB_BULK_YIELD_H

#include <stdbool.h>

#include "db/db.h"

/*
 * Called after each statement of a bulk action that took took_ms: counts
 * that statement's commit as the action's own, reads the database's commit
 * rate (at most once a second, for the whole process), and when others
 * commit more than BUSY_COMMITS_S a second, sleeps YIELD_FACTOR × took_ms
 * (at most YIELD_MAX_MS).  Returns whether it paused.  A failed reading
 * counts as idle: the action then runs as it would without this.
 */
bool bulk_yield(struct db_conn *db, double took_ms);

#endif
