/*
 * failpoint: named places where pgjobd talks to the outside, each of which
 * a test can make fail once, in the way that place really fails (a lost
 * connection, a query error, a process that cannot start or crashes, a
 * network error).
 *
 * Armed from the environment: PGJOBD_FAILPOINTS="name:n[,name:n...]" fails
 * the n-th hit of each named failpoint (1: the first), counted across an
 * instance: the supervisor arms them before it forks, and its workers share
 * the counters.  Disarmed, a failpoint is
 * one predicted-false branch on a global; building with
 * -DPGJOBD_NO_FAILPOINTS removes them altogether.
 *
 * docs/failpoints.md lists them; `pgjobd --list-failpoints` prints them,
 * and the failpoint sweep test (tests/integration/test_failpoints.c) arms
 * each in turn, so a new one joins the sweep by being added to the table.
 */
#ifndef PGJOBD_FAILPOINT_H
#define PGJOBD_FAILPOINT_H

enum failpoint {
	FP_NONE = 0,
	FP_CONNECT,
	FP_SLOT_LOCK,
	FP_LISTEN,
	FP_CLAIM_SEND,
	FP_CLAIM_RESULT,
	FP_STOP_IN_CLAIM,
	FP_FINISH_SEND,
	FP_FINISH_RESULT,
	FP_RENEW_SEND,
	FP_RENEW_RESULT,
	FP_HEARTBEAT_SEND,
	FP_SQL_HANDLER_SEND,
	FP_SQL_HANDLER_RESULT,
	FP_LEASE_ACQUIRE,
	FP_TASK_RENEW,
	FP_SCHEDULE_TICK,
	FP_EXEC_SPAWN,
	FP_EXEC_CRASH,
	FP_EXEC_WORKER_DIES,
	FP_PLUGIN_RUN,
	FP_HTTP_REQUEST,
	FP_MIGRATE,
	FP_COUNT
};

/* The name of fp ("claim_result") and what its failure does. */
const char *failpoint_name(enum failpoint fp);
const char *failpoint_effect(enum failpoint fp);

/* Reads PGJOBD_FAILPOINTS; logs and ignores unknown names.  Call once, in
 * the supervisor before it forks. */
void failpoint_init(void);

extern int failpoint_armed;
/* 1 when this hit of fp must fail (and logs it); counts the hit. */
int failpoint_hit(enum failpoint fp);

#ifdef PGJOBD_NO_FAILPOINTS
#define FAILPOINT(fp) 0
#else
#define FAILPOINT(fp)                                                          \
	(__builtin_expect(failpoint_armed, 0) && failpoint_hit(fp))
#endif

#endif
