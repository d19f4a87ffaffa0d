/*
 * listen: the console's listening socket (listen.h).
 */
#include "web/listen.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/metrics.h"

bool
web_is_loopback(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)ss;
		return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
	}
	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)ss;
		return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
	}
	return false;
}

/*
 * A listening socket on listen ("host:port", host empty or "*" for every
 * address).  Fills *bound with its address; returns the socket, or -1
 * after printing why.
 */
int
web_listen_open(const char *listen_at, struct sockaddr_storage *bound)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE};
	struct addrinfo *res, *ai;
	char *host, *port;
	int fd = -1, one = 1, e;

	if (metrics_parse_listen(listen_at, &host, &port) < 0) {
		fprintf(stderr,
			"pgjob: web: listen \"%s\": expected host:port, "
			"e.g. 127.0.0.1:8080\n",
			listen_at);
		return -1;
	}
	if ((e = getaddrinfo(host, port, &hints, &res)) != 0) {
		fprintf(stderr, "pgjob: web: listen %s: %s\n", listen_at,
			gai_strerror(e));
		goto out;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
			    ai->ai_protocol);
		if (fd < 0)
			continue;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
		    listen(fd, 64) == 0)
			break;
		e = errno;
		close(fd);
		fd = -1;
		errno = e;
	}
	if (fd < 0)
		fprintf(stderr, "pgjob: web: listen %s: %s\n", listen_at,
			strerror(errno));
	else {
		socklen_t len = sizeof(*bound);
		getsockname(fd, (struct sockaddr *)bound, &len);
	}
	freeaddrinfo(res);
out:
	free(host);
	free(port);
	return fd;
}

/* The bound address as host and port, for the start line and the Host
 * check. */
void
web_bound_name(const struct sockaddr_storage *ss, char *host, size_t len,
	       int *port)
{
	char h[INET6_ADDRSTRLEN] = "?";

	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)ss;
		inet_ntop(AF_INET6, &in6->sin6_addr, h, sizeof(h));
		snprintf(host, len, "[%s]", h);
		*port = ntohs(in6->sin6_port);
	} else {
		const struct sockaddr_in *in = (const void *)ss;
		inet_ntop(AF_INET, &in->sin_addr, h, sizeof(h));
		snprintf(host, len, "%s", h);
		*port = ntohs(in->sin_port);
	}
}
