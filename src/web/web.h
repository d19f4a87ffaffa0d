/*
 * web: the web console's HTTP server (`pgjob web`, docs/console.md), on
 * libmicrohttpd.  It serves the embedded page (assets.h), answers
 * /api/session, /api/login and /api/logout itself, and hands every other
 * /api/ request to api.c once access is settled: the session (auth.h), the
 * CSRF token, the role, the Host and Origin headers, the size of what the
 * peer sent.  Each server thread has a database connection of its own,
 * opened when first needed and opened again after a loss.
 */
#ifndef PGJOBD_WEB_WEB_H
#define PGJOBD_WEB_WEB_H

#include "common/config.h"

/* The address a console listens on without web.listen or --listen. */
#define WEB_DEFAULT_LISTEN "127.0.0.1:8080"

struct web_options {
	const char *listen;   /* "host:port"; port 0: any free one */
	const char *conninfo; /* NULL: libpq's PG* defaults */
	/* web: of the config (users, session_ttl, cookie_secure); borrowed
	 * for the server's life. */
	const struct web_conf *conf;
};

/*
 * Runs the server in the foreground until SIGINT or SIGTERM.  Returns the
 * exit code: 0 after a clean stop, 1 when it could not start (the address
 * taken, the database unreachable), EXIT_CONFIG (78) for a setting that
 * must change (an open console on an address that is not loopback); each
 * failure says why on stderr first.
 */
int web_run(const struct web_options *o);

#endif
