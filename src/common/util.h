/*
 * util: allocation wrappers that abort on out-of-memory, string helpers and
 * clocks.  Every allocation in pgjobd goes through here, so call sites carry
 * no allocation-failure branches.
 */
#ifndef PGJOBD_UTIL_H
#define PGJOBD_UTIL_H

#include <stddef.h>
#include <stdarg.h>
#include <stdint.h>

#define PGJOBD_VERSION "0.1.0"

/* Exit codes from sysexits.h that the supervisor and scripts rely on. */
#define EXIT_TEMPFAIL 75 /* try again later (no free slot) */
#define EXIT_CONFIG   78 /* config or schema this binary cannot work with */

void *xmalloc(size_t n);
void *xcalloc(size_t nmemb, size_t size);
void *xrealloc(void *p, size_t n);
/* Returns NULL for NULL; caller frees. */
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
/* printf into a new string; caller frees. */
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same with a va_list. */
char *xvasprintf(const char *fmt, va_list ap)
	__attribute__((format(printf, 1, 0)));
/* User and system CPU time of ru, in microseconds and milliseconds. */
struct rusage;
int64_t util_cpu_us(const struct rusage *ru);
int64_t util_cpu_ms(const struct rusage *ru);

/* Microseconds and milliseconds on CLOCK_MONOTONIC; never go backwards,
 * and cost no system call (the vDSO answers). */
int64_t util_now_us(void);
int64_t util_now_ms(void);
/* Microseconds on CLOCK_REALTIME (for log lines and benchmarks only). */
int64_t util_wall_us(void);

/*
 * A growable byte buffer.  The data is always NUL-terminated so it can be
 * used as a string.  Free with buf_free().
 */
struct buf {
	char *data;
	size_t len;
	size_t cap;
};

void buf_append(struct buf *b, const void *p, size_t n);
void buf_appendf(struct buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* v in decimal, as "%lld" would write it: without printf's work, for the
 * arrays of a batch's parameters (a thousand numbers a statement). */
void buf_append_int(struct buf *b, long long v);
void buf_reset(struct buf *b);
void buf_free(struct buf *b);

/* A NULL-terminated list of "NAME=value" or "Name: value" strings. */
struct strlist {
	char **v; /* v[n] == NULL */
	size_t n;
};

/* Appends s (taken over) to l. */
void strlist_add(struct strlist *l, char *s);
/* Frees every string and the list; l is empty after. */
void strlist_free(struct strlist *l);

#endif
