/*
 * notify: the systemd notify protocol (sd_notify) without libsystemd.
 *
 * A message is one datagram of "KEY=VALUE" lines to the AF_UNIX socket that
 * systemd names in $NOTIFY_SOCKET (a path, or "@name" for an abstract
 * socket).  Outside systemd the variable is unset and every call here is a
 * cheap no-op, so callers never test whether they run under systemd.
 *
 * Only the process that called notify_init() (the supervisor, systemd's
 * MainPID) sends: in a forked child notify_send() does nothing and
 * notify_watchdog_usec() returns 0.  A child should still call
 * notify_close() after the fork so that it holds no copy of the socket.
 *
 * The module keeps one socket and a few numbers in static storage; nothing
 * it returns needs freeing.
 */
#ifndef PGJOBD_NOTIFY_H
#define PGJOBD_NOTIFY_H

#include <stdint.h>

/*
 * Reads $NOTIFY_SOCKET, $WATCHDOG_USEC and $WATCHDOG_PID once, opens a
 * SOCK_DGRAM|SOCK_CLOEXEC socket when NOTIFY_SOCKET is set, and unsets all
 * three so that no child (worker, exec handler, task) inherits them.
 * Calling it again closes the old socket first.  Never fails: a bad
 * NOTIFY_SOCKET is logged at warn level and notifications are off.
 */
void notify_init(void);

/*
 * Sends one message, e.g. notify_send("READY=1\nSTATUS=%d workers", n).
 * Never blocks (MSG_DONTWAIT); a failure is logged once, at debug level,
 * and otherwise ignored.  No-op without a socket or in a forked child.
 */
void notify_send(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * The watchdog interval systemd asked for (WatchdogSec=), in microseconds,
 * when WATCHDOG_PID was unset or named this process; 0 for no watchdog.
 * Send "WATCHDOG=1" at least every half of it.  After notify_init() the
 * value read then is returned (the variables are gone by now); before it,
 * the environment is read.
 */
int64_t notify_watchdog_usec(void);

/* Closes the socket; later notify_send() calls are no-ops. */
void notify_close(void);

#endif
