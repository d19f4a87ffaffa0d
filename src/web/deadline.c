/*
 * deadline: the deadline of each connection's request (deadline.h).
 */
#include "web/deadline.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <time.h>

#include "common/util.h"

/* An entry is freed (under the lock) when libmicrohttpd says the
 * connection closed, before it closes the socket, so the watchdog never
 * touches a descriptor that was reused. */
struct watch {
	int fd;		     /* -1: a free entry */
	int64_t deadline_ms; /* 0: none (its request is in) */
};
static pthread_mutex_t watch_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t watch_stop_cond = PTHREAD_COND_INITIALIZER;
static struct watch *watches;
static size_t nwatches;
static int64_t head_ms; /* a new connection's deadline for its head */
static bool watch_stop;

static int64_t
mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void
web_deadline_connection(void *cls, struct MHD_Connection *c,
			void **socket_context,
			enum MHD_ConnectionNotificationCode code)
{
	struct watch *w = *socket_context;
	const union MHD_ConnectionInfo *ci;

	pthread_mutex_lock(&watch_lock);
	if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
		if (w)
			w->fd = -1;
		*socket_context = NULL;
	} else if ((ci = MHD_get_connection_info(
			    c, MHD_CONNECTION_INFO_CONNECTION_FD))) {
		for (size_t i = 0; i < nwatches; i++) {
			if (watches[i].fd >= 0)
				continue;
			watches[i].fd = ci->connect_fd;
			watches[i].deadline_ms = mono_ms() + head_ms;
			*socket_context = &watches[i];
			break;
		}
	}
	pthread_mutex_unlock(&watch_lock);
}

void
web_deadline_set(struct MHD_Connection *c, int64_t ms)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct watch *w = ci ? ci->socket_context : NULL;

	if (!w)
		return;
	pthread_mutex_lock(&watch_lock);
	w->deadline_ms = ms ? mono_ms() + ms : 0;
	pthread_mutex_unlock(&watch_lock);
}

static void *
watchdog(void *arg)
{
	struct timespec at;

	pthread_mutex_lock(&watch_lock);
	while (!watch_stop) {
		int64_t now = mono_ms();
		for (size_t i = 0; i < nwatches; i++) {
			struct watch *w = &watches[i];
			if (w->fd >= 0 && w->deadline_ms &&
			    now >= w->deadline_ms) {
				shutdown(w->fd, SHUT_RDWR);
				w->deadline_ms = 0;
			}
		}
		clock_gettime(CLOCK_REALTIME, &at);
		at.tv_sec += 1;
		pthread_cond_timedwait(&watch_stop_cond, &watch_lock, &at);
	}
	pthread_mutex_unlock(&watch_lock);
	return arg;
}

static pthread_t dog;

void
web_deadline_start(size_t max, int64_t head)
{
	nwatches = max;
	watches = xcalloc(max, sizeof(*watches));
	head_ms = head;
	for (size_t i = 0; i < nwatches; i++)
		watches[i].fd = -1;
	watch_stop = false;
	pthread_create(&dog, NULL, watchdog, NULL);
}

void
web_deadline_stop(void)
{
	pthread_mutex_lock(&watch_lock);
	watch_stop = true;
	pthread_cond_signal(&watch_stop_cond);
	pthread_mutex_unlock(&watch_lock);
	pthread_join(dog, NULL);
	free(watches);
	watches = NULL;
	nwatches = 0;
}
