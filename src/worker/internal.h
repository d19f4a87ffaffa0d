/*
 * worker internal: what the files of one worker process share.
 *
 *   worker.c     the process: its loop and its turn (ends, then claims),
 *                signals, connection and session, heartbeat, the way out
 *   monitor.c    the figures for /metrics that one worker per instance
 *                reads, on a connection of its own
 *   conn.c       statements' outcomes, and the connection lost
 *   claim.c      claims: when to claim, from where, what came back
 *   notify.c     the NOTIFYs the connection receives: whose turn a new
 *                job is, where it sorts; the limits changed (the
 *                payload's grammar: notify_payload.c, pure)
 *   flow.c       flow control of limited queues: holds and wake-ups
 *   held.c       the jobs it holds, from the claim to the end written: start,
 *                the handler's report, the end decided, sent, answered
 *   sqlhandler.c an sql handler's job: its turn on the connection
 *   renew.c      lease renewals and deadlines
 *   duty.c       the cluster duties (scheduler.c, tasks.c, prune.c)
 *
 * Who calls whom, top down, with no circle: worker.c; claim.c and
 * renew.c; notify.c and sqlhandler.c; flow.c and held.c; conn.c.
 *
 * A job the worker holds is a struct held: RUNNING while its handler runs
 * (or SQL_WAITING for its turn on the connection), DONE once the handler
 * has reported and its end waits to be written, WRITING while that write
 * is in flight.  Writes and claims are gathered in an ev_prepare watcher,
 * which runs once per loop iteration just before the loop sleeps, so
 * everything that finished in one iteration is written in one statement
 * and the next claim goes out in the same pipeline (the turn: worker.c).
 */
#ifndef PGJOBD_WORKER_INTERNAL_H
#define PGJOBD_WORKER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <ev.h>

#include "common/job.h"
#include "common/config.h"
#include "common/history.h"
#include "common/log.h"
#include "db/lease.h"
#include "db/claim.h"
#include "db/claim_limited.h"
#include "db/finish.h"
#include "db/monitor.h"
#include "db/renew.h"
#include "db/sqlhandler.h"
#include "handlers/handler.h"
#include "worker/notify_payload.h"

struct config;
struct db_status;
struct stats;
struct stats_kind;
struct stats_worker;
struct dbev;
struct dbev_connecting;

enum held_state { HELD_RUNNING, HELD_SQL_WAITING, HELD_DONE, HELD_WRITING };

enum { RESCAN_NONE, RESCAN_FROM, RESCAN_HEAD };

/*
 * The longest a sweep (the claim from every queue's head with the search
 * for expired leases, claim.c) and a read of the queue depths (monitor.c)
 * may take: under a snapshot held open elsewhere both read every index
 * entry it keeps.  A sweep holds up its worker's claims and ends behind
 * it in the pipeline; the depth read has a connection of its own, but
 * the worker's too while that cannot be made.  A sweep is a few ms
 * otherwise; the depths read counts every queued job, so it gets longer.
 *
 * A sweep's limit is SWEEP_TIMEOUT_MS or SWEEP_TIMEOUT_CLAIMS of the
 * worker's usual claims (their moving mean), whichever is longer, and
 * SWEEP_TIMEOUT_MAX_MS at most: on a machine that is simply busy (200
 * workers on 2 cores), every statement is slow and a sweep is no
 * exception; it is the sweep being slow beside the claims that says dead
 * entries are in its way (sweep_limit_ms()).
 */
#define SWEEP_TIMEOUT_MS     1000
#define SWEEP_TIMEOUT_CLAIMS 20
#define SWEEP_TIMEOUT_MAX_MS 30000
#define DEPTH_TIMEOUT_MS     5000

/*
 * What a worker keeps of one queue of its config (w->wq[i] for
 * cfg->queues[i]): its jobs running, where its next claim reads from,
 * and its flow control.
 */
struct wqueue {
	int running; /* its jobs held and not ended */
	int serves;  /* 1 when some handler of this worker uses it */
	/* Where its next claim reads the index of available jobs from
	 * (queue_claim_req), and whether it has such a place. */
	struct queue_position pos;
	int pos_valid;
	/* Its last claim came back full, so more due jobs may be waiting
	 * than a claim asked for (see claim_after_end() in held.c). */
	int more;
	/*
	 * Flow control (flow.c).  limited: it has a row in pgjob.limits, and
	 * only pgjob.claim_limited() claims it (the claims' answers keep this
	 * up to date).  want: claim it at the next turn.  hold_until: no
	 * claim could start a job of it before then (its rate, a throttle);
	 * wake_at: claim it then (a limit's hint); monotonic ms, 0: none.
	 * The flow timer fires at the first wake_at of all queues.
	 */
	int limited;
	int want;
	int64_t hold_until, wake_at;
	/* What the NOTIFYs since its last claim said of new jobs that sort
	 * before its position: RESCAN_NONE, RESCAN_FROM (the next claim
	 * reads from rescan_from, the earliest of their keys) or RESCAN_HEAD
	 * (a payload that did not say: from the head). */
	int rescan;
	struct queue_position rescan_from;
	/* The earliest key of the NOTIFYs since its last claim was sent that
	 * sort after its position (known: there was one): a claim from the
	 * position reads ahead of it no further than there
	 * (queue_claim_req's until). */
	struct notify_key until;
	/* Whether this worker's last turn in it waited: another claimer
	 * shares its lane, and its claims read ahead (claim.c,
	 * TURN_CROWDED_MS). */
	int crowded;
};

struct held {
	struct worker *w;
	struct job job;
	enum held_state state;
	struct handler_run *run;
	size_t queue;	     /* index into cfg->queues */
	int64_t deadline_ms; /* monotonic: stop the handler past this */
	int lost;	     /* lease lost: discard the result */
	int release;	     /* stopped by shutdown: give the job back */
	int overdue;	     /* stopped at its deadline */
	int cancelled;	     /* lost because an operator cancelled it */
	int solo;	     /* write alone (its batch failed) */
	/* Its end is a retry in place (fin.again): it keeps its place in
	 * its queue's running count until that end is answered. */
	int again;
	/* The error of its last retry in place, which the database wrote to
	 * the attempt's history but not to the job's row (finish.c, fr): the
	 * next end that has no error of its own carries it to last_error, as
	 * that retry's write did before.  Owned; NULL: none. */
	char *carried_error;
	int write_failures;
	struct stats_kind *sk; /* this kind's counters, or NULL */
	int64_t started_ms;
	struct queue_finish fin; /* valid in DONE and WRITING */
	struct handler_result res;
	/* fin's figures (note_usage()): wall, CPU ms, peak RSS KiB; -1: not
	 * measured. */
	int64_t wall_ms, cpu_ms, max_rss_kb;
	struct held *prev, *next;
};

struct worker {
	const struct config *cfg;
	struct ev_loop *loop;
	struct dbev *db;
	struct duty *duty;	 /* scheduler, pruning, leased tasks */
	struct stats *stats;	 /* shared with the supervisor */
	struct stats_worker *st; /* this worker's entry in it */
	int index;		 /* that entry's index */
	int number;		 /* worker=N: its number in its instance */
	int slot;
	int pid, supervisor_pid;
	char host[256];
	char *locked_by;
	const char **kinds;
	size_t nkinds;
	/* Its handlers sorted by kind, for worker_handler(). */
	const struct handler_conf **by_kind;
	struct wqueue *wq; /* per cfg->queues index */
	struct held *head;
	int nheld;
	struct otlp *otlp; /* the attempts' spans sent, or NULL (otlp.h) */
	int want_claim, cycle_inflight;
	int sql_inflight;  /* sql handler statements on the connection */
	int online;	   /* connected, slot held, statements can be sent */
	int trimmed;	   /* the heap was trimmed since the worker went idle */
	ev_timer flow;	   /* flow.c: at the first wake_at of any queue */
	char *limits_json; /* its config's limits (config_limits_json()) */
	/* When a sweep last ran out of time, for the warning's pace, and
	 * how many sweeps in a row did (sweep_timed_out()). */
	int64_t sweep_warned_ms;
	int sweep_stops;
	/* When this worker last asked for its queues' sweep tickets
	 * (monotonic ms), and its last sweep's round trip (ms): it asks
	 * again a second later, or 50 round trips later, whichever is
	 * later (see from_positions()). */
	int64_t head_scan_ms, head_cost_ms;
	/* The moving mean of the other claims' round trips (µs, 1/8 weight
	 * to the latest): what a sweep's time limit is measured against. */
	int64_t claim_avg_us;
	/* 0 until the connection's first claim has answered: that one also
	 * built the statement's plan (see on_claim()). */
	int claim_planned;
	int draining, stopping;
	int retiring; /* a reload retired it: no deadline to finish */
	int exit_code;
	int reconnects; /* failed attempts since the last success */
	int connected_once;
	ev_prepare prepare;
	ev_prepare log_flush; /* last before each wait: log_flush() */
	ev_timer poll, renew, heartbeat, deadline, reconnect, shutdown, final;
	ev_timer depth; /* one worker per instance reads queue depths */
	/* When the last read of the depths was sent, and the next may be
	 * (monotonic ms): no sooner than 50 of its answer times later, as
	 * under an old snapshot it reads every dead entry of the claim and
	 * running indexes (see on_depths()). */
	int64_t depth_sent_ms, depth_next_ms;
	/* monitor.c: depth rounds since dead jobs were last counted (0:
	 * never), and dead_here() at that count. */
	unsigned dead_rounds;
	uint64_t dead_seen;
	/* monitor.c: the depth reader's own connection, up (mon; mon_lost
	 * once it broke, freed by the next round) or being made
	 * (mon_connecting); attempts that failed in a row, and when the
	 * next may be made (monotonic ms).  reads_on: the connection a round
	 * of reads in flight went on (mon, or db while mon cannot be
	 * made), NULL between rounds. */
	struct dbev *mon;
	struct dbev_connecting *mon_connecting;
	int mon_lost, mon_failures;
	int64_t mon_retry_ms;
	struct dbev *reads_on;
	/*
	 * The console's throughput (sql/upgrade/014_console_state.sql): ended
	 * counts the attempts this process ended (held.c, where an end is
	 * written). The heartbeat adds ended - sent to the current minute's row
	 * and moves sent up to ended; a write that fails moves sent back down
	 * by what it carried, so the next one adds it again (a write whose
	 * commit went through but whose answer was lost with the connection
	 * is counted twice: a few seconds' worth, rarely).  base: ended when
	 * the worker last registered; its pgjob.workers row has ended - base.
	 * minute_failing: the last write of a minute's row failed (logged
	 * once).
	 */
	struct lease_totals ended, sent, base;
	int minute_failing;
	/* history.c: what it ended per (queue, kind) since its last write to
	 * pgjob.history_minutes; history_failing as minute_failing. */
	struct history hist;
	int history_failing;
	ev_signal sigterm, sigint, sigusr2;
	ev_io parent;
};

/* The margin by which a worker stops a handler before its lease ends: a
 * fifth of the lease. */
static inline int64_t
lease_margin(const struct worker *w)
{
	return w->cfg->lease_ms / 5;
}

/* conn.c */
/*
 * Whether st says the statement succeeded; logs it ("what failed: ...")
 * when not.  An error that says this server cannot take our writes any
 * more (a standby after a failover: 25006; an admin shutdown: 57P0x) while
 * the connection still looks fine drops the connection, so that the
 * reconnect finds the new primary.
 */
int conn_ok(struct worker *w, const struct db_status *st, const char *what);
/* The connection is lost (dbev's on_lost hook; arg: the worker). */
void conn_lost(void *arg, const char *why);

/*
 * One turn of the loop sends ends and claims (worker.c); cycle_inflight
 * counts its statements in flight, and a turn waits for the last one's
 * answers.  Each answer calls this; on_lost() zeroes the count, and the
 * statements of the lost link still report (lost) after it.
 */
static inline void
cycle_done(struct worker *w)
{
	if (w->cycle_inflight > 0)
		w->cycle_inflight--;
}

/* held.c */
/* The job in its log lines. */
struct log_job held_log(const struct held *h);
/* Takes over a claimed job of queue q (a cfg->queues index) and starts
 * it (an sql handler's job waits for sqlhandler_next()); sent_ms: when its
 * claim was sent. */
void held_start(struct worker *w, struct job *job, size_t q, int64_t sent_ms);
/* The attempt (id, token) this worker holds, or NULL. */
struct held *held_find(struct worker *w, int64_t id, int64_t token);
/* Forgets h: its result, its job, itself. */
void held_unlink(struct worker *w, struct held *h);
/* A held job's handler has reported: decide how the attempt ends. */
void held_ended(struct held *h, struct handler_result *res);
/* An attempt whose end was written with its work, in its own transaction
 * (an sql handler's: written), or that found its lease gone before it ran
 * (!written): counted, and forgotten. */
void held_ended_written(struct held *h, int written);
/* Sends the ends decided since the last turn in one statement (marked
 * WRITING; or one alone, after its batch failed); whether one of them ends
 * a job with children (struct job's parent): 1 or 0, -1 when none was
 * sent. */
int held_send_ends(struct worker *w);
/* The jobs of a claim that answered after the worker began to retire:
 * back to their queue, unstarted. */
void held_give_back(struct worker *w, struct queue_claimed *r);
/* Stop now: every running handler is stopped, every waiting job given
 * back. */
void held_stop_all(struct worker *w, const char *why);

/* worker.c */
/* The worker's stop now (its supervisor gone, a second stop signal): what
 * it holds is stopped and given back, and it exits once that is written. */
void worker_stop_now(struct worker *w, const char *why);

/* sqlhandler.c */
/* Starts the sql job that has waited longest, when the connection is
 * free. */
void sqlhandler_next(struct worker *w);

/* claim.c */
/* The claims of the loop's turn: when all (the worker wants work), a claim
 * of every queue without limits that has room; and the limited queues
 * that want one (all: every one).  Returns, when the first asks for every
 * queue without limits it serves, the fewest places it asks for in one
 * (the jobs it takes of any one queue); else 0. */
long long claim_send(struct worker *w, int all);
/* The handler of kind, or NULL: a binary search of by_kind (a worker can
 * have thousands of handlers, and looks one up for every job it takes). */
const struct handler_conf *worker_handler(const struct worker *w,
					  const char *kind);

/* notify.c */
/* The connection's NOTIFY hook (channels pgjob and pgjob_limits). */
void notify_received(void *arg, const char *channel, const char *payload,
		     int be_pid);
/* Where key sorts against position p, by priority and then run_at: < 0
 * before it, 0 at the same priority and run_at (where a smaller id may
 * hide), > 0 after it. */
int notify_key_cmp(const struct notify_key *key,
		   const struct queue_position *p);
/* The position just before every job of key's priority and run_at, in
 * p. */
const struct queue_position *notify_key_position(const struct notify_key *key,
						 struct queue_position *p);
/* Queue i's next claim reads from where key's jobs sort (from its head
 * when the key is not known), or from further back. */
void notify_rescan_from(struct worker *w, size_t i,
			const struct notify_key *key);

/* flow.c */
/* The flow timer: claims the limited queues whose wake_at has come. */
void flow_on_timer(struct ev_loop *loop, ev_timer *t, int revents);
/* (Re)arms the flow timer for the first wake_at of any queue. */
void flow_rearm(struct worker *w);
/* What a claim said of queue i's flow control. */
void flow_said(struct worker *w, size_t i, const struct queue_flow_said *f);

/* renew.c */
/* Renews every lease this worker holds, in one statement. */
void renew_all(struct worker *w);
/* Stops the handlers whose lease could not be renewed in time. */
void renew_check_deadlines(struct worker *w);

/* monitor.c: what the depth reader reads for /metrics, on a connection
 * of its own: queue depths and workflows every 5 s (longer when they are
 * slow), dead jobs per queue (once a minute, and sooner after a worker of
 * this instance made one dead), the schedules' ticks.  The timer's
 * callback: it reads when this worker is the reader, and closes the
 * reader's connection when it no longer is. */
void monitor_on_timer(struct ev_loop *loop, ev_timer *t, int revents);
/* Closes the reader's connection, if it has one. */
void monitor_close(struct worker *w);

/* --- history.c: the history per queue and kind ------------------------- */

/* Counts an attempt's start (its wait) and its written end (state as
 * count_end() has it, retried, and the run time). */
void history_started(struct held *h);
void history_ended(struct held *h, enum job_state state, int retried);
/* At the heartbeat: writes what was counted since the last write. */
void history_flush(struct worker *w);
/* At a clean exit, at once (the connection has nothing pending). */
void history_flush_now(struct worker *w);

#endif
