/*
 * notify: sd_notify() without libsystemd.  See notify.h.
 *
 * Each message goes out with sendto() rather than on a connected socket:
 * systemd may re-create its notify socket (daemon-reexec), and a datagram
 * socket connected to the old one would then fail for good.
 */
#include "daemon/notify.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"

static struct {
	int fd;		       /* -1: notifications are off */
	int inited;	       /* notify_init() has run */
	int logged;	       /* a send failure was logged already */
	pid_t pid;	       /* the process that called notify_init() */
	int64_t watchdog_usec; /* read by notify_init() */
	struct sockaddr_un addr;
	socklen_t addrlen;
} nt = {.fd = -1};

/* Fills nt.addr from a NOTIFY_SOCKET value; returns 0, or -1 if invalid. */
static int
parse_address(const char *s)
{
	size_t n = strlen(s);

	memset(&nt.addr, 0, sizeof(nt.addr));
	nt.addr.sun_family = AF_UNIX;
	if (s[0] == '@') {
		/* Abstract: a leading NUL, then the name, not terminated. */
		if (n < 2 || n > sizeof(nt.addr.sun_path))
			return -1;
		memcpy(nt.addr.sun_path + 1, s + 1, n - 1);
		nt.addrlen =
			(socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
		return 0;
	}
	if (s[0] != '/' || n >= sizeof(nt.addr.sun_path))
		return -1;
	memcpy(nt.addr.sun_path, s, n + 1);
	nt.addrlen =
		(socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
	return 0;
}

/* WATCHDOG_USEC for this process, from the environment; 0 if none. */
static int64_t
watchdog_from_env(void)
{
	const char *usec = getenv("WATCHDOG_USEC");
	const char *pid = getenv("WATCHDOG_PID");
	char *end;

	if (!usec || !*usec)
		return 0;
	if (pid && *pid) {
		errno = 0;
		long long p = strtoll(pid, &end, 10);
		if (errno || *end || p != (long long)getpid())
			return 0;
	}
	errno = 0;
	long long v = strtoll(usec, &end, 10);
	if (errno || *end || v <= 0)
		return 0;
	return v;
}

void
notify_init(void)
{
	const char *sock = getenv("NOTIFY_SOCKET");

	notify_close();
	nt.inited = 1;
	nt.logged = 0;
	nt.pid = getpid();
	nt.watchdog_usec = watchdog_from_env();
	if (sock && *sock) {
		if (parse_address(sock) < 0)
			log_warnx("NOTIFY_SOCKET=%s: not an absolute path or "
				  "@abstract name; not notifying systemd",
				  sock);
		else if ((nt.fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC,
					 0)) < 0)
			log_warn("notify socket");
	}
	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");
	unsetenv("WATCHDOG_PID");
}

void
notify_send(const char *fmt, ...)
{
	va_list ap;
	char *msg;
	int n;

	if (nt.fd < 0 || getpid() != nt.pid)
		return;
	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	msg = xmalloc((size_t)n + 1);
	va_start(ap, fmt);
	vsnprintf(msg, (size_t)n + 1, fmt, ap);
	va_end(ap);
	if (sendto(nt.fd, msg, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL,
		   (const struct sockaddr *)&nt.addr, nt.addrlen) < 0 &&
	    !nt.logged) {
		nt.logged = 1;
		log_debug("sd_notify: %s (further failures not logged)",
			  strerror(errno));
	}
	free(msg);
}

int64_t
notify_watchdog_usec(void)
{
	if (!nt.inited)
		return watchdog_from_env();
	return getpid() == nt.pid ? nt.watchdog_usec : 0;
}

void
notify_close(void)
{
	if (nt.fd >= 0)
		close(nt.fd);
	nt.fd = -1;
}
