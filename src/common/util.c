/*
 * util: allocation wrappers, string helpers, clocks and a growable buffer.
 */

#include "common/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static void
oom(size_t n)
{
	char msg[96];
	int len =
		snprintf(msg, sizeof(msg),
			 "level=fatal msg=\"out of memory (%zu bytes)\"\n", n);
	if (len > 0)
		(void)!write(2, msg, (size_t)len);
	abort();
}

void *
xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		oom(n);
	return p;
}

void *
xcalloc(size_t nmemb, size_t size)
{
	void *p = calloc(nmemb ? nmemb : 1, size ? size : 1);
	if (!p)
		oom(nmemb * size);
	return p;
}

void *
xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);
	if (!q)
		oom(n);
	return q;
}

char *
xstrdup(const char *s)
{
	if (!s)
		return NULL;
	return xstrndup(s, strlen(s));
}

char *
xstrndup(const char *s, size_t n)
{
	char *p = xmalloc(n + 1);
	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

char *
xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *p;

	va_start(ap, fmt);
	p = xvasprintf(fmt, ap);
	va_end(ap);
	return p;
}

char *
xvasprintf(const char *fmt, va_list ap)
{
	char *p;

	if (vasprintf(&p, fmt, ap) < 0)
		oom(strlen(fmt));
	return p;
}

int64_t
util_cpu_us(const struct rusage *ru)
{
	return (int64_t)(ru->ru_utime.tv_sec + ru->ru_stime.tv_sec) * 1000000 +
	       ru->ru_utime.tv_usec + ru->ru_stime.tv_usec;
}

int64_t
util_cpu_ms(const struct rusage *ru)
{
	return util_cpu_us(ru) / 1000;
}

int64_t
util_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t
util_now_ms(void)
{
	return util_now_us() / 1000;
}

int64_t
util_wall_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void
buf_reserve(struct buf *b, size_t extra)
{
	size_t need = b->len + extra + 1;
	if (need <= b->cap)
		return;
	size_t cap = b->cap ? b->cap : 64;
	while (cap < need)
		cap *= 2;
	b->data = xrealloc(b->data, cap);
	b->cap = cap;
}

void
buf_append(struct buf *b, const void *p, size_t n)
{
	buf_reserve(b, n);
	memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
}

void
buf_appendf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	buf_reserve(b, (size_t)n);
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

void
buf_append_int(struct buf *b, long long v)
{
	char d[24], *e = d + sizeof(d), *s = e;
	/* In unsigned arithmetic: -LLONG_MIN does not fit a long long. */
	unsigned long long u =
		v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;

	do
		*--s = (char)('0' + u % 10);
	while ((u /= 10) != 0);
	if (v < 0)
		*--s = '-';
	buf_append(b, s, (size_t)(e - s));
}

void
buf_reset(struct buf *b)
{
	b->len = 0;
	if (b->data)
		b->data[0] = '\0';
}

void
buf_free(struct buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

void
strlist_add(struct strlist *l, char *s)
{
	l->v = xrealloc(l->v, (l->n + 2) * sizeof(*l->v));
	l->v[l->n++] = s;
	l->v[l->n] = NULL;
}

void
strlist_free(struct strlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	*l = (struct strlist){0};
}
