/*
 * httpd: the supervisor's HTTP endpoint.  See httpd.h.
 *
 * Each connection is a small state machine on the loop: READING until the
 * request head is complete (or over 8 KiB: 431), then WRITING the whole
 * response, then DRAINING: our side is shut down and whatever the client
 * still sends is read and dropped until it closes, so that closing with
 * unread input never turns into a reset that destroys the response on the
 * client's side.  One timer per connection, started at accept and not reset
 * by activity, bounds READING and WRITING together: a client that trickles
 * a byte a second is dropped as surely as one that sends nothing.
 */
#include "daemon/httpd.h"

#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <ev.h>

#include "common/log.h"
#include "common/metrics.h"

#define MAX_REQUEST	8192 /* bytes of request line and headers */
#define MAX_CONNS	64
#define ACCEPT_BATCH	16  /* accepts per wakeup, so the loop stays fair */
#define LINGER_S	1.0 /* how long DRAINING waits for the client */
#define ACCEPT_PAUSE_S	1.0 /* after EMFILE and the like */
#define DEFAULT_TIMEOUT 5.0

enum conn_state { READING, WRITING, DRAINING };

struct conn {
	struct httpd *s;
	struct conn *prev, *next;
	int fd;
	enum conn_state state;
	ev_io io;
	ev_timer timer;
	size_t len;		   /* bytes in req */
	char req[MAX_REQUEST + 1]; /* NUL-terminated */
	struct buf out;		   /* the response */
	size_t off;		   /* bytes of out sent */
};

struct httpd {
	struct ev_loop *loop;
	int fd;
	int port;
	ev_io io;
	ev_timer pause; /* restarts accepting after EMFILE */
	httpd_render_fn render;
	void *arg;
	double timeout;
	int nconns;
	struct conn *conns;
};

/* ---- connections ---- */

static void
conn_free(struct conn *c)
{
	struct httpd *s = c->s;

	ev_io_stop(s->loop, &c->io);
	ev_timer_stop(s->loop, &c->timer);
	close(c->fd);
	if (c->prev)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	s->nconns--;
	buf_free(&c->out);
	free(c);
}

/* Watches c->fd for events (EV_READ or EV_WRITE) from now on. */
static void
conn_arm(struct conn *c, int events)
{
	ev_io_stop(c->s->loop, &c->io);
	ev_io_set(&c->io, c->fd, events);
	ev_io_start(c->s->loop, &c->io);
}

static const char *
reason(int status)
{
	switch (status) {
	case 200:
		return "OK";
	case 204:
		return "No Content";
	case 400:
		return "Bad Request";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 431:
		return "Request Header Fields Too Large";
	case 500:
		return "Internal Server Error";
	case 503:
		return "Service Unavailable";
	default:
		return "Status";
	}
}

/*
 * Reads and drops input until the client closes; then frees c.  At most
 * 64 KiB per wakeup, so that a client that keeps sending cannot hold the
 * loop (the linger timer ends it).
 */
static void
conn_drain(struct conn *c)
{
	char sink[4096];

	for (int i = 0; i < 16;) {
		ssize_t n = recv(c->fd, sink, sizeof(sink), 0);
		if (n > 0) {
			i++;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		conn_free(c);
		return;
	}
}

/* Sends what is left of the response; then shuts down and drains. */
static void
conn_write(struct conn *c)
{
	while (c->off < c->out.len) {
		ssize_t n = send(c->fd, c->out.data + c->off,
				 c->out.len - c->off, MSG_NOSIGNAL);
		if (n >= 0) {
			c->off += (size_t)n;
		} else if (errno == EAGAIN || errno == EWOULDBLOCK) {
			if (c->state != WRITING) {
				c->state = WRITING;
				conn_arm(c, EV_WRITE);
			}
			return;
		} else if (errno != EINTR) {
			log_debug("metrics: send: %s", strerror(errno));
			conn_free(c);
			return;
		}
	}
	shutdown(c->fd, SHUT_WR);
	c->state = DRAINING;
	conn_arm(c, EV_READ);
	ev_timer_stop(c->s->loop, &c->timer);
	ev_timer_set(&c->timer, LINGER_S, 0.);
	ev_timer_start(c->s->loop, &c->timer);
	conn_drain(c);
}

/* Builds the response (the body only for GET) and starts sending it. */
static void
conn_respond(struct conn *c, int status, const char *ctype,
	     const struct buf *body, int head)
{
	buf_appendf(&c->out,
		    "HTTP/1.0 %d %s\r\n"
		    "Content-Type: %s\r\n"
		    "Content-Length: %zu\r\n"
		    "Cache-Control: no-store\r\n"
		    "%s"
		    "Connection: close\r\n\r\n",
		    status, reason(status), ctype, body->len,
		    status == 405 ? "Allow: GET, HEAD\r\n" : "");
	if (!head && body->len)
		buf_append(&c->out, body->data, body->len);
	conn_write(c);
}

/* A response that the server makes itself (400, 405, 431). */
static void
conn_error(struct conn *c, int status)
{
	struct buf body = {0};
	buf_appendf(&body, "%s\n", reason(status));
	conn_respond(c, status, "text/plain; charset=utf-8", &body, 0);
	buf_free(&body);
}

/*
 * Parses the request line in c->req ("METHOD /target HTTP/x.y") and
 * answers it.
 */
static void
conn_handle(struct conn *c)
{
	char *line = c->req, *eol = strchr(line, '\n');
	char *sp1, *sp2, *q;
	struct buf body = {0};
	const char *ctype = NULL;
	int head, status;

	if (!eol) {
		conn_error(c, 400);
		return;
	}
	*eol = '\0';
	if (eol > line && eol[-1] == '\r')
		eol[-1] = '\0';
	sp1 = strchr(line, ' ');
	sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
	if (!sp1 || !sp2 || sp1[1] != '/' || strncmp(sp2 + 1, "HTTP/", 5) ||
	    strchr(sp2 + 1, ' ')) {
		conn_error(c, 400);
		return;
	}
	*sp1 = *sp2 = '\0';
	head = strcmp(line, "HEAD") == 0;
	if (!head && strcmp(line, "GET") != 0) {
		conn_error(c, 405);
		return;
	}
	q = strpbrk(sp1 + 1, "?#");
	if (q)
		*q = '\0';
	status = c->s->render(c->s->arg, sp1 + 1, &body, &ctype);
	if (status < 100 || status > 599) {
		log_warnx("metrics: GET %s: status %d from the renderer",
			  sp1 + 1, status);
		status = 500;
	}
	conn_respond(c, status, ctype ? ctype : "text/plain; charset=utf-8",
		     &body, head);
	buf_free(&body);
}

/* Whether req holds a complete request head (an empty line ends it). */
static int
head_complete(const struct conn *c)
{
	return memmem(c->req, c->len, "\r\n\r\n", 4) ||
	       memmem(c->req, c->len, "\n\n", 2);
}

static void
conn_read(struct conn *c)
{
	for (;;) {
		if (c->len == MAX_REQUEST) {
			conn_error(c, 431);
			return;
		}
		ssize_t n =
			recv(c->fd, c->req + c->len, MAX_REQUEST - c->len, 0);
		if (n > 0) {
			const char *added = c->req + c->len;
			c->len += (size_t)n;
			c->req[c->len] = '\0';
			if (memchr(added, '\0', (size_t)n)) {
				conn_error(c, 400);
				return;
			}
			if (head_complete(c)) {
				conn_handle(c);
				return;
			}
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			return;
		} else {
			/* The client closed or reset before asking. */
			conn_free(c);
			return;
		}
	}
}

static void
on_conn_io(struct ev_loop *loop, ev_io *w, int revents)
{
	struct conn *c = w->data;

	switch (c->state) {
	case READING:
		conn_read(c);
		break;
	case WRITING:
		conn_write(c);
		break;
	case DRAINING:
		conn_drain(c);
		break;
	}
}

static void
on_conn_timeout(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct conn *c = t->data;

	if (c->state != DRAINING)
		log_debug("metrics: dropping a client after %.1f s (%s)",
			  c->s->timeout,
			  c->state == READING ? "request incomplete"
					      : "response not read");
	conn_free(c);
}

static void
conn_new(struct httpd *s, int fd)
{
	struct conn *c = xmalloc(sizeof(*c));

	c->s = s;
	c->fd = fd;
	c->state = READING;
	c->len = 0;
	c->req[0] = '\0';
	c->out = (struct buf){0};
	c->off = 0;
	c->prev = NULL;
	c->next = s->conns;
	if (s->conns)
		s->conns->prev = c;
	s->conns = c;
	s->nconns++;
	ev_io_init(&c->io, on_conn_io, fd, EV_READ);
	c->io.data = c;
	ev_io_start(s->loop, &c->io);
	ev_timer_init(&c->timer, on_conn_timeout, s->timeout, 0.);
	c->timer.data = c;
	ev_timer_start(s->loop, &c->timer);
}

/* ---- the listening socket ---- */

static void
on_pause_end(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct httpd *s = t->data;
	ev_io_start(loop, &s->io);
}

static void
on_accept(struct ev_loop *loop, ev_io *w, int revents)
{
	struct httpd *s = w->data;

	for (int i = 0; i < ACCEPT_BATCH; i++) {
		int fd = accept4(s->fd, NULL, NULL,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			/* Out of descriptors or memory: the socket stays
			 * readable, so stop watching it for a while rather
			 * than spin. */
			log_warn("metrics: accept (pausing for %.0f s)",
				 ACCEPT_PAUSE_S);
			ev_io_stop(loop, &s->io);
			ev_timer_set(&s->pause, ACCEPT_PAUSE_S, 0.);
			ev_timer_start(loop, &s->pause);
			return;
		}
		if (s->nconns >= MAX_CONNS) {
			log_debug("metrics: %d connections open, refusing one",
				  s->nconns);
			close(fd);
			continue;
		}
		conn_new(s, fd);
	}
}

/* A listening socket on ai; returns it, or -1 with errno set. */
static int
open_listener(const struct addrinfo *ai, int dual_stack)
{
	int one = 1, zero = 0, fd, saved;

	fd = socket(ai->ai_family,
		    ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    ai->ai_protocol);
	if (fd < 0)
		return -1;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)
		goto fail;
	if (dual_stack && ai->ai_family == AF_INET6 &&
	    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero)) < 0)
		goto fail;
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 ||
	    listen(fd, SOMAXCONN) < 0)
		goto fail;
	return fd;
fail:
	saved = errno;
	close(fd);
	errno = saved;
	return -1;
}

/*
 * A listening socket on the first address of host:port that works, or -1
 * with *err set (a new string).  dual_stack lets an IPv6 wildcard accept
 * IPv4 too.  *eno is the errno of the last attempt (0: resolution failed).
 */
static int
bind_host(const char *hostport, const char *host, const char *port,
	  int dual_stack, char **err, int *eno)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *res, *ai;
	int fd = -1, rc;

	*eno = 0;
	rc = getaddrinfo(host, port, &hints, &res);
	if (rc != 0) {
		*err = xasprintf("%s: %s", hostport, gai_strerror(rc));
		return -1;
	}
	for (ai = res; ai && fd < 0; ai = ai->ai_next)
		if ((fd = open_listener(ai, dual_stack)) < 0)
			*eno = errno;
	freeaddrinfo(res);
	if (fd < 0)
		*err = xasprintf("%s: %s", hostport, strerror(*eno));
	return fd;
}

/*
 * Every interface: "::" accepting IPv4 too, or 0.0.0.0 on a host without
 * IPv6.  Any other failure (the port is taken) is reported as it is, so
 * that a busy port never quietly ends up as an IPv4-only listener.
 */
static int
bind_wildcard(const char *hostport, const char *port, char **err)
{
	int eno, fd = bind_host(hostport, "::", port, 1, err, &eno);

	if (fd >= 0 || (eno != EAFNOSUPPORT && eno != EADDRNOTAVAIL))
		return fd;
	free(*err);
	*err = NULL;
	return bind_host(hostport, "0.0.0.0", port, 0, err, &eno);
}

static int
bound_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		return -1;
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

struct httpd *
httpd_listen(struct ev_loop *loop, const char *hostport, httpd_render_fn render,
	     void *arg, char **err)
{
	struct httpd *s;
	char *host, *port;
	int fd;

	*err = NULL;
	if (metrics_parse_listen(hostport, &host, &port) < 0) {
		*err = xasprintf(
			"%s: expected \"host:port\", \"[v6addr]:port\" "
			"or \":port\"",
			hostport);
		return NULL;
	}
	if (host) {
		int eno;
		fd = bind_host(hostport, host, port, 0, err, &eno);
	} else {
		fd = bind_wildcard(hostport, port, err);
	}
	free(host);
	free(port);
	if (fd < 0)
		return NULL;
	s = xcalloc(1, sizeof(*s));
	s->loop = loop;
	s->fd = fd;
	s->port = bound_port(fd);
	s->render = render;
	s->arg = arg;
	s->timeout = DEFAULT_TIMEOUT;
	ev_io_init(&s->io, on_accept, fd, EV_READ);
	s->io.data = s;
	ev_io_start(loop, &s->io);
	ev_timer_init(&s->pause, on_pause_end, ACCEPT_PAUSE_S, 0.);
	s->pause.data = s;
	return s;
}

int
httpd_port(const struct httpd *s)
{
	return s->port;
}

void
httpd_set_timeout(struct httpd *s, double seconds)
{
	s->timeout = seconds;
}

int
httpd_connections(const struct httpd *s)
{
	return s->nconns;
}

void
httpd_close(struct httpd *s)
{
	if (!s)
		return;
	while (s->conns)
		conn_free(s->conns);
	ev_io_stop(s->loop, &s->io);
	ev_timer_stop(s->loop, &s->pause);
	close(s->fd);
	free(s);
}

void
httpd_forget(struct httpd *s)
{
	if (!s)
		return;
	while (s->conns) {
		struct conn *c = s->conns;
		s->conns = c->next;
		close(c->fd);
		buf_free(&c->out);
		free(c);
	}
	close(s->fd);
	free(s);
}

/* ---- Prometheus text format ---- */
