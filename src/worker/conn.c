/*
 * conn: what a worker makes of its statements' outcomes, and of losing its
 * connection: the slot goes with it, every cluster lease is forgotten
 * (their commands killed), and the worker reconnects (worker.c's reconnect
 * timer); the jobs it holds keep running, and their leases are checked
 * again, by token, once it is back.
 */
#include "worker/internal.h"

#include <stdlib.h>
#include <string.h>

#include "common/stats.h"
#include "common/util.h"
#include "db/db.h"
#include "worker/duty.h"

int
conn_ok(struct worker *w, const struct db_status *st, const char *what)
{
	if (st->error == DB_OK) {
		stats_set(&w->st->last_ok_ms, util_now_ms());
		return 1;
	}
	log_warnx("%s failed: %s", what, st->text);
	if (st->error == DB_LOST && w->db && !ev_is_active(&w->reconnect))
		conn_lost(w, st->text);
	return 0;
}

void
conn_lost(void *arg, const char *why)
{
	struct worker *w = arg;
	char *msg = xstrdup(why);
	msg[strcspn(msg, "\n")] = '\0';
	log_warnx("database connection lost (%s); the slot is gone too, "
		  "reconnecting",
		  msg);
	free(msg);
	/* Free later: we are inside one of its callbacks. */
	w->online = 0;
	w->cycle_inflight = 0;
	duty_set_db(w->duty, NULL, 0);
	__atomic_store_n(&w->st->connected, 0, __ATOMIC_RELAXED);
	stats_add(&w->st->reconnects, 1);
	ev_timer_set(&w->reconnect, 0.05, 0.);
	ev_timer_start(w->loop, &w->reconnect);
}
