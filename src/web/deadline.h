/*
 * deadline: the deadline of each connection's request (its head, then its
 * body), kept here because libmicrohttpd has only an idle timeout.  A
 * watchdog thread shuts down the socket of a connection past its deadline;
 * libmicrohttpd then closes it as any that its peer dropped (web.c says
 * why: a byte every few seconds must not hold a connection for ever).
 */
#ifndef PGJOBD_WEB_DEADLINE_H
#define PGJOBD_WEB_DEADLINE_H

#include <stddef.h>
#include <stdint.h>

#include <microhttpd.h>

/* Starts the watchdog, for max connections at once; a new connection's
 * head is due within head_ms. */
void web_deadline_start(size_t max, int64_t head_ms);
/* Stops it (after MHD_stop_daemon(): no connection is left). */
void web_deadline_stop(void);
/* libmicrohttpd's MHD_OPTION_NOTIFY_CONNECTION: a connection opened (its
 * head is due) or closed. */
void web_deadline_connection(void *cls, struct MHD_Connection *c,
			     void **socket_context,
			     enum MHD_ConnectionNotificationCode code);
/* Sets the deadline of connection c: ms from now, 0 for none. */
void web_deadline_set(struct MHD_Connection *c, int64_t ms);

#endif
