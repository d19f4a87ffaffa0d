/*
 * session: a worker's connection made ready to work, synchronously, before
 * it goes on the loop: the session's settings, the schema version, a slot
 * (the worker's identity: the lowest free session advisory lock), its
 * queues and their limits, its row in pgjob.workers, and LISTEN on the
 * channels new jobs and changed limits are announced on.
 * Slots are identity and liveness, not safety: the job's lease token is
 * what keeps a job from running twice.
 */
#ifndef PGJOBD_SESSION_H
#define PGJOBD_SESSION_H

#include <stddef.h>
#include <stdint.h>

struct db_conn;

/* Who the worker is, as pgjob.workers records it. */
struct session_worker {
	int64_t lock_class; /* the first key of the slot locks */
	int max_slots;
	/* The slot its previous session held (0: none): that session's row
	 * goes when this one takes another slot (worker_register()). */
	int prev_slot;
	const char *host;
	int pid;
	int supervisor_pid;
	const char *version;
	const char *const *kinds; /* the kinds it handles */
	size_t nkinds;
	/* The queues it claims from: those of its handlers. */
	const char *const *queues;
	size_t nqueues;
	/* Its config's queues and their limits, for pgjob.publish_limits()
	 * (config_limits_json()). */
	const char *limits;
};

/*
 * Sets conn up for w: its settings, the schema check and a slot.  Returns 0
 * with *slot set (1..max_slots); -1 when it may work later (a database
 * error: *err set, caller frees); EXIT_TEMPFAIL when every slot is taken
 * (*err says so); EXIT_CONFIG when the schema is not the one this pgjobd
 * needs (*err says what to do).
 */
int session_start(struct db_conn *conn, const struct session_worker *w,
		  int *slot, char **err);

/* The planner's settings session_start() gives the session (the comment
 * where it sets them says why), for tests of the plans. */
extern const char session_planner_settings[];

/*
 * Then, once its queues are published (session_publish_limits()), w's row
 * in pgjob.workers for slot, and LISTEN: a worker that pgjob.workers shows
 * has made its queues known and their limits the config's, so that
 * pgjob.pause() or pgjob.acquire_slot() of one of them right after works.
 * Returns 0, or -1 with *err set (caller frees).
 */
int session_register(struct db_conn *conn, const struct session_worker *w,
		     int slot, char **err);

/*
 * Publishes w->limits (pgjob.publish_limits()): the queues become known and
 * their limits the config's, where SQL did not set them.  Returns 0 with
 * *replaced set to the queues whose limits came from another config and
 * were different (comma-separated, caller frees; NULL: none), or -1 with
 * *err set.
 */
int session_publish_limits(struct db_conn *conn, const char *limits,
			   char **replaced, char **err);

#endif
