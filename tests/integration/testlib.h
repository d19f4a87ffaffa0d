/*
 * testlib: what integration tests share.  Each test gets a database of its
 * own on the throwaway server that the ctest fixture "pg" started
 * (scripts/testpg.sh), runs the real binaries of the build, and reads the
 * results back with SQL.  Every helper fails the test on error, so test
 * bodies read as a list of steps and checks.  The t_assert_* and t_wait_*
 * helpers are macros that report a failure at the line of the test that
 * called them, with what was expected and what was found.
 */
#ifndef PGJOBD_TESTLIB_H
#define PGJOBD_TESTLIB_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <sys/types.h>

#include <cmocka.h>
#include <libpq-fe.h>

/* --- databases ------------------------------------------------------- */

/* conninfo of the server's maintenance database (static storage). */
const char *t_server_conninfo(void);
/*
 * Drops and creates database name; returns its conninfo (static storage,
 * valid until the next call).
 */
const char *t_db_create(const char *name);
/* Runs `pgjob migrate` on conninfo; fails the test unless it exits 0. */
void t_migrate(const char *conninfo);
/* t_db_create() then t_migrate(); returns a new copy of the conninfo
 * (caller frees). */
char *t_db_migrated(const char *name);
PGconn *t_connect(const char *conninfo);
/* Runs sql (no parameters) and fails the test on error. */
void t_exec(PGconn *conn, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* The first column of the first row as a new string, or NULL for SQL null
 * or no row; caller frees. */
char *t_value(PGconn *conn, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* The same as a number; a null or missing value fails the test. */
long long t_long(PGconn *conn, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/*
 * Shows the plans of every statement conn runs from now on, nested ones
 * too (those of functions), through auto_explain as notices, which are
 * appended to *notices (caller frees); t_explain_stop() ends it.
 */
void t_explain_nested(PGconn *conn, char **notices);
void t_explain_stop(PGconn *conn);
/*
 * Polls sql (a query returning one boolean) every 50 ms until true;
 * returns 0, or -1 after timeout_s.
 */
int t_poll(PGconn *conn, int timeout_s, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Asserts that the query's first value is the string want (null fails). */
#define t_assert_value(conn, want, ...)                                        \
	t_assert_value_at(__FILE__, __LINE__, conn, want, __VA_ARGS__)
/* Waits until the query (one boolean) is true; fails after timeout_s. */
#define t_wait_until(conn, timeout_s, ...)                                     \
	t_wait_until_at(__FILE__, __LINE__, conn, timeout_s, __VA_ARGS__)
/*
 * Runs the query, which must fail with SQLSTATE state (NULL: any error);
 * returns the error's primary message (caller frees).
 */
#define t_expect_sqlstate(conn, state, ...)                                    \
	t_expect_sqlstate_at(__FILE__, __LINE__, conn, state, __VA_ARGS__)

/* --- jobs and workers ----------------------------------------------- */

/* expr of job id's row ("select EXPR from pgjob.jobs where id = ID") as a
 * new string, or NULL; caller frees. */
char *t_job(PGconn *conn, long long id, const char *expr);
/* Asserts that expr of job id's row is the string want. */
#define t_assert_job(conn, id, expr, want)                                     \
	t_assert_job_at(__FILE__, __LINE__, conn, id, expr, want)
/* Asserts that expr of job id's row contains each of the strings given. */
#define t_assert_job_has(conn, id, expr, ...)                                  \
	t_assert_job_has_at(__FILE__, __LINE__, conn, id, expr, __VA_ARGS__,   \
			    (const char *)NULL)
/* Waits until job id is in state; fails after timeout_s, saying where it
 * is and its last error. */
#define t_wait_state(conn, id, state, timeout_s)                               \
	t_wait_state_at(__FILE__, __LINE__, conn, id, state, timeout_s)
/* Waits until exactly n jobs are done. */
#define t_wait_done(conn, n, timeout_s)                                        \
	t_wait_until(conn, timeout_s,                                          \
		     "select count(*) = %d from pgjob.all_jobs where "         \
		     "state = 'done'",                                         \
		     (int)(n))
/* Waits until exactly n jobs have ended (done or dead). */
#define t_wait_ended(conn, n, timeout_s)                                       \
	t_wait_until(conn, timeout_s,                                          \
		     "select count(*) = %d from pgjob.all_jobs where "         \
		     "state in ('done', 'dead')",                              \
		     (int)(n))
/* Waits until exactly n jobs are running. */
#define t_wait_running(conn, n, timeout_s)                                     \
	t_wait_until(conn, timeout_s,                                          \
		     "select count(*) = %d from pgjob.all_jobs where "         \
		     "state = 'running'",                                      \
		     (int)(n))
/* Waits until backend pid (another connection's) waits for a lock. */
#define t_wait_lock_wait(conn, pid, timeout_s)                                 \
	t_wait_until(conn, timeout_s,                                          \
		     "select coalesce((select wait_event_type = 'Lock' from"   \
		     " pg_stat_activity where pid = %d), false)",              \
		     (int)(pid))
/* Waits until exactly n workers are registered in pgjob.workers. */
#define t_wait_workers(conn, n, timeout_s)                                     \
	t_wait_until(conn, timeout_s,                                          \
		     "select count(*) = %d from pgjob.workers", (int)(n))
/* The pid of the worker that holds job id (from locked_by = host:slot). */
pid_t t_holder_pid(PGconn *conn, long long id);
/* Waits for the one worker of supervisor sup to register; its pid. */
pid_t t_worker_pid(PGconn *conn, pid_t sup);
/* Notifications on channel pgjob that reached listener, every one
 * committed before the call among them. */
int t_notifications(PGconn *listener);

/* --- files and builds ------------------------------------------------ */

/* Path of a build artefact: $PGJOBD_TEST_BIN/name (static storage). */
const char *t_bin(const char *name);
/* Path below the source tree: $PGJOBD_SOURCE/rel (static storage). */
const char *t_src(const char *rel);
/* Writes text to a new file at path. */
void t_write_file(const char *path, const char *text);
/* Reads a whole file into a new string (caller frees); NULL if absent. */
char *t_read_file(const char *path);
/* A scratch directory for this test process, created on first use. */
const char *t_tmpdir(void);
void t_sleep_ms(int ms);
/* Number of times needle occurs in the file at path. */
int t_count_in_file(const char *path, const char *needle);

/* --- processes ------------------------------------------------------- */

/* The outcome of a finished command. */
struct t_run {
	int status; /* exit code, or 128 + signal */
	char *out;  /* stdout, NUL-terminated; freed by t_run_free() */
	char *err;  /* stderr */
};
/*
 * Runs argv (NULL-terminated) to completion with env_extra ("K=V" strings,
 * NULL-terminated, may be NULL) added to the environment, stdin from
 * /dev/null.  Fails the test after timeout_s seconds.
 */
void t_run(struct t_run *r, int timeout_s, const char *const *env_extra,
	   const char *const *argv);
void t_run_free(struct t_run *r);
/* Runs `pgjob --database conninfo ARG...` (the arguments end with NULL) to
 * completion, within 60 s. */
void t_pgjob(struct t_run *r, const char *conninfo, ...)
	__attribute__((sentinel));
/* The same with the arguments as a NULL-terminated array. */
void t_pgjobv(struct t_run *r, const char *conninfo, const char *const *args);

/* Starts argv in the background, in its own process group, with stdout
 * and stderr appended to logpath; returns its pid. */
pid_t t_spawn(const char *logpath, const char *const *env_extra,
	      const char *const *argv);
/* The same as user uid and group gid (uid 0: as this process). */
pid_t t_spawn_as(uid_t uid, gid_t gid, const char *logpath,
		 const char *const *env_extra, const char *const *argv);
/* Waits up to timeout_s for pid to exit; returns its status as t_run's, or
 * -1 on timeout. */
int t_wait(pid_t pid, int timeout_s);
/* Sends sig to pid and waits up to timeout_s for it to exit; returns its
 * status as t_wait() does. */
int t_stop(pid_t pid, int sig, int timeout_s);
/* 1 while pid exists (and is not a zombie). */
int t_alive(pid_t pid);
/* Waits up to timeout_s for pid to be gone; fails the test if it is not
 * (and kills it, so that it is not left behind). */
#define t_wait_gone(pid, timeout_s)                                            \
	t_wait_gone_at(__FILE__, __LINE__, pid, timeout_s)
/* The pid that a process wrote to path, once it is there; fails the test
 * after timeout_s. */
pid_t t_pid_in_file(const char *path, int timeout_s);
/* Waits until path exists; fails the test after timeout_s.  A handler's
 * mark that it has started: a job is "running" from its claim's commit,
 * before its worker starts the handler. */
void t_wait_file(const char *path, int timeout_s);
/* A field of /proc/PID/status in kB ("VmHWM", "VmRSS"), or -1. */
long t_proc_kb(pid_t pid, const char *field);
/* What ps shows for pid: /proc/PID/cmdline with the NULs between its
 * arguments as spaces; a new string, or NULL when pid is gone. */
char *t_cmdline(pid_t pid);

/* --- daemons --------------------------------------------------------- */

/*
 * t_config() writes NAME.yaml in t_tmpdir() with database.conninfo set to
 * conninfo and body appended, and returns its path (static storage, the
 * same for a name for the whole process: writing it again replaces the
 * file).  t_daemon() starts `pgjobd -c cfg -w workers` with its log in
 * t_log(logname); workers 0 keeps the config's count.
 */
const char *t_config(const char *name, const char *conninfo, const char *body);
pid_t t_daemon(const char *cfg, int workers, const char *logname);
/* t_config(name, conninfo, body as printf) and t_daemon(cfg, 0, name). */
pid_t t_start(const char *name, const char *conninfo, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Starts n instances of cfg, logging to PREFIX0, PREFIX1 ...; pids[i]. */
void t_daemons(const char *cfg, int n, const char *prefix, pid_t *pids);
/* The path of t_tmpdir()/logname.log (static storage, as t_config's). */
const char *t_log(const char *logname);
/* Number of times needle occurs in t_log(logname). */
int t_log_count(const char *logname, const char *needle);
/* Waits until t_log(logname) holds needle at least min times; returns how
 * many times; fails the test after timeout_s. */
#define t_wait_log(logname, needle, min, timeout_s)                            \
	t_wait_log_at(__FILE__, __LINE__, logname, needle, min, timeout_s)
/* SIGTERM to pid; asserts that it exits 0 within 30 s. */
#define t_stop_clean(pid) t_stop_clean_at(__FILE__, __LINE__, pid)

/* --- HTTP ------------------------------------------------------------ */

/*
 * Starts the test HTTP server (tests/fixtures/http/httpd.c) on 127.0.0.1
 * and returns its port; t_httpd_stop(*in_fd, *pid) stops it.
 */
int t_httpd_start(int *in_fd, pid_t *pid);
void t_httpd_stop(int in_fd, pid_t pid);
/* A TCP port of 127.0.0.1 that was free a moment ago. */
int t_free_port(void);
/* GET path from 127.0.0.1:port; the whole response (caller frees), or NULL
 * when nothing listens. */
char *t_http_get(int port, const char *path);
/* The claims answered so far, from pgjobd_claim_seconds_count of the
 * /metrics on port. */
long long t_claims(int port);

/* --- the console's API, called as pgjob web calls it ------------------ */

struct cJSON;
struct db_conn;
struct web_response;
/* A connection set up as pgjob web's (web_api_session()); fails the test
 * otherwise.  db_close() it. */
struct db_conn *t_web_db(const char *conninfo);
/* GET path?query ("k=v&k=v", no escapes: the tests' values hold no & or
 * =; NULL: none) through web_api_get(), as web.c hands a request over;
 * the answer in *out (free out->body). */
void t_web_call(struct db_conn *db, const char *path, const char *query,
		struct web_response *out);
/* t_web_call(), asserting the status and a JSON body; returns it parsed
 * (cJSON_Delete() it). */
struct cJSON *t_web_get(struct db_conn *db, const char *path, const char *query,
			int status);
/*
 * Waits until a worker of the instance whose /metrics is on port has had
 * a whole turn of claims answered that it sent after this call began, so
 * after whatever the caller committed before: the event to wait for
 * before asserting that a claim took nothing (a paused queue, a limit
 * reached).  NOTIFY pgjob_limits, sent until then, makes every worker
 * claim every queue that has room (docs/queues.md).  inflight: the most
 * claims that may be on their way at the call (the workers times the
 * statements of a turn: one for the unlimited queues, one per limited
 * queue).  Fails after 30 s.
 */
void t_wait_claims_after(PGconn *conn, int port, int inflight);

/* --- what the macros above call ------------------------------------- */

void t_assert_value_at(const char *file, int line, PGconn *conn,
		       const char *want, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
void t_wait_until_at(const char *file, int line, PGconn *conn, int timeout_s,
		     const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
char *t_expect_sqlstate_at(const char *file, int line, PGconn *conn,
			   const char *state, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
void t_assert_job_at(const char *file, int line, PGconn *conn, long long id,
		     const char *expr, const char *want);
void t_assert_job_has_at(const char *file, int line, PGconn *conn, long long id,
			 const char *expr, ...) __attribute__((sentinel));
void t_wait_state_at(const char *file, int line, PGconn *conn, long long id,
		     const char *state, int timeout_s);
void t_wait_gone_at(const char *file, int line, pid_t pid, int timeout_s);
int t_wait_log_at(const char *file, int line, const char *logname,
		  const char *needle, int min, int timeout_s);
void t_stop_clean_at(const char *file, int line, pid_t pid);

#endif
