/*
 * listen: the console's listening socket (web.c hands it to libmicrohttpd):
 * opening it on "host:port", whether it is a loopback address (an open
 * console may listen on nothing else; a loopback console checks Host), and
 * its address as the start line and the Host check name it.
 */
#ifndef PGJOBD_WEB_LISTEN_H
#define PGJOBD_WEB_LISTEN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

/*
 * A listening socket on listen_at ("host:port", host empty or "*" for every
 * address, port 0 for any free one).  Fills *bound with its address;
 * returns the socket, or -1 after printing why on stderr.
 */
int web_listen_open(const char *listen_at, struct sockaddr_storage *bound);
/* Whether ss is an IPv4 127/8 or the IPv6 loopback address. */
bool web_is_loopback(const struct sockaddr_storage *ss);
/* ss as host ("127.0.0.1", "[::1]") and port. */
void web_bound_name(const struct sockaddr_storage *ss, char *host, size_t len,
		    int *port);

#endif
