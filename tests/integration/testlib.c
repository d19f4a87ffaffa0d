/*
 * testlib: database, process and file helpers for integration tests.
 */
#include "testlib.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "common/util.h"
#include "db/db.h"
#include "web/api.h"

extern char **environ;

static char *
vformat(const char *fmt, va_list ap)
{
	char *s;
	if (vasprintf(&s, fmt, ap) < 0)
		abort();
	return s;
}

const char *
t_server_conninfo(void)
{
	static char *conninfo;
	if (conninfo)
		return conninfo;
	const char *dir = getenv("PGJOBD_TESTPG");
	if (!dir)
		fail_msg("PGJOBD_TESTPG is not set: run the tests through "
			 "ctest");
	char path[4096];
	snprintf(path, sizeof(path), "%s/conninfo", dir);
	conninfo = t_read_file(path);
	if (!conninfo)
		fail_msg("no %s: did the pg.start fixture run?", path);
	conninfo[strcspn(conninfo, "\n")] = '\0';
	return conninfo;
}

const char *
t_db_create(const char *name)
{
	static char conninfo[1024];
	PGconn *conn = t_connect(t_server_conninfo());
	t_exec(conn, "drop database if exists %s with (force)", name);
	t_exec(conn, "create database %s", name);
	PQfinish(conn);
	/* The last dbname= wins in a conninfo string. */
	snprintf(conninfo, sizeof(conninfo), "%s dbname=%s",
		 t_server_conninfo(), name);
	return conninfo;
}

void
t_migrate(const char *conninfo)
{
	struct t_run r;
	const char *argv[] = {t_bin("pgjob"), "--database", conninfo, "migrate",
			      NULL};
	t_run(&r, 120, NULL, argv);
	if (r.status != 0)
		fail_msg("pgjob migrate: exit %d: %s%s", r.status, r.out,
			 r.err);
	t_run_free(&r);
}

char *
t_db_migrated(const char *name)
{
	char *ci = xstrdup(t_db_create(name));
	t_migrate(ci);
	return ci;
}

PGconn *
t_connect(const char *conninfo)
{
	PGconn *conn = PQconnectdb(conninfo);
	if (PQstatus(conn) != CONNECTION_OK)
		fail_msg("connect %s: %s", conninfo, PQerrorMessage(conn));
	PQclear(PQexec(conn, "set client_min_messages = warning"));
	return conn;
}

static PGresult *
query(PGconn *conn, const char *sql)
{
	PGresult *res = PQexec(conn, sql);
	ExecStatusType st = PQresultStatus(res);
	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
		fail_msg("SQL failed: %s\n%s", sql, PQresultErrorMessage(res));
	return res;
}

void
t_exec(PGconn *conn, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *sql = vformat(fmt, ap);
	va_end(ap);
	PQclear(query(conn, sql));
	free(sql);
}

static char *
vvalue(PGconn *conn, const char *fmt, va_list ap)
{
	char *sql = vformat(fmt, ap);
	PGresult *res = query(conn, sql);
	free(sql);
	char *v = NULL;
	if (PQntuples(res) > 0 && !PQgetisnull(res, 0, 0))
		v = xstrdup(PQgetvalue(res, 0, 0));
	PQclear(res);
	return v;
}

/* A notice appended to the caller's buffer (t_explain_nested()). */
static void
keep_notice(void *arg, const char *message)
{
	char **buf = arg;
	size_t old = *buf ? strlen(*buf) : 0, add = strlen(message);
	char *n = realloc(*buf, old + add + 1);
	assert_non_null(n);
	memcpy(n + old, message, add + 1);
	*buf = n;
}

void
t_explain_nested(PGconn *conn, char **notices)
{
	PQsetNoticeProcessor(conn, keep_notice, notices);
	t_exec(conn, "load 'auto_explain'");
	t_exec(conn, "set auto_explain.log_min_duration = 0");
	t_exec(conn, "set auto_explain.log_nested_statements = on");
	t_exec(conn, "set auto_explain.log_level = notice");
	t_exec(conn, "set client_min_messages = notice");
}

void
t_explain_stop(PGconn *conn)
{
	t_exec(conn, "set auto_explain.log_min_duration = -1");
}

char *
t_value(PGconn *conn, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *v = vvalue(conn, fmt, ap);
	va_end(ap);
	return v;
}

long long
t_long(PGconn *conn, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *v = vvalue(conn, fmt, ap);
	va_end(ap);
	if (!v)
		fail_msg("query returned null: %s", fmt);
	long long n = atoll(v);
	free(v);
	return n;
}

static const char *
env_path(const char *var, const char *rel)
{
	static char path[4][4096];
	static int next;
	const char *dir = getenv(var);
	if (!dir)
		fail_msg("%s is not set: run the tests through ctest", var);
	char *p = path[next++ % 4];
	snprintf(p, 4096, "%s/%s", dir, rel);
	return p;
}

const char *
t_bin(const char *name)
{
	return env_path("PGJOBD_TEST_BIN", name);
}

const char *
t_src(const char *rel)
{
	return env_path("PGJOBD_SOURCE", rel);
}

/* environ plus extra, as a new NULL-terminated array (strings borrowed). */
static char **
make_env(const char *const *extra)
{
	size_t n = 0, m = 0;
	while (environ[n])
		n++;
	while (extra && extra[m])
		m++;
	char **env = xcalloc(n + m + 1, sizeof(char *));
	if (m > 0)
		memcpy(env, extra, m * sizeof(char *));
	memcpy(env + m, environ, n * sizeof(char *));
	return env;
}

static void
drain(int fd, struct buf *b, int *open_)
{
	char chunk[8192];
	ssize_t n = read(fd, chunk, sizeof(chunk));
	if (n > 0)
		buf_append(b, chunk, (size_t)n);
	else if (n == 0 || (errno != EINTR && errno != EAGAIN))
		*open_ = 0;
}

static int
decode_status(int st)
{
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	return 128 + WTERMSIG(st);
}

void
t_run(struct t_run *r, int timeout_s, const char *const *env_extra,
      const char *const *argv)
{
	int out[2], err[2];
	struct buf bo = {0}, be = {0};

	if (pipe(out) < 0 || pipe(err) < 0)
		fail_msg("pipe: %s", strerror(errno));
	pid_t pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY);
		dup2(null, 0);
		dup2(out[1], 1);
		dup2(err[1], 2);
		/* Only 1 and 2 may hold the pipes: a daemon the command leaves
		 * behind must not keep them open. */
		close(out[0]);
		close(err[0]);
		close(out[1]);
		close(err[1]);
		environ = make_env(env_extra);
		execvp(argv[0], (char *const *)argv);
		fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(out[1]);
	close(err[1]);
	int oo = 1, eo = 1;
	time_t deadline = time(NULL) + timeout_s;
	while (oo || eo) {
		struct pollfd p[2] = {{oo ? out[0] : -1, POLLIN, 0},
				      {eo ? err[0] : -1, POLLIN, 0}};
		if (time(NULL) > deadline) {
			kill(pid, SIGKILL);
			fail_msg("%s timed out after %d s", argv[0], timeout_s);
		}
		if (poll(p, 2, 200) <= 0)
			continue;
		if (oo && p[0].revents)
			drain(out[0], &bo, &oo);
		if (eo && p[1].revents)
			drain(err[0], &be, &eo);
	}
	close(out[0]);
	close(err[0]);
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	r->status = decode_status(st);
	r->out = bo.data ? bo.data : xstrdup("");
	r->err = be.data ? be.data : xstrdup("");
}

void
t_run_free(struct t_run *r)
{
	free(r->out);
	free(r->err);
	r->out = r->err = NULL;
}

/* Every process group t_spawn() started, killed at exit, so that a failed
 * test leaves no daemon behind. */
static pid_t spawned[256];
static int nspawned;

static void
kill_spawned(void)
{
	for (int i = 0; i < nspawned; i++)
		kill(-spawned[i], SIGKILL);
}

pid_t
t_spawn(const char *logpath, const char *const *env_extra,
	const char *const *argv)
{
	return t_spawn_as(0, 0, logpath, env_extra, argv);
}

pid_t
t_spawn_as(uid_t uid, gid_t gid, const char *logpath,
	   const char *const *env_extra, const char *const *argv)
{
	if (nspawned == 0)
		atexit(kill_spawned);
	pid_t pid = fork();
	if (pid < 0)
		fail_msg("fork: %s", strerror(errno));
	if (pid == 0) {
		setpgid(0, 0);
		int null = open("/dev/null", O_RDONLY);
		int log = open(logpath, O_WRONLY | O_CREAT | O_APPEND, 0644);
		dup2(null, 0);
		dup2(log, 1);
		dup2(log, 2);
		environ = make_env(env_extra);
		if (uid != 0 && (setgroups(0, NULL) < 0 || setgid(gid) < 0 ||
				 setuid(uid) < 0))
			_exit(126);
		execvp(argv[0], (char *const *)argv);
		fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	if (nspawned < 256)
		spawned[nspawned++] = pid;
	return pid;
}

int
t_wait(pid_t pid, int timeout_s)
{
	int st;
	for (int i = 0; i < timeout_s * 20; i++) {
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			return decode_status(st);
		if (r < 0 && errno != EINTR)
			return -1;
		t_sleep_ms(50);
	}
	return -1;
}

int
t_poll(PGconn *conn, int timeout_s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *sql = vformat(fmt, ap);
	va_end(ap);
	for (int i = 0; i < timeout_s * 20; i++) {
		char *v = t_value(conn, "%s", sql);
		int ok = v && strcmp(v, "t") == 0;
		free(v);
		if (ok) {
			free(sql);
			return 0;
		}
		t_sleep_ms(50);
	}
	free(sql);
	return -1;
}

void
t_write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (!f)
		fail_msg("cannot write %s: %s", path, strerror(errno));
	fputs(text, f);
	fclose(f);
}

/* The bytes of the file at path into *b; 0, or -1 if it cannot be read. */
static int
read_into(const char *path, struct buf *b)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	char chunk[8192];
	size_t n;
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		buf_append(b, chunk, n);
	fclose(f);
	return 0;
}

char *
t_read_file(const char *path)
{
	struct buf b = {0};
	if (read_into(path, &b) < 0)
		return NULL;
	return b.data ? b.data : xstrdup("");
}

const char *
t_tmpdir(void)
{
	static char dir[4096];
	if (dir[0])
		return dir;
	const char *base = getenv("PGJOBD_TEST_BIN");
	snprintf(dir, sizeof(dir), "%s/tmp/t%d", base ? base : "/tmp",
		 (int)getpid());
	char cmd[4200];
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", dir);
	if (system(cmd) != 0)
		fail_msg("cannot create %s", dir);
	return dir;
}

void
t_sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/*
 * t_tmpdir()/NAME.EXT, the same string for a name for the whole process:
 * callers keep the path without a copy.  Kept in a static table, so it is
 * reachable (not a leak) at exit.
 */
static const char *
scratch_path(const char *name, const char *ext)
{
	static struct {
		char *rel, *path;
	} seen[256];
	static int n;
	char *rel = xasprintf("%s.%s", name, ext);
	for (int i = 0; i < n; i++)
		if (strcmp(seen[i].rel, rel) == 0) {
			free(rel);
			return seen[i].path;
		}
	if (n == 256)
		fail_msg("more than 256 scratch files: %s", rel);
	seen[n].rel = rel;
	seen[n].path = xasprintf("%s/%s", t_tmpdir(), rel);
	return seen[n++].path;
}

const char *
t_config(const char *name, const char *conninfo, const char *body)
{
	const char *p = scratch_path(name, "yaml");
	char *text =
		xasprintf("database:\n  conninfo: \"%s\"\n%s", conninfo, body);
	t_write_file(p, text);
	free(text);
	return p;
}

const char *
t_log(const char *logname)
{
	return scratch_path(logname, "log");
}

pid_t
t_daemon(const char *cfg, int workers, const char *logname)
{
	char w[16];
	snprintf(w, sizeof(w), "%d", workers);
	const char *argv[] = {t_bin("pgjobd"), "-c", cfg, "-w", w, NULL};
	if (workers <= 0)
		argv[3] = NULL;
	return t_spawn(t_log(logname), NULL, argv);
}

int
t_stop(pid_t pid, int sig, int timeout_s)
{
	kill(pid, sig);
	return t_wait(pid, timeout_s);
}

int
t_alive(pid_t pid)
{
	char path[64], *stat;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	stat = t_read_file(path);
	if (!stat)
		return 0;
	/* The state follows the ")" that closes the command name. */
	char *p = strrchr(stat, ')');
	int alive = p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
	free(stat);
	return alive;
}

int
t_count_in_file(const char *path, const char *needle)
{
	char *text = t_read_file(path);
	int n = 0;
	for (char *p = text; p && (p = strstr(p, needle)) != NULL; p++)
		n++;
	free(text);
	return n;
}

int
t_httpd_start(int *in_fd, pid_t *pid)
{
	int in[2], out[2];
	char line[32] = "";
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0)
		fail_msg("pipe: %s", strerror(errno));
	*pid = fork();
	if (*pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		execl(t_bin("pgjobd_test_httpd"), "httpd", (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	ssize_t n = read(out[0], line, sizeof(line) - 1);
	close(out[0]);
	if (n <= 0 || atoi(line) <= 0)
		fail_msg("the test HTTP server did not print its port");
	*in_fd = in[1];
	return atoi(line);
}

void
t_httpd_stop(int in_fd, pid_t pid)
{
	close(in_fd);
	t_wait(pid, 10);
}

int
t_free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t len = sizeof(a);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) < 0)
		fail_msg("no free port: %s", strerror(errno));
	close(fd);
	return ntohs(a.sin_port);
}

char *
t_http_get(int port, const char *path)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return NULL;
	}
	char req[256];
	int n = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\n\r\n", path);
	if (write(fd, req, (size_t)n) != n)
		fail_msg("GET %s from port %d: %s", path, port,
			 strerror(errno));
	struct buf b = {0};
	char chunk[4096];
	ssize_t r;
	while ((r = read(fd, chunk, sizeof(chunk))) > 0)
		buf_append(&b, chunk, (size_t)r);
	close(fd);
	return b.data ? b.data : xstrdup("");
}

long long
t_claims(int port)
{
	char *r = t_http_get(port, "/metrics");
	if (!r)
		fail_msg("nothing answers /metrics on port %d", port);
	const char *p = strstr(r, "\npgjobd_claim_seconds_count ");
	if (!p)
		fail_msg("no pgjobd_claim_seconds_count in /metrics:\n%s", r);
	long long n = atoll(p + strlen("\npgjobd_claim_seconds_count "));
	free(r);
	return n;
}

/*
 * Counted as each answer comes (src/worker/claim.c), before its jobs
 * start.  When the count is read, each worker may have one turn on its
 * way, sent before (inflight claims at most); a turn sent later may have
 * been answered in part.  So once the count has grown by twice inflight
 * and one, some worker has answered a whole turn sent after the read.
 * NOTIFY pgjob_limits makes every worker claim every queue at once
 * (docs/queues.md), and is sent again until it has: the workers of a
 * long poll_interval, or of a queue that waits for a NOTIFY, claim
 * nothing by themselves.
 */
void
t_wait_claims_after(PGconn *conn, int port, int inflight)
{
	long long want = t_claims(port) + 2 * inflight + 1, now = 0;
	for (int i = 0; i < 300; i++) {
		now = t_claims(port);
		if (now >= want)
			return;
		t_exec(conn, "select pg_notify('pgjob_limits', '')");
		t_sleep_ms(100);
	}
	fail_msg("the claims counted reached %lld, not %lld, in 30 s", now,
		 want);
}

/* --- running pgjob ---------------------------------------------------- */

void
t_pgjobv(struct t_run *r, const char *conninfo, const char *const *args)
{
	const char *argv[40] = {t_bin("pgjob"), "--database", conninfo};
	int n = 3;
	while (*args && n < 39)
		argv[n++] = *args++;
	argv[n] = NULL;
	t_run(r, 60, NULL, argv);
}

void
t_pgjob(struct t_run *r, const char *conninfo, ...)
{
	const char *args[36];
	int n = 0;
	va_list ap;
	va_start(ap, conninfo);
	while (n < 35 && (args[n] = va_arg(ap, const char *)) != NULL)
		n++;
	va_end(ap);
	args[n] = NULL;
	t_pgjobv(r, conninfo, args);
}

/* --- assertions that report the caller's line ------------------------ */

/* Prints the message and fails the test at file:line. */
static void fail_at(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4), noreturn));

static void
fail_at(const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *msg = vformat(fmt, ap);
	va_end(ap);
	print_error("%s:%d: %s\n", file, line, msg);
	free(msg);
	_fail(file, line);
	abort(); /* _fail() does not return */
}

void
t_assert_value_at(const char *file, int line, PGconn *conn, const char *want,
		  const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *sql = vformat(fmt, ap);
	va_end(ap);
	char *v = t_value(conn, "%s", sql);
	if (v && strcmp(v, want) == 0) {
		free(v);
		free(sql);
		return;
	}
	fail_at(file, line, "%s\n  gave %s%s%s, not \"%s\"", sql, v ? "\"" : "",
		v ? v : "null", v ? "\"" : "", want);
}

void
t_wait_until_at(const char *file, int line, PGconn *conn, int timeout_s,
		const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *sql = vformat(fmt, ap);
	va_end(ap);
	if (t_poll(conn, timeout_s, "%s", sql) == 0) {
		free(sql);
		return;
	}
	fail_at(file, line, "not true after %d s: %s", timeout_s, sql);
}

char *
t_expect_sqlstate_at(const char *file, int line, PGconn *conn,
		     const char *state, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *sql = vformat(fmt, ap);
	va_end(ap);
	PGresult *res = PQexec(conn, sql);
	ExecStatusType st = PQresultStatus(res);
	if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
		PQclear(res);
		fail_at(file, line,
			"expected SQLSTATE %s, but it succeeded: %s",
			state ? state : "(any)", sql);
	}
	const char *s = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	const char *m = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
	char *msg = xstrdup(m ? m : PQerrorMessage(conn));
	if (state && (!s || strcmp(s, state) != 0)) {
		char *got = xstrdup(s ? s : "none");
		PQclear(res);
		fail_at(file, line, "expected SQLSTATE %s, got %s (%s): %s",
			state, got, msg, sql);
	}
	PQclear(res);
	free(sql);
	return msg;
}

char *
t_job(PGconn *conn, long long id, const char *expr)
{
	return t_value(conn, "select %s from pgjob.all_jobs where id = %lld",
		       expr, id);
}

void
t_assert_job_at(const char *file, int line, PGconn *conn, long long id,
		const char *expr, const char *want)
{
	t_assert_value_at(file, line, conn, want,
			  "select %s from pgjob.all_jobs where id = %lld", expr,
			  id);
}

void
t_assert_job_has_at(const char *file, int line, PGconn *conn, long long id,
		    const char *expr, ...)
{
	char *v = t_job(conn, id, expr);
	va_list ap;
	va_start(ap, expr);
	for (const char *needle; (needle = va_arg(ap, const char *));) {
		if (v && strstr(v, needle))
			continue;
		va_end(ap);
		fail_at(file, line, "%s of job %lld is %s%s%s, without \"%s\"",
			expr, id, v ? "\"" : "", v ? v : "null", v ? "\"" : "",
			needle);
	}
	va_end(ap);
	free(v);
}

void
t_wait_state_at(const char *file, int line, PGconn *conn, long long id,
		const char *state, int timeout_s)
{
	if (t_poll(conn, timeout_s,
		   "select state = '%s' from pgjob.all_jobs where id = %lld",
		   state, id) == 0)
		return;
	char *now = t_job(conn, id,
			  "state || ', attempt ' || attempts || ', last "
			  "error: ' || coalesce(last_error, '-')");
	fail_at(file, line, "job %lld is not %s after %d s: %s", id, state,
		timeout_s, now ? now : "no such job");
}

pid_t
t_holder_pid(PGconn *conn, long long id)
{
	return (pid_t)t_long(conn,
			     "select w.pid from pgjob.all_jobs j join "
			     "pgjob.workers w on j.locked_by = w.host || "
			     "':' || w.slot where j.id = %lld",
			     id);
}

pid_t
t_worker_pid(PGconn *conn, pid_t sup)
{
	t_wait_until(conn, 30,
		     "select count(*) = 1 from pgjob.workers where "
		     "supervisor_pid = %d",
		     (int)sup);
	return (pid_t)t_long(conn,
			     "select pid from pgjob.workers where "
			     "supervisor_pid = %d",
			     (int)sup);
}

/*
 * The listener notifies itself, on a channel of its own: notifications are
 * delivered in the order of their commits, so once its own has come, every
 * one committed before the call has come too.
 */
int
t_notifications(PGconn *listener)
{
	int n = 0, seen = 0;
	t_exec(listener, "listen t_notifications");
	t_exec(listener, "notify t_notifications");
	for (int i = 0; i < 300 && !seen; i++) {
		PGnotify *note;
		PQconsumeInput(listener);
		while ((note = PQnotifies(listener)) != NULL) {
			seen |= strcmp(note->relname, "t_notifications") == 0;
			n += strcmp(note->relname, "pgjob") == 0;
			PQfreemem(note);
		}
		if (!seen) {
			struct pollfd pfd = {.fd = PQsocket(listener),
					     .events = POLLIN};
			poll(&pfd, 1, 100);
		}
	}
	if (!seen)
		fail_msg("the listener's own notification never came back");
	return n;
}

/* --- processes and daemons ------------------------------------------- */

void
t_wait_gone_at(const char *file, int line, pid_t pid, int timeout_s)
{
	for (int i = 0; i < timeout_s * 20 && t_alive(pid); i++)
		t_sleep_ms(50);
	if (!t_alive(pid))
		return;
	kill(pid, SIGKILL);
	fail_at(file, line, "pid %d still runs after %d s", (int)pid,
		timeout_s);
}

pid_t
t_pid_in_file(const char *path, int timeout_s)
{
	for (int i = 0; i < timeout_s * 20; i++) {
		char *s = t_read_file(path);
		int pid = s ? atoi(s) : 0;
		free(s);
		if (pid > 0)
			return pid;
		t_sleep_ms(50);
	}
	fail_msg("no pid in %s after %d s", path, timeout_s);
	return 0;
}

void
t_wait_file(const char *path, int timeout_s)
{
	for (int i = 0; i < timeout_s * 100; i++) {
		if (access(path, F_OK) == 0)
			return;
		t_sleep_ms(10);
	}
	fail_msg("%s did not appear within %d s", path, timeout_s);
}

long
t_proc_kb(pid_t pid, const char *field)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	char *text = t_read_file(path);
	if (!text)
		return -1;
	long kb = -1;
	size_t n = strlen(field);
	for (char *l = text; l && *l;
	     l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (strncmp(l, field, n) == 0 && l[n] == ':')
			kb = strtol(l + n + 1, NULL, 10);
	free(text);
	return kb;
}

char *
t_cmdline(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	struct buf b = {0};
	if (read_into(path, &b) < 0)
		return NULL;
	if (!b.data)
		return xstrdup("");
	for (size_t i = 0; i < b.len; i++)
		if (b.data[i] == '\0')
			b.data[i] = ' ';
	return b.data;
}

pid_t
t_start(const char *name, const char *conninfo, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *body = vformat(fmt, ap);
	va_end(ap);
	const char *cfg = t_config(name, conninfo, body);
	free(body);
	return t_daemon(cfg, 0, name);
}

void
t_daemons(const char *cfg, int n, const char *prefix, pid_t *pids)
{
	for (int i = 0; i < n; i++) {
		char *name = xasprintf("%s%d", prefix, i);
		pids[i] = t_daemon(cfg, 0, name);
		free(name);
	}
}

int
t_log_count(const char *logname, const char *needle)
{
	return t_count_in_file(t_log(logname), needle);
}

int
t_wait_log_at(const char *file, int line, const char *logname,
	      const char *needle, int min, int timeout_s)
{
	int n = 0;
	for (int i = 0; i < timeout_s * 20; i++) {
		n = t_log_count(logname, needle);
		if (n >= min)
			return n;
		t_sleep_ms(50);
	}
	fail_at(file, line, "%s holds \"%s\" %d times after %d s, not %d",
		t_log(logname), needle, n, timeout_s, min);
}

void
t_stop_clean_at(const char *file, int line, pid_t pid)
{
	int st = t_stop(pid, SIGTERM, 30);
	if (st < 0)
		fail_at(file, line, "pid %d still runs 30 s after SIGTERM",
			(int)pid);
	if (st != 0)
		fail_at(file, line, "pid %d: exit %d after SIGTERM, not 0",
			(int)pid, st);
}

/* --- the console's API ------------------------------------------------ */

/* A query string split at each & ("k=v\0k=v"): each value stays put for
 * the request, as web.c's do. */
struct t_query {
	char *text;
	size_t len;
};

static const char *
t_query_get(void *ctx, const char *key)
{
	struct t_query *q = ctx;
	size_t n = strlen(key);
	for (char *p = q->text; p && p < q->text + q->len; p += strlen(p) + 1)
		if (strncmp(p, key, n) == 0 && p[n] == '=')
			return p + n + 1;
	return NULL;
}

struct db_conn *
t_web_db(const char *conninfo)
{
	char *err = NULL;
	struct db_conn *db = db_connect(conninfo, "pgjob web", &err);
	if (!db)
		fail_msg("db_connect: %s", err);
	if (web_api_session(db, &err) < 0)
		fail_msg("web_api_session: %s", err);
	return db;
}

void
t_web_call(struct db_conn *db, const char *path, const char *query,
	   struct web_response *out)
{
	struct t_query q = {query ? xstrdup(query) : NULL,
			    query ? strlen(query) : 0};
	for (size_t i = 0; i < q.len; i++)
		if (q.text[i] == '&')
			q.text[i] = '\0';
	struct web_query wq = {t_query_get, &q};
	*out = (struct web_response){0};
	assert_int_equal(web_api_get(db, path, &wq, out), 0);
	free(q.text);
}

struct cJSON *
t_web_get(struct db_conn *db, const char *path, const char *query, int status)
{
	struct web_response out;
	t_web_call(db, path, query, &out);
	if (out.status != status)
		fail_msg("GET %s?%s: %d %s", path, query ? query : "",
			 out.status, out.body);
	assert_string_equal(out.content_type, "application/json");
	cJSON *j = cJSON_Parse(out.body);
	assert_non_null(j);
	free(out.body);
	return j;
}
