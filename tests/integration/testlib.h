/*
 * testlib: what integration tests share.  Each test gets a database of its
 * own on the throwaway server that the ctest fixture "pg" started
 * (scripts/testpg.sh), runs the real binaries of the build, and reads the
 * results back with SQL.  Every helper fails the test on error, so test
 * bodies read as a list of steps and checks.
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

/* conninfo of the server's maintenance database (static storage). */
const char *t_server_conninfo(void);
/*
 * Drops and creates database name; returns its conninfo (static storage,
 * valid until the next call).
 */
const char *t_db_create(const char *name);
/* t_db_create() then `pgjob migrate`; returns a new copy of the conninfo
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

/* Path of a build artefact: $PGJOBD_TEST_BIN/name (static storage). */
const char *t_bin(const char *name);
/* Path below the source tree: $PGJOBD_SOURCE/rel (static storage). */
const char *t_src(const char *rel);

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

/* Starts argv in the background, in its own process group, with stdout
 * and stderr appended to logpath; returns its pid. */
pid_t t_spawn(const char *logpath, const char *const *env_extra,
	      const char *const *argv);
/* Waits up to timeout_s for pid to exit; returns its status as t_run's, or
 * -1 on timeout. */
int t_wait(pid_t pid, int timeout_s);
/*
 * Polls sql (a query returning one boolean) every 50 ms until true;
 * returns 0, or -1 after timeout_s.
 */
int t_poll(PGconn *conn, int timeout_s, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Writes text to a new file at path. */
void t_write_file(const char *path, const char *text);
/* Reads a whole file into a new string (caller frees); NULL if absent. */
char *t_read_file(const char *path);
/* A scratch directory for this test process, created on first use. */
const char *t_tmpdir(void);
void t_sleep_ms(int ms);

/*
 * Daemon helpers.  t_config() writes NAME.yaml in t_tmpdir() with
 * database.conninfo set to conninfo and body appended, and returns its path
 * (static storage, one per name until the next call with that name slot;
 * copy it to keep it).  t_daemon() starts `pgjobd -c cfg -w workers` with
 * its log in t_tmpdir()/logname.log; workers 0 keeps the config's count.
 */
const char *t_config(const char *name, const char *conninfo, const char *body);
pid_t t_daemon(const char *cfg, int workers, const char *logname);
/* The path of t_tmpdir()/logname.log (static storage). */
const char *t_log(const char *logname);
/* Sends sig to pid and waits up to timeout_s for it to exit; returns its
 * status as t_wait() does. */
int t_stop(pid_t pid, int sig, int timeout_s);
/* 1 while pid exists (and is not a zombie). */
int t_alive(pid_t pid);
/*
 * Starts the test HTTP server (tests/fixtures/http/httpd.c) on 127.0.0.1
 * and returns its port; it stops when *in_fd is closed (then t_wait(*pid)).
 */
int t_httpd_start(int *in_fd, pid_t *pid);
/* Number of times needle occurs in the file at path. */
int t_count_in_file(const char *path, const char *needle);

#endif
