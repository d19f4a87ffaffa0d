/*
 * dbev_connect: a connection made without blocking its loop, for a second
 * connection that a worker opens while its first one claims (the queue
 * figures' reader: worker/monitor.c).  The worker's own connection is made
 * synchronously: nothing else can happen before it is there.
 *
 * libpq's protocol for it (PQconnectStartParams(), PQconnectPoll()): wait
 * until the socket is writable, then poll and wait for what each poll
 * asks, on the socket it names, which changes when libpq moves on to the
 * next host or address.
 */
#include "db/dbev.h"

#include <ev.h>
#include <libpq-fe.h>
#include <stdlib.h>

#include "common/util.h"
#include "db/db.h"
#include "db/internal.h"

struct dbev_connecting {
	struct ev_loop *loop;
	struct db_conn *conn;
	char *conninfo;
	struct dbev_hooks hooks;
	dbev_connected_fn *done;
	void *arg;
	ev_io io;
	ev_timer timeout;
};

static void
finish(struct dbev_connecting *c, struct dbev *d, const char *err)
{
	dbev_connected_fn *done = c->done;
	void *arg = c->arg;
	c->done = NULL;
	dbev_connect_cancel(c);
	done(arg, d, err);
}

/* Waits for fd as libpq asked. */
static void
wait_for(struct dbev_connecting *c, int fd, int want_write)
{
	ev_io_stop(c->loop, &c->io);
	ev_io_set(&c->io, fd, want_write ? EV_WRITE : EV_READ);
	ev_io_start(c->loop, &c->io);
}

static void
on_ready(struct ev_loop *loop, ev_io *io, int revents)
{
	struct dbev_connecting *c = io->data;
	char *err = NULL;
	int fd = -1, want_write = 0;
	int rc = db_connect_poll(c->conn, c->conninfo, &fd, &want_write, &err);
	if (rc == 0) {
		wait_for(c, fd, want_write);
		return;
	}
	struct dbev *d = NULL;
	if (rc > 0) {
		d = dbev_new(loop, c->conn, &c->hooks);
		if (d)
			c->conn = NULL; /* the dbev's now */
		else
			err = xstrdup("cannot connect to database: the "
				      "connection would not enter pipeline "
				      "mode");
	}
	finish(c, d, err);
	free(err);
}

static void
on_timeout(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct dbev_connecting *c = t->data;
	finish(c, NULL, "cannot connect to database: no answer in time");
}

struct dbev_connecting *
dbev_connect(struct ev_loop *loop, const char *conninfo, const char *appname,
	     int64_t timeout_ms, const struct dbev_hooks *hooks,
	     dbev_connected_fn *done, void *arg, char **err)
{
	struct db_conn *conn = db_connect_start(conninfo, appname, err);
	if (!conn)
		return NULL;
	struct dbev_connecting *c = xcalloc(1, sizeof(*c));
	c->loop = loop;
	c->conn = conn;
	c->conninfo = xstrdup(conninfo ? conninfo : "");
	if (hooks)
		c->hooks = *hooks;
	c->done = done;
	c->arg = arg;
	ev_io_init(&c->io, on_ready, PQsocket(db_pgconn(conn)), EV_WRITE);
	c->io.data = c;
	ev_io_start(loop, &c->io);
	ev_timer_init(&c->timeout, on_timeout, (double)timeout_ms / 1000., 0.);
	c->timeout.data = c;
	ev_timer_start(loop, &c->timeout);
	return c;
}

void
dbev_connect_cancel(struct dbev_connecting *c)
{
	if (!c)
		return;
	ev_io_stop(c->loop, &c->io);
	ev_timer_stop(c->loop, &c->timeout);
	db_close(c->conn);
	free(c->conninfo);
	free(c);
}
