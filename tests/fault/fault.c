/*
 * The fault suite (docs/faults.md): real pgjobd instances work through a
 * mixed workload against a PostgreSQL of their own while faults are
 * injected, then the invariants are checked and one figures line is
 * printed.
 *
 *   fault_suite SCENARIO     kill9 | sigstop | pgrestart | failover |
 *                            freeze | clock
 *
 * Short form by default (CI); PGJOBD_FAULT_LONG=1 for the long form.
 * PGJOBD_FAULT_SEED=N repeats a run's random choices; PGJOBD_FAULT_JOBS=N
 * overrides the job count.  See docs/faults.md.
 *
 * The workload: jobs of kind sqlj (an sql handler whose statement inserts a
 * ledger row in the transaction that ends the job), execj (a /bin/sh handler
 * that appends "job token start_ns end_ns worker_pid" to a ledger file) and
 * a few execslow (the same, longer than the lease).
 */
#include "testlib.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_INST   4
#define MAX_FAULTS 4096
#define MAX_PIDS   8192
#define MAX_FAILS  64

static const char *scenario;

/* ------------------------------------------------------------------ */
/* Small helpers                                                       */

static int64_t
now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static unsigned long long rng_state;

static unsigned
rnd(void)
{
	/* xorshift64*: the seed is printed, so a run can be repeated. */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return (unsigned)((rng_state * 2685821657736338717ULL) >> 33);
}

static int
urange(int lo, int hi)
{
	return lo + (int)(rnd() % (unsigned)(hi - lo + 1));
}

static char *fails[MAX_FAILS];
static int nfails;

/* Records a broken invariant; all of them are printed at the end. */
static void failure(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void
failure(const char *fmt, ...)
{
	va_list ap;
	char *s;
	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		abort();
	va_end(ap);
	fprintf(stderr, "FAULT INVARIANT: %s\n", s);
	if (nfails < MAX_FAILS)
		fails[nfails++] = s;
	else
		free(s);
}

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void
note(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "[%s] ", scenario);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static char *
read_trim(const char *path)
{
	char *s = t_read_file(path);
	if (s)
		s[strcspn(s, "\n")] = '\0';
	return s;
}

/* ------------------------------------------------------------------ */
/* State of one run                                                    */

struct inst {
	char name[16];
	char cfg[4096];
	char log[4096];
	pid_t sup;
	const char *const *env; /* extra environment (faketime) */
	int restarts;
};

enum fault_kind { FK_JOBS, FK_CONN };

struct fault {
	enum fault_kind kind;
	char what[64];
	int64_t at;
	int64_t recovered; /* ms after at, or -1 */
	long long done_at;
	int n;
	long long ids[64], tokens[64];
};

static struct {
	int long_form;
	int njobs, ninst, nworkers, concurrency, lease_s;
	char dir[4096];	 /* this scenario's scratch folder */
	char cdir[4096]; /* the cluster's folder (cluster.sh) */
	char ledger[4096];
	char server_ci[2048]; /* maintenance database */
	char db_ci[2048];     /* the workload's database, as the daemon's */
	char mon_ci[2048];    /* the test's own connection */
	PGconn *mon;
	struct inst inst[MAX_INST];
	struct fault faults[MAX_FAULTS];
	int nfaults;
	pid_t faulted[MAX_PIDS]; /* workers killed, stopped, or orphaned */
	int nfaulted;
	pid_t watch[MAX_PIDS]; /* handlers of killed workers, to re-check */
	int64_t watch_at[MAX_PIDS];
	int nwatch;
	int orphaned_handlers;
	long long done;
	int64_t begin;	 /* the scenario's start, cluster included */
	int64_t t0;	 /* the instances' start */
	char extra[512]; /* scenario figures for the figures line */
} S;

static void
add_faulted(pid_t p)
{
	if (S.nfaulted < MAX_PIDS)
		S.faulted[S.nfaulted++] = p;
}

static int
is_faulted(pid_t p)
{
	for (int i = 0; i < S.nfaulted; i++)
		if (S.faulted[i] == p)
			return 1;
	return 0;
}

static void extra(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void
extra(const char *fmt, ...)
{
	va_list ap;
	size_t n = strlen(S.extra);
	va_start(ap, fmt);
	vsnprintf(S.extra + n, sizeof(S.extra) - n, fmt, ap);
	va_end(ap);
}

/* ------------------------------------------------------------------ */
/* The test's own connection: it outlives restarts and failovers      */

static PGconn *
mon(void)
{
	if (S.mon && PQstatus(S.mon) == CONNECTION_OK)
		return S.mon;
	PQfinish(S.mon);
	S.mon = PQconnectdb(S.mon_ci);
	if (PQstatus(S.mon) != CONNECTION_OK) {
		PQfinish(S.mon);
		S.mon = NULL;
		return NULL;
	}
	PQclear(PQexec(S.mon, "set client_min_messages = warning"));
	return S.mon;
}

/* Runs sql; NULL on any error (the connection is then re-made later). */
static PGresult *mq(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static PGresult *
mq(const char *fmt, ...)
{
	va_list ap;
	char *sql;
	va_start(ap, fmt);
	if (vasprintf(&sql, fmt, ap) < 0)
		abort();
	va_end(ap);
	PGconn *c = mon();
	PGresult *res = c ? PQexec(c, sql) : NULL;
	free(sql);
	ExecStatusType st = PQresultStatus(res);
	if (res && (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK))
		return res;
	PQclear(res);
	return NULL;
}

/* The first value as a number, or -1 on error or null. */
static long long mlong(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
static long long
mlong(const char *fmt, ...)
{
	va_list ap;
	char *sql;
	va_start(ap, fmt);
	if (vasprintf(&sql, fmt, ap) < 0)
		abort();
	va_end(ap);
	PGresult *res = mq("%s", sql);
	free(sql);
	long long v = -1;
	if (res && PQntuples(res) > 0 && !PQgetisnull(res, 0, 0))
		v = atoll(PQgetvalue(res, 0, 0));
	PQclear(res);
	return v;
}

/* As mlong, retrying for up to timeout_s (the server may be restarting). */
static long long
mlong_retry(int timeout_s, const char *sql)
{
	int64_t end = now_ms() + timeout_s * 1000LL;
	for (;;) {
		long long v = mlong("%s", sql);
		if (v >= 0 || now_ms() > end)
			return v;
		t_sleep_ms(200);
	}
}

/* ------------------------------------------------------------------ */
/* Processes                                                           */

/* The parent pid of pid, or -1. */
static pid_t
ppid_of(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	char *st = t_read_file(path);
	if (!st)
		return -1;
	char *p = strrchr(st, ')');
	int pp = -1;
	char state;
	if (!p || sscanf(p + 1, " %c %d", &state, &pp) != 2 || state == 'Z')
		pp = -1;
	free(st);
	return pp;
}

/* Live children of parent, up to max. */
static int
children_of(pid_t parent, pid_t *out, int max)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int n = 0;
	if (!d)
		return 0;
	while ((e = readdir(d)) != NULL && n < max) {
		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		pid_t p = atoi(e->d_name);
		if (ppid_of(p) == parent)
			out[n++] = p;
	}
	closedir(d);
	return n;
}

/* Pids of processes whose command line mentions needle (not ours). */
static int
procs_naming(const char *needle, pid_t *out, int max)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int n = 0;
	if (!d)
		return 0;
	while ((e = readdir(d)) != NULL && n < max) {
		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		pid_t p = atoi(e->d_name);
		if (p == getpid())
			continue;
		char *cmd = t_cmdline(p);
		if (cmd && strstr(cmd, needle) && t_alive(p))
			out[n++] = p;
		free(cmd);
	}
	closedir(d);
	return n;
}

static void
cluster(const char *cmd, const char *a, const char *b)
{
	struct t_run r;
	const char *argv[] = {
		"bash", t_src("tests/fault/cluster.sh"), cmd, S.cdir, a, b,
		NULL};
	t_run(&r, 240, NULL, argv);
	if (r.status != 0)
		fail_msg("cluster.sh %s failed (%d): %s%s", cmd, r.status,
			 r.out, r.err);
	t_run_free(&r);
}

static void
cluster_cleanup(void)
{
	if (!S.cdir[0])
		return;
	char cmd[8400];
	snprintf(cmd, sizeof(cmd),
		 "bash '%s/tests/fault/cluster.sh' stop '%s' >/dev/null 2>&1",
		 getenv("PGJOBD_SOURCE") ? getenv("PGJOBD_SOURCE") : ".",
		 S.cdir);
	if (system(cmd) != 0)
		fprintf(stderr, "cluster.sh stop failed\n");
}

/* ------------------------------------------------------------------ */
/* The proxy of the freeze scenario: its own process, forwarding one    */
/* port to the server; SIGUSR1 freezes it (nothing read or written,    */
/* nothing closed, no new connection accepted), SIGUSR2 thaws it.      */

static volatile sig_atomic_t px_frozen, px_stop;

static void
px_sig(int sig)
{
	if (sig == SIGUSR1)
		px_frozen = 1;
	else if (sig == SIGUSR2)
		px_frozen = 0;
	else
		px_stop = 1;
}

struct px_pipe {
	int from, to;
	char buf[65536];
	size_t len, off;
};

static void
proxy_loop(int lfd, int server_port)
{
	enum { MAXC = 128 };
	struct px_pipe *p = calloc(2 * MAXC, sizeof(*p));
	int np = 0;
	struct sigaction sa = {0};
	sa.sa_handler = px_sig;
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGUSR2, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	while (!px_stop) {
		if (px_frozen) {
			t_sleep_ms(20);
			continue;
		}
		struct pollfd fds[1 + 4 * MAXC];
		int nf = 0;
		fds[nf++] = (struct pollfd){lfd, POLLIN, 0};
		for (int i = 0; i < np; i++) {
			if (p[i].len == p[i].off)
				fds[nf++] =
					(struct pollfd){p[i].from, POLLIN, 0};
			else
				fds[nf++] =
					(struct pollfd){p[i].to, POLLOUT, 0};
		}
		if (poll(fds, (nfds_t)nf, 50) <= 0)
			continue;
		if (px_frozen)
			continue;
		int polled = np; /* pipes that have an entry in fds */
		if ((fds[0].revents & POLLIN) && np + 2 <= 2 * MAXC) {
			int c = accept(lfd, NULL, NULL);
			if (c >= 0) {
				int s = socket(AF_INET, SOCK_STREAM, 0);
				struct sockaddr_in a = {0};
				a.sin_family = AF_INET;
				a.sin_port = htons((uint16_t)server_port);
				a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
				if (connect(s, (struct sockaddr *)&a,
					    sizeof(a)) < 0) {
					close(c);
					close(s);
				} else {
					p[np++] = (struct px_pipe){
						c, s, {0}, 0, 0};
					p[np++] = (struct px_pipe){
						s, c, {0}, 0, 0};
				}
			}
		}
		int dead = -1;
		for (int i = 0, k = 1; i < polled; i++, k++) {
			if (!fds[k].revents)
				continue;
			struct px_pipe *q = &p[i];
			if (q->len == q->off) {
				ssize_t r =
					read(q->from, q->buf, sizeof(q->buf));
				if (r <= 0 && !(r < 0 && errno == EINTR)) {
					dead = i;
					break;
				}
				if (r > 0) {
					q->len = (size_t)r;
					q->off = 0;
				}
			} else {
				ssize_t w = write(q->to, q->buf + q->off,
						  q->len - q->off);
				if (w < 0 && errno != EINTR) {
					dead = i;
					break;
				}
				if (w > 0)
					q->off += (size_t)w;
				if (q->off == q->len)
					q->len = q->off = 0;
			}
		}
		if (dead >= 0) {
			/* Pipes come in pairs: 2k and 2k+1. */
			int a = dead & ~1;
			close(p[a].from);
			close(p[a].to);
			memmove(&p[a], &p[a + 2],
				(size_t)(np - a - 2) * sizeof(*p));
			np -= 2;
		}
	}
	_exit(0);
}

static pid_t proxy_pid;
static int proxy_port;

static void
proxy_start(int server_port)
{
	int lfd = socket(AF_INET, SOCK_STREAM, 0);
	int one = 1;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in a = {0};
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t al = sizeof(a);
	if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(lfd, 64) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&a, &al) < 0)
		fail_msg("proxy: %s", strerror(errno));
	proxy_port = ntohs(a.sin_port);
	proxy_pid = fork();
	if (proxy_pid < 0)
		fail_msg("fork: %s", strerror(errno));
	if (proxy_pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		proxy_loop(lfd, server_port);
	}
	close(lfd);
}

static void
proxy_stop(void)
{
	if (proxy_pid > 0) {
		kill(proxy_pid, SIGCONT);
		kill(proxy_pid, SIGTERM);
		if (t_wait(proxy_pid, 10) < 0) {
			kill(proxy_pid, SIGKILL);
			t_wait(proxy_pid, 10);
		}
		proxy_pid = 0;
	}
}

/* ------------------------------------------------------------------ */
/* Setup                                                               */

/* cluster.sh single|pair, the database "fault" with the schema, the
 * ledger table and the jobs. */
static void
setup_db(const char *mode, const char *pgopts)
{
	snprintf(S.cdir, sizeof(S.cdir), "%s/pg", S.dir);
	atexit(cluster_cleanup);
	cluster(mode, pgopts, NULL);
	char path[4200];
	snprintf(path, sizeof(path), "%s/conninfo", S.cdir);
	char *ci = read_trim(path);
	snprintf(S.server_ci, sizeof(S.server_ci), "%s", ci);
	snprintf(S.db_ci, sizeof(S.db_ci), "%s dbname=fault", ci);
	snprintf(S.mon_ci, sizeof(S.mon_ci), "%s dbname=fault", ci);
	free(ci);
	PGconn *c = t_connect(S.server_ci);
	t_exec(c, "create database fault");
	PQfinish(c);
	t_migrate(S.db_ci);
	c = t_connect(S.db_ci);
	/* No unique key: a second run would be counted, not hidden. */
	t_exec(c, "create table ledger_sql (job_id bigint not null, token "
		  "bigint not null, at timestamptz not null default "
		  "clock_timestamp())");
	/* 1 in 100 exec jobs is slow (longer than the lease), the rest are
	 * half sql, half exec, interleaved. */
	t_exec(c,
	       "insert into pgjob.jobs (kind, payload) select case when i %% "
	       "100 = 7 then 'execslow' when i %% 2 = 0 then 'sqlj' else "
	       "'execj' end, jsonb_build_object('i', i) from "
	       "generate_series(1, %d) i",
	       S.njobs);
	PQfinish(c);
}

static const char *
port_of(const char *node)
{
	static char port[32];
	char path[4200];
	snprintf(path, sizeof(path), "%s/%s.port", S.cdir, node);
	char *p = read_trim(path);
	snprintf(port, sizeof(port), "%s", p ? p : "");
	free(p);
	return port;
}

/* Writes instance i's config with conninfo ci. */
static void
inst_config(int i, const char *ci)
{
	struct inst *in = &S.inst[i];
	snprintf(in->name, sizeof(in->name), "i%d", i);
	snprintf(in->cfg, sizeof(in->cfg), "%s/i%d.yaml", S.dir, i);
	snprintf(in->log, sizeof(in->log), "%s/i%d.log", S.dir, i);
	const char *sh = t_src("tests/fault/ledger.sh");
	char *text = NULL;
	if (asprintf(&text,
		     "database:\n  conninfo: \"%s\"\n"
		     "workers: %d\n"
		     "lease: %ds\n"
		     "poll_interval: 250ms\n"
		     "shutdown_timeout: 10s\n"
		     "log: { level: info }\n"
		     "defaults: { timeout: 60s, max_attempts: 1000, backoff: "
		     "{ base: 100ms, max: 1s } }\n"
		     "queues: { default: { concurrency: %d } }\n"
		     "handlers:\n"
		     "  sqlj: { type: sql, statement: \"insert into ledger_sql"
		     " (job_id, token) select $2, j.lease_token from "
		     "pgjob.all_jobs j, pg_sleep(0.1) where j.id = $2 and $1 "
		     "is not "
		     "null\" }\n"
		     "  execj: { type: exec, command: [\"/bin/sh\", \"%s\", "
		     "\"%s\", \"0.2\"] }\n"
		     "  execslow: { type: exec, command: [\"/bin/sh\", \"%s\", "
		     "\"%s\", \"%d\"] }\n",
		     ci, S.nworkers, S.lease_s, S.concurrency, sh, S.ledger, sh,
		     S.ledger, S.lease_s + 1) < 0)
		abort();
	t_write_file(in->cfg, text);
	free(text);
}

static void
inst_start(int i)
{
	struct inst *in = &S.inst[i];
	const char *argv[] = {t_bin("pgjobd"), "-c", in->cfg, NULL};
	in->sup = t_spawn(in->log, in->env, argv);
}

static int
workers_of(int i, pid_t *out, int max)
{
	if (S.inst[i].sup <= 0)
		return 0;
	return children_of(S.inst[i].sup, out, max);
}

/* Running jobs held by the worker pid (or, with sup, by the instance). */
static void
held_jobs(struct fault *f, const char *who, pid_t pid)
{
	PGresult *res =
		mq("select j.id, j.lease_token from pgjob.all_jobs j join "
		   "pgjob.workers w on j.locked_by = w.host || ':' || "
		   "w.slot where j.state = 'running' and w.%s = %d "
		   "limit 64",
		   who, (int)pid);
	f->n = 0;
	for (int r = 0; res && r < PQntuples(res) && r < 64; r++) {
		f->ids[f->n] = atoll(PQgetvalue(res, r, 0));
		f->tokens[f->n++] = atoll(PQgetvalue(res, r, 1));
	}
	PQclear(res);
}

static struct fault *
new_fault(enum fault_kind kind)
{
	if (S.nfaults >= MAX_FAULTS)
		fail_msg("too many faults");
	struct fault *f = &S.faults[S.nfaults++];
	memset(f, 0, sizeof(*f));
	f->kind = kind;
	f->at = now_ms();
	f->recovered = -1;
	f->done_at = S.done;
	return f;
}

/* A fault is over when no job is still held under the claim the victim
 * had: each is done, given back (available) or claimed again (its token
 * moved on).  A job given back waits its turn in the queue like any
 * other, which is not counted.  For a connection fault: when every worker
 * is connected again and a job has ended since. */
static void
check_recoveries(void)
{
	for (int i = 0; i < S.nfaults; i++) {
		struct fault *f = &S.faults[i];
		if (f->recovered >= 0)
			continue;
		int64_t t = now_ms();
		if (f->kind == FK_JOBS) {
			if (f->n == 0) {
				f->recovered = 0;
				continue;
			}
			char list[64 * 48] = "";
			size_t len = 0;
			for (int k = 0; k < f->n; k++)
				len += (size_t)snprintf(
					list + len, sizeof(list) - len,
					"%s(%lld,%lld)", k ? "," : "",
					f->ids[k], f->tokens[k]);
			long long left = mlong(
				"select count(*) from (values %s) v(id, tok) "
				"join pgjob.all_jobs j on j.id = v.id where "
				"j.state = 'running' and j.lease_token = v.tok",
				list);
			if (left == 0)
				f->recovered = t - f->at;
			if (f->recovered > 4000LL * S.lease_s)
				note("slow recovery: %s took %lld ms (jobs %s)",
				     f->what, (long long)f->recovered, list);
		} else {
			long long conn = mlong(
				"select count(*) from pg_stat_activity where "
				"application_name = 'pgjobd' and datname = "
				"current_database()");
			if (conn >= S.ninst * S.nworkers && S.done > f->done_at)
				f->recovered = t - f->at;
		}
	}
}

static void
watch_handlers_of(pid_t worker)
{
	pid_t kids[64];
	int n = children_of(worker, kids, 64);
	for (int i = 0; i < n && S.nwatch < MAX_PIDS; i++) {
		S.watch[S.nwatch] = kids[i];
		S.watch_at[S.nwatch++] = now_ms();
	}
}

/* Handlers still running 1 s after their worker was killed: no one stops
 * them at the lease's deadline any more. */
static void
check_watch(void)
{
	int64_t t = now_ms();
	for (int i = 0; i < S.nwatch;) {
		if (t - S.watch_at[i] < 1000) {
			i++;
			continue;
		}
		if (t_alive(S.watch[i]))
			S.orphaned_handlers++;
		S.watch[i] = S.watch[--S.nwatch];
		S.watch_at[i] = S.watch_at[S.nwatch];
	}
}

/* ------------------------------------------------------------------ */
/* The run: ticks every 100 ms until every job is done                 */

typedef void (*inject_fn)(int64_t t);

static int
fault_window_open(void)
{
	/* Faults stop once most jobs are done, so that the tail of the run
	 * shows recovery; and after a time budget. */
	int64_t budget = S.long_form ? 600000 : 45000;
	return S.done < S.njobs * 85LL / 100 && now_ms() - S.t0 < budget;
}

static void
run(inject_fn inject)
{
	int64_t limit = (S.long_form ? 3600 : 240) * 1000LL;
	int64_t last_report = now_ms();
	for (;;) {
		long long d = mlong("select count(*) from pgjob.all_jobs where "
				    "state = 'done'");
		if (d >= 0)
			S.done = d;
		if (S.done >= S.njobs)
			break;
		if (now_ms() - S.t0 > limit) {
			failure("not every job done after %lld s: %lld of %d",
				(long long)(limit / 1000), S.done, S.njobs);
			break;
		}
		if (inject)
			inject(now_ms());
		check_recoveries();
		check_watch();
		if (now_ms() - last_report > 10000) {
			note("%lld of %d done, %d faults, %.0f s", S.done,
			     S.njobs, S.nfaults, (now_ms() - S.t0) / 1000.0);
			last_report = now_ms();
		}
		t_sleep_ms(100);
	}
	/* Recoveries still open once all is done: give them a moment. */
	for (int i = 0; i < 300; i++) {
		check_recoveries();
		check_watch();
		int open = 0;
		for (int k = 0; k < S.nfaults; k++)
			open += S.faults[k].recovered < 0;
		if (!open && S.nwatch == 0)
			break;
		t_sleep_ms(100);
	}
}

/* ------------------------------------------------------------------ */
/* Invariants                                                          */

struct erun {
	long long id, token, s, e;
	int pid;
};

static int
by_job(const void *a, const void *b)
{
	const struct erun *x = a, *y = b;
	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	if (x->token != y->token)
		return x->token < y->token ? -1 : 1;
	return x->s < y->s ? -1 : x->s > y->s;
}

/* (pid, job) pairs that a worker's log says lost their lease or were cut
 * off; pids that left jobs unwritten. */
struct lostmark {
	int pid;
	long long job;
};
static struct lostmark *lost;
static int nlost, caplost;
static int *worker_pids; /* every pid that logged as a worker */
static int nworker_pids, capworker_pids;
static int lease_lost_lines, conn_lost_lines;

static void
scan_logs(void)
{
	static const char *const job_marks[] = {
		"lease lost", "the lease was lost", "giving up writing its end",
		"lease not renewed by its deadline", NULL};
	nlost = lease_lost_lines = conn_lost_lines = nworker_pids = 0;
	for (int i = 0; i < S.ninst; i++) {
		char *text = t_read_file(S.inst[i].log);
		for (char *line = text; line && *line;) {
			char *nl = strchr(line, '\n');
			if (nl)
				*nl = '\0';
			char *pp = strstr(line, " pid=");
			char *jp = strstr(line, " job=");
			int pid = pp ? atoi(pp + 5) : 0;
			if (pid && strstr(line, " proc=worker ")) {
				if (nworker_pids == capworker_pids) {
					capworker_pids =
						capworker_pids
							? 2 * capworker_pids
							: 256;
					worker_pids =
						realloc(worker_pids,
							(size_t)capworker_pids *
								sizeof(int));
				}
				if (nworker_pids == 0 ||
				    worker_pids[nworker_pids - 1] != pid)
					worker_pids[nworker_pids++] = pid;
			}
			if (strstr(line, "lease lost"))
				lease_lost_lines++;
			if (strstr(line, "database connection lost"))
				conn_lost_lines++;
			if (strstr(line,
				   "jobs unwritten; their leases expire") &&
			    pid)
				add_faulted(pid);
			for (int k = 0; jp && job_marks[k]; k++) {
				if (!strstr(line, job_marks[k]))
					continue;
				if (nlost == caplost) {
					caplost = caplost ? 2 * caplost : 256;
					lost = realloc(lost,
						       (size_t)caplost *
							       sizeof(*lost));
				}
				lost[nlost++] =
					(struct lostmark){pid, atoll(jp + 5)};
				break;
			}
			line = nl ? nl + 1 : NULL;
		}
		free(text);
	}
}

/* The run r of a job ended without the lease: its worker was faulted, or
 * its log says so. */
static int
run_was_lost(const struct erun *r)
{
	/* A handler whose worker died before the shell started sees init
	 * (pid 1) as its parent... */
	if (r->pid == 1 || is_faulted(r->pid))
		return 1;
	/* Or, where orphans go to a subreaper, a parent that never logged
	 * as a worker. */
	int known = 0;
	for (int i = 0; i < nworker_pids && !known; i++)
		known = worker_pids[i] == r->pid;
	if (!known)
		return 1;
	for (int i = 0; i < nlost; i++)
		if (lost[i].pid == r->pid && lost[i].job == r->id)
			return 1;
	return 0;
}

static int duplicate_runs, overlaps, lost_jobs;

static void
check_exec_ledger(void)
{
	long long maxid = mlong_retry(30, "select max(id) from pgjob.all_jobs");
	if (maxid <= 0) {
		failure("cannot read the jobs back");
		return;
	}
	/* final token of each exec job, 0 for others */
	long long *final = calloc((size_t)maxid + 1, sizeof(long long));
	int *lines = calloc((size_t)maxid + 1, sizeof(int));
	PGresult *res =
		mq("select id, lease_token from pgjob.all_jobs where kind "
		   "like 'exec%%'");
	int nexec = res ? PQntuples(res) : 0;
	for (int r = 0; r < nexec; r++) {
		long long id = atoll(PQgetvalue(res, r, 0));
		if (id >= 1 && id <= maxid)
			final[id] = atoll(PQgetvalue(res, r, 1));
	}
	PQclear(res);

	char *text = t_read_file(S.ledger);
	size_t cap = 1024, n = 0;
	struct erun *runs = malloc(cap * sizeof(*runs));
	for (char *line = text; line && *line;) {
		struct erun r;
		if (sscanf(line, "%lld %lld %lld %lld %d", &r.id, &r.token,
			   &r.s, &r.e, &r.pid) == 5) {
			if (n == cap)
				runs = realloc(runs,
					       (cap *= 2) * sizeof(*runs));
			runs[n++] = r;
		} else {
			failure("exec ledger: unreadable line: %.80s", line);
		}
		line = strchr(line, '\n');
		if (line)
			line++;
	}
	free(text);
	qsort(runs, n, sizeof(*runs), by_job);

	int reported = 0;
	for (size_t i = 0; i < n; i++) {
		struct erun *r = &runs[i];
		if (r->id < 1 || r->id > maxid || final[r->id] == 0) {
			failure("exec ledger: job %lld is not an exec job",
				r->id);
			continue;
		}
		lines[r->id]++;
		if (r->token > final[r->id])
			failure("job %lld ran with token %lld, above its final "
				"token %lld",
				r->id, r->token, final[r->id]);
		if (i > 0 && runs[i - 1].id == r->id &&
		    runs[i - 1].token == r->token)
			failure("job %lld ran twice under one claim (token "
				"%lld, workers %d and %d)",
				r->id, r->token, runs[i - 1].pid, r->pid);
		/* An earlier run that completed: allowed only if it lost its
		 * lease (its worker was killed, stopped, cut off). */
		if (r->token < final[r->id] && !run_was_lost(r) &&
		    reported++ < 20)
			failure("job %lld: run with token %lld (worker %d) "
				"completed, yet the job was claimed again "
				"(final token %lld), and nothing shows that "
				"run lost its lease",
				r->id, r->token, r->pid, final[r->id]);
		/* Overlap with any later run of the same job. */
		for (size_t k = i + 1; k < n && runs[k].id == r->id; k++) {
			if (runs[k].token == r->token)
				continue;
			if (r->e > runs[k].s && runs[k].e > r->s) {
				overlaps++;
				if (!run_was_lost(r))
					failure("job %lld: runs with tokens "
						"%lld and %lld overlap by %lld "
						"ms, and the first did not "
						"lose its lease",
						r->id, r->token, runs[k].token,
						(r->e - runs[k].s) / 1000000);
			}
		}
	}
	int missing = 0, nofinal = 0;
	for (long long id = 1; id <= maxid; id++) {
		if (final[id] == 0)
			continue;
		if (lines[id] == 0 && missing++ < 10)
			failure("exec job %lld has no ledger line", id);
		if (lines[id] > 1)
			duplicate_runs += lines[id] - 1;
	}
	/* The run that ended the job wrote the line with the final token. */
	for (size_t i = 0; i < n; i++)
		if (i + 1 == n || runs[i + 1].id != runs[i].id)
			if (runs[i].token != final[runs[i].id] &&
			    nofinal++ < 10)
				failure("job %lld: no ledger line with its "
					"final "
					"token %lld",
					runs[i].id, final[runs[i].id]);
	if (missing > 10)
		failure("%d exec jobs in all have no ledger line", missing);
	free(runs);
	free(final);
	free(lines);
}

static void
check_db(void)
{
	long long total =
		mlong_retry(60, "select count(*) from pgjob.all_jobs");
	long long done = mlong_retry(60, "select count(*) from pgjob.all_jobs "
					 "where state = 'done'");
	if (total != S.njobs)
		failure("%lld jobs in the table, %d enqueued", total, S.njobs);
	lost_jobs = (int)(S.njobs - (done < 0 ? 0 : done));
	if (lost_jobs != 0) {
		PGresult *res =
			mq("select id, kind, state, attempts, lease_token, "
			   "coalesce(last_error, '') from pgjob.all_jobs where "
			   "state <> 'done' order by id limit 10");
		for (int r = 0; res && r < PQntuples(res); r++)
			failure("job %s (%s) ended %s after %s attempts, "
				"token %s: %s",
				PQgetvalue(res, r, 0), PQgetvalue(res, r, 1),
				PQgetvalue(res, r, 2), PQgetvalue(res, r, 3),
				PQgetvalue(res, r, 4), PQgetvalue(res, r, 5));
		PQclear(res);
	}
	long long bad =
		mlong("select count(*) from (select j.id, count(l.job_id) "
		      "c from pgjob.all_jobs j left join ledger_sql l on "
		      "l.job_id = j.id where j.kind = 'sqlj' group by "
		      "j.id) x where c <> 1");
	if (bad != 0)
		failure("sql ledger: %lld sql jobs without exactly one row",
			bad);
	long long stray =
		mlong("select count(*) from ledger_sql l join "
		      "pgjob.all_jobs j on j.id = l.job_id where j.kind "
		      "<> 'sqlj' or l.token <> j.lease_token");
	if (stray != 0)
		failure("sql ledger: %lld rows not written by the job's final "
			"claim",
			stray);
	long long running = mlong("select count(*) from pgjob.all_jobs where "
				  "state = 'running'");
	if (running != 0)
		failure("%lld jobs still running", running);
}

/* Every live instance has all its workers, each with a slot. */
static void
check_slots(void)
{
	int64_t end = now_ms() + 120000;
	for (int i = 0; i < S.ninst; i++) {
		if (S.inst[i].sup <= 0)
			continue;
		long long n = -1;
		for (;;) {
			PGresult *res =
				mq("select pid from pgjob.workers where "
				   "supervisor_pid = %d",
				   (int)S.inst[i].sup);
			n = 0;
			for (int r = 0; res && r < PQntuples(res); r++) {
				pid_t p = atoi(PQgetvalue(res, r, 0));
				if (t_alive(p) && ppid_of(p) == S.inst[i].sup)
					n++;
			}
			if (!res)
				n = -1;
			PQclear(res);
			if (n == S.nworkers || now_ms() > end)
				break;
			t_sleep_ms(250);
		}
		if (n != S.nworkers)
			failure("instance %s (supervisor %d) has %lld of %d "
				"workers with a slot",
				S.inst[i].name, (int)S.inst[i].sup, n,
				S.nworkers);
	}
}

static void
stop_all(void)
{
	for (int i = 0; i < S.ninst; i++) {
		if (S.inst[i].sup <= 0)
			continue;
		int st = t_stop(S.inst[i].sup, SIGTERM, 60);
		if (st != 0)
			failure("instance %s: SIGTERM gave %d (want exit 0 "
				"within 60 s)",
				S.inst[i].name, st);
		if (st < 0) {
			kill(-S.inst[i].sup, SIGKILL);
			t_wait(S.inst[i].sup, 10);
		}
		S.inst[i].sup = 0;
	}
}

/* Nothing that names this scenario's folder survives the run. */
static void
check_orphans(void)
{
	pid_t left[64];
	int n = 0;
	for (int i = 0; i < 150; i++) {
		n = procs_naming(S.dir, left, 64);
		if (n == 0)
			break;
		t_sleep_ms(100);
	}
	for (int i = 0; i < n; i++) {
		char *c = t_cmdline(left[i]);
		failure("orphan process %d left after the run: %.120s",
			(int)left[i], c ? c : "?");
		free(c);
		kill(left[i], SIGKILL);
	}
}

/* The checks every scenario shares, then post (may be NULL), then the
 * figures line. */
static void
finish(void (*post)(void))
{
	check_slots();
	stop_all();
	proxy_stop();
	check_orphans();
	check_db();
	scan_logs();
	check_exec_ledger();
	if (post)
		post();
	int64_t maxrec = 0;
	int open = 0;
	for (int i = 0; i < S.nfaults; i++) {
		if (S.faults[i].recovered < 0)
			open++;
		else if (S.faults[i].recovered > maxrec)
			maxrec = S.faults[i].recovered;
	}
	if (open)
		extra(" unrecovered=%d", open);
	double wall = (now_ms() - S.begin) / 1000.0;
	char line[1024];
	snprintf(line, sizeof(line),
		 "scenario=%s jobs=%d faults=%d lost=%d duplicate_runs=%d "
		 "max_recovery_ms=%lld wall_s=%.1f overlaps=%d "
		 "lease_lost_logged=%d orphaned_handlers=%d%s",
		 scenario, S.njobs, S.nfaults, lost_jobs, duplicate_runs,
		 (long long)maxrec, wall, overlaps, lease_lost_lines,
		 S.orphaned_handlers, S.extra);
	printf("%s\n", line);
	fflush(stdout);
	const char *fig = getenv("PGJOBD_FAULT_FIGURES");
	if (fig && *fig) {
		FILE *f = fopen(fig, "a");
		if (f) {
			fprintf(f, "%s\n", line);
			fclose(f);
		}
	}
	PQfinish(S.mon);
	S.mon = NULL;
	if (nfails > 0) {
		for (int i = 0; i < nfails; i++)
			fprintf(stderr, "  - %s\n", fails[i]);
		fail_msg("%d invariant(s) broken in scenario %s (logs in %s)",
			 nfails, scenario, S.dir);
	}
}

/* ------------------------------------------------------------------ */
/* Scenarios                                                           */

/* Jobs of a scenario's short form: the scenarios whose fault comes at a
 * share of the run (failover, clock) prove the same with fewer. */
static int short_jobs = 2000;

static void
init(int ninst, int nworkers)
{
	S.njobs = S.long_form ? 20000 : short_jobs;
	const char *nj = getenv("PGJOBD_FAULT_JOBS");
	if (nj && atoi(nj) > 0)
		S.njobs = atoi(nj);
	S.begin = now_ms();
	S.ninst = ninst;
	S.nworkers = nworkers;
	S.concurrency = 4;
	S.lease_s = 3;
	const char *seed = getenv("PGJOBD_FAULT_SEED");
	rng_state = seed && *seed
			    ? strtoull(seed, NULL, 10)
			    : (unsigned long long)time(NULL) ^
				      ((unsigned long long)getpid() << 16);
	if (rng_state == 0)
		rng_state = 1;
	snprintf(S.dir, sizeof(S.dir), "%s/fault-%s", t_tmpdir(), scenario);
	mkdir(S.dir, 0755);
	snprintf(S.ledger, sizeof(S.ledger), "%s/exec.ledger", S.dir);
	note("%s form, %d jobs, %d instances x %d workers, seed %llu, in %s",
	     S.long_form ? "long" : "short", S.njobs, ninst, nworkers,
	     rng_state, S.dir);
}

/* The cluster (cluster.sh mode, server options pgopts), the workload,
 * and every instance's config with a direct connection to the server. */
static void
setup_direct(const char *mode, const char *pgopts)
{
	setup_db(mode, pgopts);
	for (int i = 0; i < S.ninst; i++)
		inst_config(i, S.db_ci);
}

static void
start_instances(void)
{
	for (int i = 0; i < S.ninst; i++)
		inst_start(i);
	S.t0 = now_ms();
}

/* 1: kill -9 of a worker every few hundred ms, of a supervisor now and
 * then (the instance is started again, as systemd would). */
static int64_t next_kill, next_sup;
static int worker_kills, sup_kills;

static void
inject_kill9(int64_t t)
{
	if (!fault_window_open())
		return;
	if (t >= next_kill) {
		pid_t all[64], up[64];
		int n = 0, nup = 0;
		for (int i = 0; i < S.ninst; i++)
			n += workers_of(i, all + n, 64 - n);
		/* Victims: workers that are connected (registered).  Only
		 * while at least half of all workers live: the supervisor
		 * restarts a crashing worker after 1, 2, 4 ... 60 s, and a
		 * fleet killed faster than that would have no capacity left
		 * at all, which tests the backoff, not the jobs. */
		for (int k = 0; k < n; k++)
			if (mlong("select count(*) from pgjob.workers where "
				  "pid = %d",
				  (int)all[k]) == 1)
				up[nup++] = all[k];
		if (nup > 0 && 2 * n >= S.ninst * S.nworkers) {
			pid_t v = up[rnd() % (unsigned)nup];
			struct fault *f = new_fault(FK_JOBS);
			held_jobs(f, "pid", v);
			snprintf(f->what, sizeof(f->what), "kill -9 worker %d",
				 (int)v);
			watch_handlers_of(v);
			add_faulted(v);
			kill(v, SIGKILL);
			worker_kills++;
		}
		next_kill = t + urange(300, 700);
	}
	if (t >= next_sup) {
		int i = (int)(rnd() % (unsigned)S.ninst);
		pid_t kids[16];
		int n = workers_of(i, kids, 16);
		struct fault *f = new_fault(FK_JOBS);
		held_jobs(f, "supervisor_pid", S.inst[i].sup);
		snprintf(f->what, sizeof(f->what), "kill -9 supervisor %d",
			 (int)S.inst[i].sup);
		for (int k = 0; k < n; k++)
			add_faulted(kids[k]);
		kill(S.inst[i].sup, SIGKILL);
		t_wait(S.inst[i].sup, 10);
		sup_kills++;
		t_sleep_ms(urange(100, 1000));
		inst_start(i);
		S.inst[i].restarts++;
		next_sup = now_ms() + urange(4000, 7000);
	}
}

static void
scenario_kill9(void)
{
	init(3, S.long_form ? 3 : 2);
	setup_direct("single", NULL);
	start_instances();
	next_kill = S.t0 + 2000;
	next_sup = S.t0 + 5000;
	run(inject_kill9);
	extra(" worker_kills=%d supervisor_kills=%d", worker_kills, sup_kills);
	finish(NULL);
}

/* 2: SIGSTOP of a worker that holds jobs, past its lease, then SIGCONT. */
static pid_t stopped;
static int64_t cont_at, next_stop;
static int stops, stops_max, stops_holding;

/* The stopped workers' late ends were refused. */
static void
sigstop_post(void)
{
	if (stops_holding > 0 && lease_lost_lines == 0)
		failure("%d workers were stopped past their lease while "
			"holding exec jobs, and none logged \"lease lost\"",
			stops_holding);
}

static void
inject_sigstop(int64_t t)
{
	if (stopped && t >= cont_at) {
		kill(stopped, SIGCONT);
		stopped = 0;
		next_stop = t + urange(1500, 3000);
	}
	if (stopped || stops >= stops_max || t < next_stop ||
	    !fault_window_open())
		return;
	PGresult *res =
		mq("select w.pid from pgjob.workers w join pgjob.all_jobs "
		   "j on j.locked_by = w.host || ':' || w.slot where "
		   "j.state = 'running' and j.kind like 'exec%%' "
		   "group by w.pid order by "
		   "random() limit 1");
	pid_t v = res && PQntuples(res) ? atoi(PQgetvalue(res, 0, 0)) : 0;
	PQclear(res);
	if (v <= 0 || !t_alive(v))
		return;
	struct fault *f = new_fault(FK_JOBS);
	held_jobs(f, "pid", v);
	add_faulted(v);
	kill(v, SIGSTOP);
	stopped = v;
	stops++;
	stops_holding += f->n > 0;
	/* Past the lease by a margin that the takeover needs. */
	cont_at = t + S.lease_s * 1000 + 2500;
}

static void
scenario_sigstop(void)
{
	init(3, S.long_form ? 3 : 2);
	stops_max = S.long_form ? 30 : 3;
	setup_direct("single", NULL);
	start_instances();
	next_stop = S.t0 + 2000;
	run(inject_sigstop);
	if (stopped)
		kill(stopped, SIGCONT);
	extra(" stops=%d", stops);
	finish(sigstop_post);
}

/* 3: pg_ctl restart -m immediate, twice (five times in the long form). */
static int restarts_done, restarts_max;

static void
inject_pgrestart(int64_t t)
{
	if (restarts_done >= restarts_max)
		return;
	long long at = S.njobs * (long long)(restarts_done + 1) * 3 /
		       (restarts_max * 3 + 2);
	if (S.done < at)
		return;
	struct fault *f = new_fault(FK_CONN);
	(void)f;
	note("restarting PostgreSQL (-m immediate) at %lld done", S.done);
	cluster("restart", "n1", NULL);
	restarts_done++;
}

static void
scenario_pgrestart(void)
{
	init(3, S.long_form ? 3 : 2);
	restarts_max = S.long_form ? 5 : 2;
	setup_direct("single", NULL);
	start_instances();
	run(inject_pgrestart);
	if (restarts_done < restarts_max)
		failure("only %d of %d restarts happened", restarts_done,
			restarts_max);
	scan_logs();
	extra(" pg_restarts=%d reconnects_logged=%d", restarts_done,
	      conn_lost_lines);
	finish(NULL);
}

/* 4: failover to the synchronous standby; in the long form, back again
 * to the rebuilt old primary. */
static int failovers, failovers_max;
static const char *primary = "n1", *standby = "n2";

static void
inject_failover(int64_t t)
{
	if (failovers >= failovers_max)
		return;
	long long at = S.njobs * (long long)(failovers + 1) * 2 /
		       (failovers_max * 2 + 1);
	if (S.done < at)
		return;
	if (failovers > 0) {
		/* The old primary comes back as a synchronous standby. */
		note("rebuilding %s as a standby of %s", standby, primary);
		cluster("rebuild", standby, primary);
	}
	new_fault(FK_CONN);
	note("failover at %lld done: crash %s, promote %s", S.done, primary,
	     standby);
	cluster("crash", primary, NULL);
	cluster("promote", standby, NULL);
	const char *x = primary;
	primary = standby;
	standby = x;
	failovers++;
}

static void
scenario_failover(void)
{
	short_jobs = 1000;
	init(3, S.long_form ? 3 : 2);
	failovers_max = S.long_form ? 2 : 1;
	setup_direct("pair", NULL);
	start_instances();
	run(inject_failover);
	if (failovers < failovers_max)
		failure("only %d of %d failovers happened", failovers,
			failovers_max);
	long long rec = mlong_retry(30, "select pg_is_in_recovery()::int");
	if (rec != 0)
		failure("the test's connection is not on a primary (%lld)",
			rec);
	scan_logs();
	extra(" failovers=%d reconnects_logged=%d", failovers, conn_lost_lines);
	finish(NULL);
}

/* 5: a connection that stops answering.  Instances i0 and i1 reach the
 * server through the proxy, i2 directly; the proxy freezes for longer
 * than the lease, then thaws. */
static int freezes, freezes_max, freeze_ms;
static int64_t thaw_at;
static int detected_in_freeze, frozen_workers;
static int lost_lines_at_freeze;

static int
count_in_logs(const char *needle, int ninst)
{
	int n = 0;
	for (int i = 0; i < ninst; i++)
		n += t_count_in_file(S.inst[i].log, needle);
	return n;
}

static void
inject_freeze(int64_t t)
{
	if (thaw_at && t >= thaw_at) {
		int d = count_in_logs("database connection lost", 2) -
			lost_lines_at_freeze;
		detected_in_freeze += d;
		note("thaw after %d ms: %d connection losses detected by the "
		     "%d frozen workers meanwhile",
		     freeze_ms, d, 2 * S.nworkers);
		kill(proxy_pid, SIGUSR2);
		thaw_at = 0;
		return;
	}
	if (thaw_at || freezes >= freezes_max)
		return;
	long long at =
		S.njobs * (long long)(freezes + 1) * 2 / (freezes_max * 2 + 2);
	if (S.done < at)
		return;
	struct fault *f = new_fault(FK_JOBS);
	for (int i = 0; i < 2; i++) {
		struct fault g;
		held_jobs(&g, "supervisor_pid", S.inst[i].sup);
		for (int k = 0; k < g.n && f->n < 64; k++) {
			f->ids[f->n] = g.ids[k];
			f->tokens[f->n++] = g.tokens[k];
		}
	}
	lost_lines_at_freeze = count_in_logs("database connection lost", 2);
	note("freezing the proxy for %d ms at %lld done (%d jobs held "
	     "behind it)",
	     freeze_ms, S.done, f->n);
	kill(proxy_pid, SIGUSR1);
	frozen_workers += 2 * S.nworkers;
	thaw_at = t + freeze_ms;
	freezes++;
}

static void
scenario_freeze(void)
{
	init(3, S.long_form ? 3 : 2);
	freezes_max = S.long_form ? 3 : 1;
	freeze_ms = (S.long_form ? 6 : 3) * S.lease_s * 1000;
	setup_db("single", NULL);
	proxy_start(atoi(port_of("n1")));
	const char *tcp = "keepalives=1 keepalives_idle=1 "
			  "keepalives_interval=1 keepalives_count=2 "
			  "tcp_user_timeout=3000";
	char via[2048], direct[2048];
	snprintf(via, sizeof(via),
		 "host=127.0.0.1 port=%d user=postgres dbname=fault "
		 "connect_timeout=2 %s",
		 proxy_port, tcp);
	snprintf(direct, sizeof(direct), "%s %s", S.db_ci, tcp);
	inst_config(0, via);
	inst_config(1, via);
	inst_config(2, direct);
	start_instances();
	run(inject_freeze);
	if (thaw_at) /* the run ended first: thaw now */
		inject_freeze(thaw_at);
	extra(" freezes=%d freeze_ms=%d detected_during_freeze=%d/%d", freezes,
	      freeze_ms, detected_in_freeze, frozen_workers);
	finish(NULL);
}

/* 6: clocks.  i1 runs one hour ahead, i2 one hour behind (libfaketime);
 * the server logs every statement, and no statement of pgjobd may carry
 * a time of the host. */
static double max_lease_skew_s;

static void
inject_clock(int64_t t)
{
	/* Leases are measured from the database's now(): a lease set from
	 * a host clock an hour off would show here. */
	PGresult *res =
		mq("select coalesce(max(abs(extract(epoch from "
		   "locked_until - now()))), 0) from pgjob.all_jobs where "
		   "state = 'running'");
	if (res && PQntuples(res)) {
		double v = atof(PQgetvalue(res, 0, 0));
		if (v > max_lease_skew_s)
			max_lease_skew_s = v;
	}
	PQclear(res);
}

static const char *
faketime_lib(void)
{
	static const char *const paths[] = {
		"/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
		"/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1",
		"/usr/lib/faketime/libfaketimeMT.so.1",
		"/usr/local/lib/faketime/libfaketimeMT.so.1", NULL};
	for (int i = 0; paths[i]; i++)
		if (access(paths[i], R_OK) == 0)
			return paths[i];
	return NULL;
}

/* Seconds between the first log timestamp of instance i and the real
 * time it started at. */
static long
log_clock_offset(int i, time_t started)
{
	char *text = t_read_file(S.inst[i].log);
	char *p = text ? strstr(text, "ts=") : NULL;
	struct tm tm = {0};
	long off = 0;
	if (p && strptime(p + 3, "%Y-%m-%dT%H:%M:%S", &tm))
		off = (long)(timegm(&tm) - started);
	free(text);
	return off;
}

static int
has_timestamp(const char *s)
{
	/* 2026-11-29 20:06 or 2026-11-29T20:06 */
	for (; *s; s++) {
		if (strlen(s) < 16)
			return 0;
		int ok = 1;
		static const char pat[] = "dddd-dd-dd?dd:dd";
		for (int k = 0; k < 16 && ok; k++) {
			if (pat[k] == 'd')
				ok = isdigit((unsigned char)s[k]);
			else if (pat[k] == '?')
				ok = s[k] == ' ' || s[k] == 'T';
			else
				ok = s[k] == pat[k];
		}
		if (ok)
			return 1;
	}
	return 0;
}

/* A number in s that reads as a Unix time (s, ms or us) within 3 h of
 * real, but more than 10 min away from it: a skewed host's clock. */
static int
has_skewed_epoch(const char *s, time_t real)
{
	while (*s) {
		if (!isdigit((unsigned char)*s)) {
			s++;
			continue;
		}
		const char *b = s;
		while (isdigit((unsigned char)*s))
			s++;
		size_t len = (size_t)(s - b);
		if (len != 10 && len != 13 && len != 16)
			continue;
		long long v = atoll(b);
		if (len == 13)
			v /= 1000;
		if (len == 16)
			v /= 1000000;
		long long d = v - (long long)real;
		if (d < 0)
			d = -d;
		if (d < 3 * 3600 && d > 600)
			return 1;
	}
	return 0;
}

static void
scenario_clock(void)
{
	short_jobs = 1000;
	init(3, 2);
	setup_direct("single", "-c log_statement=all");
	const char *lib = faketime_lib();
	static char pre[512];
	static const char *ahead[4], *behind[4];
	if (lib) {
		snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", lib);
		ahead[0] = behind[0] = pre;
		ahead[1] = "FAKETIME=+1h";
		behind[1] = "FAKETIME=-1h";
		S.inst[1].env = ahead;
		S.inst[2].env = behind;
	} else {
		note("libfaketime not found (apt-get install faketime): the "
		     "instances run on the real clock; the SQL check stands");
	}
	time_t started = time(NULL);
	start_instances();
	run(inject_clock);
	long off1 = log_clock_offset(1, started),
	     off2 = log_clock_offset(2, started);
	if (lib && (off1 < 3000 || off2 > -3000))
		failure("faketime did not shift the clocks (offsets %ld s, "
			"%ld s)",
			off1, off2);
	/* Each skewed instance did its share. */
	for (int i = 1; lib && i < 3; i++) {
		long long n = mlong("select count(*) from pgjob.workers where "
				    "supervisor_pid = %d",
				    (int)S.inst[i].sup);
		if (n < 1)
			failure("instance %s has no worker", S.inst[i].name);
	}
	long long hb =
		mlong("select count(*) from pgjob.workers where "
		      "abs(extract(epoch from heartbeat_at - now())) > "
		      "600 or abs(extract(epoch from started_at - now())) "
		      "> 3000");
	if (hb != 0)
		failure("%lld worker rows carry a host time", hb);
	long long fin = mlong("select count(*) from pgjob.all_jobs where "
			      "finished_at > now() or finished_at < now() - "
			      "interval '30 minutes'");
	if (fin != 0)
		failure("%lld jobs carry a finish time off the database "
			"clock",
			fin);
	if (max_lease_skew_s > 600)
		failure("a lease ran %.0f s from the database's now()",
			max_lease_skew_s);
	long long takeovers = mlong("select count(*) from pgjob.all_jobs where "
				    "lease_token > 1");
	/* The SQL alone: every statement a pgjobd session sent, with its
	 * parameters, from the server's log. */
	char path[4200];
	snprintf(path, sizeof(path), "%s/n1.log", S.cdir);
	char *log = t_read_file(path);
	int stmts = 0, with_time = 0;
	for (char *line = log; line && *line;) {
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		if (strstr(line, "_pgjobd_") &&
		    (strstr(line, "statement: ") || strstr(line, "execute ") ||
		     strstr(line, "parameters: "))) {
			stmts++;
			const char *body = strstr(line, "_pgjobd_") + 8;
			if (has_timestamp(body) ||
			    has_skewed_epoch(body, time(NULL))) {
				if (with_time++ < 5)
					failure("pgjobd sent a time: %.200s",
						line);
			}
		}
		line = nl ? nl + 1 : NULL;
	}
	free(log);
	if (stmts < S.njobs / 10)
		failure("only %d pgjobd statements in the server log", stmts);
	extra(" faketime=%s clock_offsets_s=0,%+ld,%+ld "
	      "statements_checked=%d statements_with_host_time=%d "
	      "max_lease_from_db_now_s=%.1f takeovers=%lld",
	      lib ? "yes" : "absent", off1, off2, stmts, with_time,
	      max_lease_skew_s, takeovers);
	finish(NULL);
}

/* ------------------------------------------------------------------ */

static const struct {
	const char *name;
	void (*fn)(void);
} scenarios[] = {
	{"kill9", scenario_kill9},	   {"sigstop", scenario_sigstop},
	{"pgrestart", scenario_pgrestart}, {"failover", scenario_failover},
	{"freeze", scenario_freeze},	   {"clock", scenario_clock},
};

static void (*chosen)(void);

static void
test_scenario(void **state)
{
	(void)state;
	chosen();
}

int
main(int argc, char **argv)
{
	if (argc != 2 && !(argc == 3 && strcmp(argv[2], "--long-only") == 0))
		goto usage;
	for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++)
		if (strcmp(argv[1], scenarios[i].name) == 0) {
			scenario = scenarios[i].name;
			chosen = scenarios[i].fn;
		}
	if (!chosen)
		goto usage;
	signal(SIGPIPE, SIG_IGN);
	const char *lf = getenv("PGJOBD_FAULT_LONG");
	S.long_form = lf && *lf && strcmp(lf, "0") != 0;
	/* ctest's pgrestart: its short form is fault.chaos's restart
	 * (tests/fault/chaos_features.sh, with every worker's reconnection
	 * timed the same way), so only the long form runs it. */
	if (argc == 3 && !S.long_form) {
		printf("%s: the long form's alone (PGJOBD_FAULT_LONG=1); "
		       "fault.chaos restarts PostgreSQL in the short form\n",
		       scenario);
		return 77;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_scenario),
	};
	return cmocka_run_group_tests_name(scenario, tests, NULL, NULL);
usage:
	fprintf(stderr, "usage: fault_suite kill9|sigstop|pgrestart|failover|"
			"freeze|clock [--long-only]\n");
	return 2;
}
