/*
 * metrics: a tiny HTTP server for /metrics and /healthz on the supervisor's
 * libev loop, and the Prometheus text format.
 *
 * The server answers one GET or HEAD per connection (HTTP/1.0 style,
 * "Connection: close") with whatever the render callback returns.  It uses
 * no threads and blocks nowhere: the listening socket and every connection
 * are non-blocking, a request larger than 8 KiB is refused with 431, a
 * client that has not finished within the timeout (5 s) is dropped, and
 * beyond 64 open connections new ones are closed at once.  All descriptors
 * are SOCK_CLOEXEC; a process forked from the supervisor calls
 * metrics_forget() so that it holds no copy of them.
 *
 * The formatting helpers below are pure: they append to a struct buf and
 * need neither a loop nor a server.
 */
#ifndef PGJOBD_METRICS_H
#define PGJOBD_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "common/util.h"

struct ev_loop;
struct metrics_server;

/* The Content-Type of the Prometheus text exposition format. */
#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/*
 * Renders the response to a GET (or HEAD) of path: the request target
 * without its query string ("/metrics?x=1" gives "/metrics").  Appends the
 * body to body (empty on entry; the server frees it), may set
 * *content_type to a string that stays valid until the response is sent
 * (a literal; the default is "text/plain; charset=utf-8"), and returns the
 * HTTP status: 200, 404 for a path it does not serve, 503 for an unhealthy
 * /healthz, and so on.  It runs on the loop, so it must not block.
 */
typedef int (*metrics_render_fn)(void *arg, const char *path, struct buf *body,
				 const char **content_type);

/*
 * Splits "host:port" into new strings (caller frees both):
 *   "127.0.0.1:9188", "localhost:9188"  host as written
 *   "[::1]:9188"                        host "::1" (brackets for IPv6)
 *   ":9188", "*:9188"                   *host = NULL: every interface
 * The port is 0..65535, digits only (0: the kernel picks one).  Returns 0,
 * or -1 (and nothing allocated) when s is not of that form.
 */
int metrics_parse_listen(const char *s, char **host, char **port);

/*
 * Listens on hostport (see metrics_parse_listen()) with SO_REUSEADDR and
 * serves on loop.  Every interface means "[::]" accepting IPv4 too, or
 * 0.0.0.0 where the host has no IPv6; a host name that resolves to several
 * addresses binds the first that works (resolution may block: call this at
 * startup or reload, not on a hot path).  render and arg are kept; arg is
 * borrowed for the server's life.  Returns the server (free with
 * metrics_close()), or NULL with *err set to a new message (caller frees).
 */
struct metrics_server *metrics_listen(struct ev_loop *loop,
				      const char *hostport,
				      metrics_render_fn render, void *arg,
				      char **err);
/* The port actually bound (useful after port 0). */
int metrics_port(const struct metrics_server *s);
/* Per-connection timeout in seconds (default 5); for tests. */
void metrics_set_timeout(struct metrics_server *s, double seconds);
/* Open client connections (for tests and a gauge). */
int metrics_connections(const struct metrics_server *s);
/* Stops the watchers, closes every descriptor, frees s.  NULL is allowed. */
void metrics_close(struct metrics_server *s);
/*
 * In a child forked from the process that owns s: closes the child's copies
 * of every descriptor and frees s, without any libev call (the child must
 * not touch the parent's loop, and should destroy its copy).  NULL is
 * allowed.
 */
void metrics_forget(struct metrics_server *s);

/* ---- Prometheus text format ---- */

/*
 * Appends name="value" to a label set, after a comma when it is not empty,
 * with value escaped (\\, \" and \n).  Label names are trusted identifiers.
 * The set is then passed as labels below (NULL or "" for none).
 */
void metrics_label(struct buf *labels, const char *name, const char *value);
/* The same with an integer value (slot="3"). */
void metrics_label_int(struct buf *labels, const char *name, long long value);

/*
 * Appends "# HELP name help" (help escaped: \\ and \n) and "# TYPE name
 * type" ("counter", "gauge", "histogram").  The sample functions below call
 * it themselves when given a help text.
 */
void metrics_header(struct buf *b, const char *name, const char *type,
		    const char *help);

/*
 * Appends one sample line, "name{labels} value".  A family's HELP and TYPE
 * must appear once, before its first sample: pass help for the first
 * series of a name and NULL for the rest.  Values print in the shortest
 * form that reads back exactly; NaN and infinities as NaN, +Inf, -Inf.
 */
void metrics_counter(struct buf *b, const char *name, const char *help,
		     const char *labels, double v);
void metrics_gauge(struct buf *b, const char *name, const char *help,
		   const char *labels, double v);

/*
 * Appends one histogram series: name_bucket{labels,le="bound"} with
 * cumulative counts for each of the n bounds (ascending), le="+Inf" (=
 * count), name_sum and name_count.  counts[i] is the number of observations
 * in bucket i alone, bounds[i-1] < v <= bounds[i] (see metrics_bucket());
 * observations above the last bound are only in count.  help as above.
 */
void metrics_histogram(struct buf *b, const char *name, const char *help,
		       const char *labels, const double *bounds,
		       const uint64_t *counts, size_t n, double sum,
		       uint64_t count);
/* The bucket of v: the first i with v <= bounds[i], or n (above all). */
size_t metrics_bucket(const double *bounds, size_t n, double v);

#endif
