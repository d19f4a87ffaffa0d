/*
 * log: logfmt or JSON lines on stderr, one write(2) per line so that lines
 * from the supervisor and its workers never interleave mid-line.
 */
#include "common/log.h"

#include <errno.h>
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
 * prefix, if any. */
static size_t field_start;

static void
field_str(struct buf *b, const char *key, const char *val)
{
	size_t len = b->len - field_start;
	if (lg.json) {
		buf_appendf(b, "%s\"%s\":", len > 1 ? "," : "", key);
		quote(b, val);
		return;
	}
	buf_appendf(b, "%s%s=", len ? " " : "", key);
	if (needs_quote(val))
		quote(b, val);
	else
		buf_append(b, val, strlen(val));
}

static void
field_int(struct buf *b, const char *key, long long val)
{
	size_t len = b->len - field_start;
	if (lg.json)
		buf_appendf(b, "%s\"%s\":%lld", len > 1 ? "," : "", key, val);
	else
		buf_appendf(b, "%s%s=%lld", len ? " " : "", key, val);
}

int
log_enabled(int level)
{
	return level >= lg.level;
}

static void
emit(int level, const struct log_job *job, const char *fmt, va_list ap)
{
	struct buf b = {0};
	char msg[4096];

	if (level < lg.level)
		return;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	/* journald reads the priority from the prefix and strips it
	 * (`journalctl -p warning`); fields count from after it. */
	field_start = 0;
	if (lg.journal) {
		buf_append(&b, prefixes[level], 3);
		field_start = b.len;
	}
	if (lg.json)
		buf_append(&b, "{", 1);
	if (!lg.journal) {
		char ts[40];
		struct timespec now;
		struct tm tm;
		clock_gettime(CLOCK_REALTIME, &now);
		gmtime_r(&now.tv_sec, &tm);
		size_t n = strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
		snprintf(ts + n, sizeof(ts) - n, ".%03ldZ",
			 now.tv_nsec / 1000000);
		field_str(&b, "ts", ts);
	}
	field_str(&b, "level", names[level]);
	field_str(&b, "proc", lg.proc);
	/* Kept under journald too: the supervisor and its workers share one
	 * stream, so journald's _PID is the supervisor's on every line. */
	field_int(&b, "pid", getpid());
	if (lg.database)
		field_str(&b, "db", lg.database);
	if (lg.worker > 0)
		field_int(&b, "worker", lg.worker);
	if (lg.slot > 0)
		field_int(&b, "slot", lg.slot);
	if (job) {
		field_int(&b, "job", job->id);
		if (job->kind)
			field_str(&b, "kind", job->kind);
		if (job->attempt > 0)
			field_int(&b, "attempt", job->attempt);
	}
	field_str(&b, "msg", msg);
	buf_append(&b, lg.json ? "}\n" : "\n", lg.json ? 2 : 1);
	(void)!write(STDERR_FILENO, b.data, b.len);
	buf_free(&b);
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
