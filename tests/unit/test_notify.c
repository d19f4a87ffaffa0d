/* Unit tests for notify: the datagrams that reach a socket named by
 * NOTIFY_SOCKET (a path and the abstract form), the environment cleanup,
 * the watchdog interval, and no-ops without a socket. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "daemon/notify.h"

static char dir[] = "/tmp/pgjobd-notify-XXXXXX";
static char path[sizeof(dir) + 16];

/* Binds a datagram socket at name ("@x" for abstract); returns its fd. */
static int
bind_socket(const char *name)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	socklen_t len;
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	if (name[0] == '@') {
		memcpy(sa.sun_path + 1, name + 1, strlen(name) - 1);
		len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
				  strlen(name));
	} else {
		unlink(name);
		strcpy(sa.sun_path, name);
		len = sizeof(sa);
	}
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, len), 0);
	return fd;
}

/* The next datagram as a string, or "" when none is waiting. */
static const char *
next(int fd)
{
	static char msg[4096];
	ssize_t n = recv(fd, msg, sizeof(msg) - 1, MSG_DONTWAIT);
	if (n < 0) {
		assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
		n = 0;
	}
	msg[n] = '\0';
	return msg;
}

/* The messages a supervisor sends over its life, in order. */
static void
send_lifecycle(void)
{
	notify_send("READY=1\nSTATUS=%d workers, %d with a slot", 4, 4);
	notify_send("STATUS=%s", "running");
	notify_send("RELOADING=1");
	notify_send("READY=1");
	notify_send("WATCHDOG=1");
	notify_send("STOPPING=1\nSTATUS=draining %d jobs", 2);
}

static void
check_lifecycle(int fd)
{
	assert_string_equal(next(fd),
			    "READY=1\nSTATUS=4 workers, 4 with a slot");
	assert_string_equal(next(fd), "STATUS=running");
	assert_string_equal(next(fd), "RELOADING=1");
	assert_string_equal(next(fd), "READY=1");
	assert_string_equal(next(fd), "WATCHDOG=1");
	assert_string_equal(next(fd), "STOPPING=1\nSTATUS=draining 2 jobs");
	assert_string_equal(next(fd), "");
}

static void
test_path_socket(void **state)
{
	int fd = bind_socket(path);

	setenv("NOTIFY_SOCKET", path, 1);
	notify_init();
	assert_null(getenv("NOTIFY_SOCKET"));
	send_lifecycle();
	check_lifecycle(fd);
	notify_close();
	notify_send("READY=1");
	assert_string_equal(next(fd), "");
	close(fd);
	unlink(path);
}

static void
test_abstract_socket(void **state)
{
	char name[64];
	snprintf(name, sizeof(name), "@pgjobd-test-notify-%d", (int)getpid());
	int fd = bind_socket(name);

	setenv("NOTIFY_SOCKET", name, 1);
	notify_init();
	assert_null(getenv("NOTIFY_SOCKET"));
	send_lifecycle();
	check_lifecycle(fd);
	notify_close();
	close(fd);
}

/* Unset, empty or invalid NOTIFY_SOCKET: nothing is sent, nothing fails. */
static void
test_noop(void **state)
{
	int fd = bind_socket(path);

	unsetenv("NOTIFY_SOCKET");
	notify_init();
	send_lifecycle();
	notify_close();
	setenv("NOTIFY_SOCKET", "", 1);
	notify_init();
	notify_send("READY=1");
	setenv("NOTIFY_SOCKET", "relative/path", 1);
	notify_init();
	assert_null(getenv("NOTIFY_SOCKET"));
	notify_send("READY=1");
	notify_close();
	assert_string_equal(next(fd), "");
	close(fd);
	unlink(path);
}

/* A socket that nobody listens on any more: sends fail quietly. */
static void
test_gone(void **state)
{
	int fd = bind_socket(path);
	setenv("NOTIFY_SOCKET", path, 1);
	notify_init();
	close(fd);
	unlink(path);
	send_lifecycle();
	notify_close();
}

/* Only the process that called notify_init() sends. */
static void
test_child_silent(void **state)
{
	int fd = bind_socket(path);
	int status;

	setenv("NOTIFY_SOCKET", path, 1);
	notify_init();
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		notify_send("READY=1");
		_exit(notify_watchdog_usec() == 0 ? 0 : 1);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_string_equal(next(fd), "");
	notify_send("STATUS=parent");
	assert_string_equal(next(fd), "STATUS=parent");
	notify_close();
	close(fd);
	unlink(path);
}

static void
test_watchdog(void **state)
{
	char me[32], other[32];
	snprintf(me, sizeof(me), "%d", (int)getpid());
	snprintf(other, sizeof(other), "%d", (int)getpid() + 1);

	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");
	unsetenv("WATCHDOG_PID");
	notify_init();
	assert_int_equal(notify_watchdog_usec(), 0);

	setenv("WATCHDOG_USEC", "30000000", 1);
	notify_init();
	assert_int_equal(notify_watchdog_usec(), 30000000);
	assert_null(getenv("WATCHDOG_USEC"));

	setenv("WATCHDOG_USEC", "30000000", 1);
	setenv("WATCHDOG_PID", me, 1);
	notify_init();
	assert_int_equal(notify_watchdog_usec(), 30000000);
	assert_null(getenv("WATCHDOG_PID"));

	setenv("WATCHDOG_USEC", "30000000", 1);
	setenv("WATCHDOG_PID", other, 1);
	notify_init();
	assert_int_equal(notify_watchdog_usec(), 0);

	const char *bad[] = {"", "abc", "-5", "0", "12x"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		setenv("WATCHDOG_USEC", bad[i], 1);
		notify_init();
		assert_int_equal(notify_watchdog_usec(), 0);
	}
	notify_close();
}

static int
setup(void **state)
{
	log_init("test", LOG_ERROR, 0);
	if (!mkdtemp(dir))
		return -1;
	snprintf(path, sizeof(path), "%s/notify", dir);
	return 0;
}

static int
teardown(void **state)
{
	unlink(path);
	rmdir(dir);
	return 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_path_socket),
		cmocka_unit_test(test_abstract_socket),
		cmocka_unit_test(test_noop),
		cmocka_unit_test(test_gone),
		cmocka_unit_test(test_child_silent),
		cmocka_unit_test(test_watchdog),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
