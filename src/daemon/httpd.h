/*
 * httpd: a tiny HTTP server for /metrics and /healthz on the supervisor's
 * libev loop.
 *
 * The server answers one GET or HEAD per connection (HTTP/1.0 style,
 * "Connection: close") with whatever the render callback returns.  It uses
 * no threads and blocks nowhere: the listening socket and every connection
 * are non-blocking, a request larger than 8 KiB is refused with 431, a
 * client that has not finished within the timeout (5 s) is dropped, and
 * beyond 64 open connections new ones are closed at once.  All descriptors
 * are SOCK_CLOEXEC; a process forked from the supervisor calls
 * httpd_forget() so that it holds no copy of them.  The Prometheus text
 * that it serves is written by common/metrics.c.
 */
#ifndef PGJOBD_HTTPD_H
#define PGJOBD_HTTPD_H

#include <stddef.h>
#include <stdint.h>

#include "common/util.h"

struct ev_loop;
struct httpd;

/*
 * Renders the response to a GET (or HEAD) of path: the request target
 * without its query string ("/metrics?x=1" gives "/metrics").  Appends the
 * body to body (empty on entry; the server frees it), may set
 * *content_type to a string that stays valid until the response is sent
 * (a literal; the default is "text/plain; charset=utf-8"), and returns the
 * HTTP status: 200, 404 for a path it does not serve, 503 for an unhealthy
 * /healthz, and so on.  It runs on the loop, so it must not block.
 */
typedef int (*httpd_render_fn)(void *arg, const char *path, struct buf *body,
			       const char **content_type);

/*
 * Listens on hostport (see metrics_parse_listen()) with SO_REUSEADDR and
 * serves on loop.  Every interface means "[::]" accepting IPv4 too, or
 * 0.0.0.0 where the host has no IPv6; a host name that resolves to several
 * addresses binds the first that works (resolution may block: call this at
 * startup or reload, not on a hot path).  render and arg are kept; arg is
 * borrowed for the server's life.  Returns the server (free with
 * httpd_close()), or NULL with *err set to a new message (caller frees).
 */
struct httpd *httpd_listen(struct ev_loop *loop, const char *hostport,
			   httpd_render_fn render, void *arg, char **err);
/* The port actually bound (useful after port 0). */
int httpd_port(const struct httpd *s);
/* Per-connection timeout in seconds (default 5); for tests. */
void httpd_set_timeout(struct httpd *s, double seconds);
/* Open client connections (for tests and a gauge). */
int httpd_connections(const struct httpd *s);
/* Stops the watchers, closes every descriptor, frees s.  NULL is allowed. */
void httpd_close(struct httpd *s);
/*
 * In a child forked from the process that owns s: closes the child's copies
 * of every descriptor and frees s, without any libev call (the child must
 * not touch the parent's loop, and should destroy its copy).  NULL is
 * allowed.
 */
void httpd_forget(struct httpd *s);

#endif
