/*
 * failpoint: the table of failpoints and their arming.
 */
#include "common/failpoint.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/log.h"
#include "common/util.h"

static const struct {
	const char *name;
	const char *effect;
} table[FP_COUNT] = {
	[FP_NONE] = {"none", ""},
	[FP_CONNECT] = {"connect", "a worker's connection attempt fails"},
	[FP_SLOT_LOCK] = {"slot_lock",
			  "taking a slot fails: the connection is dropped"},
	[FP_LISTEN] = {"listen", "LISTEN fails: the connection is dropped"},
	[FP_CLAIM_SEND] = {"claim_send",
			   "the connection is lost before a claim is sent"},
	[FP_CLAIM_RESULT] = {"claim_result",
			     "the connection is lost after a claim committed"},
	[FP_STOP_IN_CLAIM] = {"stop_in_claim",
			      "the worker begins to stop now (as when its "
			      "supervisor is gone) as a claim that took jobs "
			      "answers"},
	[FP_FINISH_SEND] = {"finish_send",
			    "the connection is lost before job ends are "
			    "written"},
	[FP_FINISH_RESULT] = {"finish_result",
			      "the connection is lost after job ends "
			      "committed"},
	[FP_RENEW_SEND] = {"renew_send",
			   "the connection is lost before a lease renewal"},
	[FP_RENEW_RESULT] = {"renew_result",
			     "the connection is lost after a renewal "
			     "committed"},
	[FP_HEARTBEAT_SEND] = {"heartbeat_send",
			       "the connection is lost before a heartbeat"},
	[FP_SQL_HANDLER_SEND] = {"sql_handler_send",
				 "the connection is lost before an sql "
				 "handler's transaction"},
	[FP_SQL_HANDLER_RESULT] = {"sql_handler_result",
				   "the connection is lost after an sql "
				   "handler's transaction committed"},
	[FP_LEASE_ACQUIRE] = {"lease_acquire",
			      "the connection is lost before a cluster lease "
			      "is taken"},
	[FP_TASK_RENEW] = {"task_renew",
			   "the connection is lost after a task's lease "
			   "renewal committed"},
	[FP_SCHEDULE_TICK] = {"schedule_tick",
			      "the connection is lost before a schedule tick "
			      "is enqueued"},
	[FP_EXEC_SPAWN] = {"exec_spawn",
			   "an exec handler's command cannot be started"},
	[FP_EXEC_CRASH] = {"exec_crash",
			   "an exec handler's command is killed (SIGKILL) as "
			   "it starts"},
	[FP_EXEC_WORKER_DIES] = {"exec_worker_dies",
				 "the worker is killed (SIGKILL) a second "
				 "after an exec handler's command started, "
				 "before it returns to its loop"},
	[FP_PLUGIN_RUN] = {"plugin_run",
			   "the worker crashes (abort) inside a plugin run"},
	[FP_MIGRATE] = {"migrate", "pgjob migrate fails before it commits"},
	[FP_HTTP_REQUEST] = {"http_request",
			     "an http handler's request fails as a network "
			     "error"},
};

int failpoint_armed;
static long fail_at[FP_COUNT]; /* the hit that fails; 0: never */
/* Hits so far, shared by the supervisor and every worker it forks, so
 * that "the n-th hit" counts across the instance: a failpoint that kills
 * a worker does not fire again in its replacement. */
static long *hits;

const char *
failpoint_name(enum failpoint fp)
{
	return fp > FP_NONE && fp < FP_COUNT ? table[fp].name : "none";
}

const char *
failpoint_effect(enum failpoint fp)
{
	return fp > FP_NONE && fp < FP_COUNT ? table[fp].effect : "";
}

static void
arm(const char *spec, size_t len)
{
	const char *colon = memchr(spec, ':', len);
	size_t nlen = colon ? (size_t)(colon - spec) : len;
	long n = colon ? strtol(colon + 1, NULL, 10) : 1;
	for (int i = 1; i < FP_COUNT; i++) {
		if (strlen(table[i].name) == nlen &&
		    strncmp(table[i].name, spec, nlen) == 0 && n > 0) {
			fail_at[i] = n;
			failpoint_armed = 1;
			return;
		}
	}
	log_warnx("PGJOBD_FAILPOINTS: unknown failpoint \"%.*s\" ignored",
		  (int)len, spec);
}

void
failpoint_init(void)
{
	const char *env = getenv("PGJOBD_FAILPOINTS");
	memset(fail_at, 0, sizeof(fail_at));
	failpoint_armed = 0;
	while (env && *env) {
		size_t len = strcspn(env, ",");
		if (len > 0)
			arm(env, len);
		env += len + (env[len] == ',');
	}
	if (failpoint_armed && !hits) {
		void *p = mmap(NULL, FP_COUNT * sizeof(long),
			       PROT_READ | PROT_WRITE,
			       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			log_warnx("failpoints: cannot map counters; disarmed");
			failpoint_armed = 0;
			return;
		}
		hits = p;
	}
}

int
failpoint_hit(enum failpoint fp)
{
	if (fp <= FP_NONE || fp >= FP_COUNT || !fail_at[fp])
		return 0;
	if (__atomic_add_fetch(&hits[fp], 1, __ATOMIC_RELAXED) != fail_at[fp])
		return 0;
	log_warnx("failpoint %s: %s", table[fp].name, table[fp].effect);
	/* Out now: the effect may be the process's death (SIGKILL), which
	 * would take a buffered line with it (log_set_buffered()). */
	log_flush();
	return 1;
}
