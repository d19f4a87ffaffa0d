/*
 * procmetrics: process_* and pgjobd_build_info.  See procmetrics.h.
 */
#include "daemon/procmetrics.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/metrics.h"
#include "db/migrate.h"

/* What /proc/PID/stat says of a process; fields (man 5 proc) counted
 * after the command's closing parenthesis, which may hold anything. */
struct pstat {
	double cpu_s;	    /* utime + stime */
	double child_cpu_s; /* cutime + cstime: its reaped children */
	double start_s;	    /* Unix time it started */
	double vsize, rss;  /* bytes */
};

/* The system's boot time, in Unix seconds (btime of /proc/stat). */
static long long
boot_time(void)
{
	static long long btime = -1;
	char line[256];
	if (btime >= 0)
		return btime;
	FILE *f = fopen("/proc/stat", "r");
	btime = 0;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "btime %lld", &btime) == 1)
			break;
	if (f)
		fclose(f);
	return btime;
}

static int
read_pstat(pid_t pid, struct pstat *p)
{
	char path[64], buf[1024];
	unsigned long long ut, st, vsize;
	long long cut, cst, start, rss;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	size_t len = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[len] = '\0';
	char *q = strrchr(buf, ')');
	/* From field 3 (state) on: 14 utime, 15 stime, 16 cutime, 17
	 * cstime, 22 starttime, 23 vsize, 24 rss (pages). */
	if (!q || sscanf(q + 2,
			 "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu "
			 "%llu %lld %lld %*d %*d %*d %*d %lld %llu %lld",
			 &ut, &st, &cut, &cst, &start, &vsize, &rss) != 7)
		return -1;
	double tick = (double)sysconf(_SC_CLK_TCK);
	p->cpu_s = (double)(ut + st) / tick;
	p->child_cpu_s = (double)(cut + cst) / tick;
	p->start_s = (double)boot_time() + (double)start / tick;
	p->vsize = (double)vsize;
	p->rss = (double)rss * (double)sysconf(_SC_PAGESIZE);
	return 0;
}

/* Open file descriptors of pid; -1 when /proc does not say. */
static int
open_fds(pid_t pid)
{
	char path[64];
	int n = 0;
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return -1;
	for (struct dirent *e; (e = readdir(d));)
		n += e->d_name[0] != '.';
	closedir(d);
	return n - (pid == getpid()); /* this very opendir's */
}

static void
render_self(struct buf *out)
{
	struct pstat p;
	struct rlimit rl;
	if (read_pstat(getpid(), &p) == 0) {
		metrics_counter(out, "process_cpu_seconds_total",
				"Total user and system CPU time spent in "
				"seconds (the supervisor).",
				NULL, p.cpu_s);
		metrics_gauge(out, "process_start_time_seconds",
			      "Start time of the process since unix epoch in "
			      "seconds.",
			      NULL, p.start_s);
		metrics_gauge(out, "process_resident_memory_bytes",
			      "Resident memory size in bytes.", NULL, p.rss);
		metrics_gauge(out, "process_virtual_memory_bytes",
			      "Virtual memory size in bytes.", NULL, p.vsize);
	}
	int fds = open_fds(getpid());
	if (fds >= 0)
		metrics_gauge(out, "process_open_fds",
			      "Number of open file descriptors.", NULL, fds);
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		metrics_gauge(out, "process_max_fds",
			      "Maximum number of open file descriptors.", NULL,
			      (double)rl.rlim_cur);
}

/* The workers: those alive now read from /proc, the exited ones from
 * RUSAGE_CHILDREN (a worker gone between the two readings is counted in
 * neither for this scrape, and in the next). */
static void
render_workers(struct buf *out, const pid_t *pids, int n)
{
	struct rusage ru;
	double cpu = 0, rss = 0;
	long long fds = 0;
	if (getrusage(RUSAGE_CHILDREN, &ru) == 0)
		cpu = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
		      (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
	for (int i = 0; i < n; i++) {
		struct pstat p;
		if (read_pstat(pids[i], &p) == 0) {
			cpu += p.cpu_s + p.child_cpu_s;
			rss += p.rss;
		}
		int f = open_fds(pids[i]);
		fds += f > 0 ? f : 0;
	}
	metrics_counter(out, "pgjobd_workers_cpu_seconds_total",
			"User and system CPU time of the workers, those alive "
			"and those exited, with their handler processes.",
			NULL, cpu);
	metrics_gauge(out, "pgjobd_workers_resident_memory_bytes",
		      "Resident memory of the live workers, summed.", NULL,
		      rss);
	metrics_gauge(out, "pgjobd_workers_open_fds",
		      "Open file descriptors of the live workers, summed.",
		      NULL, (double)fds);
}

void
procmetrics_render(struct buf *out, const pid_t *pids, int n)
{
	struct buf l = {0};
	metrics_label(&l, "version", PGJOBD_VERSION);
	metrics_label_int(&l, "schema", migrate_latest());
	metrics_gauge(out, "pgjobd_build_info",
		      "pgjobd's version and the schema version it needs; "
		      "always 1.",
		      l.data, 1);
	buf_free(&l);
	render_self(out);
	render_workers(out, pids, n);
}
