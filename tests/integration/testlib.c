/*
 * testlib: database, process and file helpers for integration tests.
 */
#include "testlib.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"

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

char *
t_db_migrated(const char *name)
{
	struct t_run r;
	char *ci = xstrdup(t_db_create(name));
	const char *argv[] = {t_bin("pgjob"), "--database", ci, "migrate",
			      NULL};
	t_run(&r, 60, NULL, argv);
	if (r.status != 0)
		fail_msg("pgjob migrate failed: %s", r.err);
	t_run_free(&r);
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

char *
t_read_file(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	struct buf b = {0};
	char chunk[8192];
	size_t n;
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		buf_append(&b, chunk, n);
	fclose(f);
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

const char *
t_config(const char *name, const char *conninfo, const char *body)
{
	static char path[4][4096];
	static int next;
	char *p = path[next++ % 4];
	snprintf(p, 4096, "%s/%s.yaml", t_tmpdir(), name);
	char *text =
		xasprintf("database:\n  conninfo: \"%s\"\n%s", conninfo, body);
	t_write_file(p, text);
	free(text);
	return p;
}

const char *
t_log(const char *logname)
{
	static char path[4][4096];
	static int next;
	char *p = path[next++ % 4];
	snprintf(p, 4096, "%s/%s.log", t_tmpdir(), logname);
	return p;
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
