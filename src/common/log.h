/*
 * log: one line per event, as logfmt text or JSON, on stderr.
 *
 * Every line names its process (supervisor, worker, pgjob) and, once a
 * worker holds one, its slot.  Job lines add job, kind and attempt:
 *   level=info proc=worker slot=3 job=88121 kind=thumbnail attempt=2 msg="..."
 * Under journald (JOURNAL_STREAM names stderr's device and inode, as
 * sd-daemon(3) says) each line starts with its priority, "<6>" for info,
 * "<4>" for warn, and so on, and leaves the time out (journald adds it);
 * it keeps pid=, since the supervisor and its workers share one stream.
 * Elsewhere a line carries ts= and pid=, and no prefix.
 */
#ifndef PGJOBD_LOG_H
#define PGJOBD_LOG_H

#include <stdint.h>

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR, LOG_FATAL };

/* The job a line is about; NULL for lines that are not about a job. */
struct log_job {
	int64_t id;
	const char *kind;
	int attempt;
};

void log_init(const char *proc, int level, int json);
void log_set_level(int level);
void log_set_json(int json);
/* The worker this process is (worker=N: its number in its instance) and
 * the slot it holds; 0 for none. */
void log_set_worker(int n, int slot);
/* The database a worker serves, with databases: (db=NAME on its lines);
 * NULL for none.  name is borrowed for the process's life. */
void log_set_database(const char *name);
/* Parses "debug", "info", "warn", "error"; returns -1 for anything else. */
int log_level_parse(const char *s);

/*
 * Buffered (on: 1): lines below error wait in the process until
 * log_flush(), or until the next would not fit in one write(2) of 4096
 * bytes; a line at error or above writes them and itself at once.  Off
 * (the default, and in a child after fork()) writes each line as it comes;
 * turning it off flushes.  A worker turns it on around its loop and
 * flushes before each wait, and the plugin watchdog during a long run.  Lines
 * still pending when the process dies of SIGKILL are lost; of a fatal signal
 * nobody else handles (SIGSEGV, SIGABRT, ...), written first.
 */
void log_set_buffered(int on);
void log_flush(void);
/* log_flush() unless a line is being written: for a thread about to end
 * the process, which must not wait on one stuck in write(2). */
void log_flush_try(void);

/* Whether a line at level would be written. */
int log_enabled(int level);

void log_msg(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* The same with ": " and strerror(errno) (as it was on entry) appended. */
void log_msg_errno(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void log_job(int level, const struct log_job *job, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * As in OpenBSD's daemons: log_warn() and log_error() add the error of the
 * system call that just failed (errno), log_warnx() and log_errorx() do
 * not.
 */
#define log_debug(...)	log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...)	log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...)	log_msg_errno(LOG_WARN, __VA_ARGS__)
#define log_warnx(...)	log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...)	log_msg_errno(LOG_ERROR, __VA_ARGS__)
#define log_errorx(...) log_msg(LOG_ERROR, __VA_ARGS__)

#endif
