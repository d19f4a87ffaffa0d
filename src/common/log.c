/*
 * log: logfmt or JSON lines on stderr, whole lines in each write(2) so that
 * lines from the supervisor and its workers never interleave mid-line.
 *
 * A worker buffers its lines (log_set_buffered()) and writes them once per
 * turn of its loop, before it waits (log_flush() from a prepare watcher),
 * at most PENDING_MAX bytes a write: a write(2) a line cost a worker whose
 * jobs each failed once a third of its CPU time (docs/performance.md,
 * "Changes to the design").  Lines at error and above are written at once,
 * after those before them.  A line is built in one buffer reused for every
 * line, under a lock: the console's threads log too.
 */
#include "common/log.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/text.h"
#include "common/util.h"

static const char *names[] = {"debug", "info", "warn", "error", "fatal"};
/* sd-daemon(3)'s prefixes: SD_DEBUG, SD_INFO, SD_WARNING, SD_ERR, SD_CRIT. */
static const char *prefixes[] = {"<7>", "<6>", "<4>", "<3>", "<2>"};

static struct {
	const char *proc;
	int level;
	int json;
	int worker;
	int slot;
	const char *database; /* db=, with several databases; borrowed */
	int journal; /* stderr is journald's stream: see journal_stream() */
} lg = {"pgjobd", LOG_INFO, 0, 0, 0, NULL, 0};

/* This process's pid for pid=; 0: not read since it began (or forked). */
static pid_t pid_now;

/*
 * 1 when stderr is the stream systemd connected to journald: JOURNAL_STREAM
 * ("<device>:<inode>", sd-daemon(3)) names stderr's own device and inode.
 * Set but not matching (stderr redirected by a wrapper, a child started by
 * hand from a unit's shell) is not journald.
 */
static int
journal_stream(void)
{
	const char *e = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;
	char end;

	if (!e || sscanf(e, "%llu:%llu%c", &dev, &ino, &end) != 2)
		return 0;
	if (fstat(STDERR_FILENO, &st) < 0)
		return 0;
	return (unsigned long long)st.st_dev == dev &&
	       (unsigned long long)st.st_ino == ino;
}

void
log_init(const char *proc, int level, int json)
{
	lg.proc = proc;
	lg.level = level;
	lg.json = json;
	lg.journal = journal_stream();
	pid_now = 0;
}

void
log_set_level(int level)
{
	lg.level = level;
}

void
log_set_json(int json)
{
	lg.json = json;
}

void
log_set_worker(int n, int slot)
{
	lg.worker = n;
	lg.slot = slot;
}

void
log_set_database(const char *name)
{
	lg.database = name;
}

int
log_level_parse(const char *s)
{
	for (int i = LOG_DEBUG; i <= LOG_ERROR; i++)
		if (strcmp(s, names[i]) == 0)
			return i;
	return -1;
}

/* Appends s quoted for logfmt or JSON (text_escape_append()). */
static void
quote(struct buf *b, const char *s)
{
	buf_append(b, "\"", 1);
	text_escape_append(b, s, lg.json);
	buf_append(b, "\"", 1);
}

/* 1 when a logfmt value must be quoted: empty, or holding a space, ", =,
 * \, a control character or a byte that is not UTF-8. */
static int
needs_quote(const char *s)
{
	uint32_t cp;
	size_t n;

	if (!*s)
		return 1;
	for (; *s; s += n) {
		n = text_char(s, &cp);
		if (n == 0 || text_is_control(cp) || cp == ' ' || cp == '"' ||
		    cp == '=' || cp == '\\')
			return 1;
	}
	return 0;
}

/* Where the current line's fields start in its buffer: after the priority
 * prefix, if any.  Under lock, as the line. */
static size_t field_start;

/* The separator and the key of a field: `key=` or `"key":`. */
static void
field_key(struct buf *b, const char *key)
{
	size_t len = b->len - field_start;
	if (lg.json) {
		if (len > 1)
			buf_append(b, ",", 1);
		buf_append(b, "\"", 1);
		buf_append(b, key, strlen(key));
		buf_append(b, "\":", 2);
		return;
	}
	if (len)
		buf_append(b, " ", 1);
	buf_append(b, key, strlen(key));
	buf_append(b, "=", 1);
}

static void
field_str(struct buf *b, const char *key, const char *val)
{
	field_key(b, key);
	if (lg.json || needs_quote(val))
		quote(b, val);
	else
		buf_append(b, val, strlen(val));
}

static void
field_int(struct buf *b, const char *key, long long val)
{
	field_key(b, key);
	buf_append_int(b, val);
}

/*
 * The lines not yet written, in buffered mode: at most PIPE_BUF (4096 on
 * Linux) in one write(2), which a pipe keeps whole beside other writers'.
 * npending grows only once a whole line is in, so a fatal signal's handler
 * writes whole lines only.
 */
#define PENDING_MAX 4096
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct buf line; /* the line being built, reused */
static char pending[PENDING_MAX];
static volatile size_t npending;
static int buffered;
static time_t ts_sec = -1; /* the second ts_head says */
static char ts_head[24];   /* "%Y-%m-%dT%H:%M:%S" of ts_sec */
static size_t ts_len;

static void
write_out(const char *p, size_t n)
{
	(void)!write(STDERR_FILENO, p, n);
}

static void
flush_locked(void)
{
	if (npending) {
		write_out(pending, npending);
		npending = 0;
	}
}

void
log_flush(void)
{
	pthread_mutex_lock(&lock);
	flush_locked();
	pthread_mutex_unlock(&lock);
}

void
log_flush_try(void)
{
	if (pthread_mutex_trylock(&lock) != 0)
		return;
	flush_locked();
	pthread_mutex_unlock(&lock);
}

/* fork(): nothing pending on either side, and the child reads its own
 * pid and writes its lines at once (it may _exit() without a flush). */
static void
fork_prepare(void)
{
	pthread_mutex_lock(&lock);
	flush_locked();
}

static void
fork_parent(void)
{
	pthread_mutex_unlock(&lock);
}

static void
fork_child(void)
{
	pid_now = 0;
	buffered = 0;
	pthread_mutex_unlock(&lock);
}

/* A fatal signal: the whole lines pending first (write(2) is safe in a
 * handler), then the signal's default action, a core as before. */
static void
on_fatal(int sig)
{
	if (npending)
		write_out(pending, npending);
	signal(sig, SIG_DFL);
	raise(sig);
}

static void
install_once(void)
{
	static const int fatal[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
	pthread_atfork(fork_prepare, fork_parent, fork_child);
	for (size_t i = 0; i < sizeof(fatal) / sizeof(fatal[0]); i++) {
		struct sigaction old, sa = {0};
		/* Only where nobody handles it: a sanitizer's handler (the
		 * sanitizer build) reports better than a flush would. */
		if (sigaction(fatal[i], NULL, &old) != 0 ||
		    old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO))
			continue;
		sa.sa_handler = on_fatal;
		sigemptyset(&sa.sa_mask);
		sa.sa_flags = SA_RESETHAND | SA_NODEFER;
		sigaction(fatal[i], &sa, NULL);
	}
}

void
log_set_buffered(int on)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	if (on)
		pthread_once(&once, install_once);
	pthread_mutex_lock(&lock);
	if (!on)
		flush_locked();
	buffered = on;
	pthread_mutex_unlock(&lock);
}

int
log_enabled(int level)
{
	return level >= lg.level;
}

static void
emit(int level, const struct log_job *job, const char *fmt, va_list ap)
{
	char msg[4096];

	if (level < lg.level)
		return;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	pthread_mutex_lock(&lock);
	struct buf *b = &line;
	b->len = 0;
	/* journald reads the priority from the prefix and strips it
	 * (`journalctl -p warning`); fields count from after it. */
	field_start = 0;
	if (lg.journal) {
		buf_append(b, prefixes[level], 3);
		field_start = b->len;
	}
	if (lg.json)
		buf_append(b, "{", 1);
	if (!lg.journal) {
		char ts[40];
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		/* The date and time once a second; the milliseconds each line.
		 */
		if (now.tv_sec != ts_sec) {
			struct tm tm;
			gmtime_r(&now.tv_sec, &tm);
			ts_len = strftime(ts_head, sizeof(ts_head),
					  "%Y-%m-%dT%H:%M:%S", &tm);
			ts_sec = now.tv_sec;
		}
		long ms = now.tv_nsec / 1000000;
		memcpy(ts, ts_head, ts_len);
		char *t = ts + ts_len;
		*t++ = '.';
		*t++ = (char)('0' + ms / 100);
		*t++ = (char)('0' + ms / 10 % 10);
		*t++ = (char)('0' + ms % 10);
		*t++ = 'Z';
		*t = '\0';
		field_str(b, "ts", ts);
	}
	field_str(b, "level", names[level]);
	field_str(b, "proc", lg.proc);
	/* Kept under journald too: the supervisor and its workers share one
	 * stream, so journald's _PID is the supervisor's on every line.
	 * Read once a process (fork_child() and log_init() forget it). */
	if (!pid_now)
		pid_now = getpid();
	field_int(b, "pid", pid_now);
	if (lg.database)
		field_str(b, "db", lg.database);
	if (lg.worker > 0)
		field_int(b, "worker", lg.worker);
	if (lg.slot > 0)
		field_int(b, "slot", lg.slot);
	if (job) {
		field_int(b, "job", job->id);
		if (job->kind)
			field_str(b, "kind", job->kind);
		if (job->attempt > 0)
			field_int(b, "attempt", job->attempt);
	}
	field_str(b, "msg", msg);
	buf_append(b, lg.json ? "}\n" : "\n", lg.json ? 2 : 1);
	if (buffered && level < LOG_ERROR && b->len <= PENDING_MAX) {
		if (npending + b->len > PENDING_MAX)
			flush_locked();
		memcpy(pending + npending, b->data, b->len);
		npending += b->len;
	} else {
		flush_locked();
		write_out(b->data, b->len);
	}
	pthread_mutex_unlock(&lock);
}

void
log_msg(int level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	emit(level, NULL, fmt, ap);
	va_end(ap);
}

void
log_msg_errno(int level, const char *fmt, ...)
{
	int e = errno;
	char msg[4096];
	va_list ap;

	if (level < lg.level)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_msg(level, "%s: %s", msg, strerror(e));
}

void
log_job(int level, const struct log_job *job, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	emit(level, job, fmt, ap);
	va_end(ap);
}
