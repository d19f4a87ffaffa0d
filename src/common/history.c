/*
 * history: a worker's counts per (queue, kind) for pgjob.history_minutes
 * (history.h).  A hash table of open addressing, so that the count of an
 * attempt's end finds its pair without a walk over up to 200 names.
 */
#include "common/history.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

/* Room for the named pairs and an "(other)" per queue, half full at most. */
#define HISTORY_SLOTS 1024

int
history_bucket(int64_t ms)
{
	/* Bound of bucket i: 2^(i/2) ms; squares avoid floating point:
	 * ms <= 2^(i/2) iff ms^2 <= 2^i. */
	if (ms <= 1)
		return 0;
	if (ms > ((int64_t)1 << 31))
		return HISTORY_BUCKETS - 1;
	uint64_t sq = (uint64_t)ms * (uint64_t)ms;
	for (int i = 1; i < HISTORY_BUCKETS - 1; i++)
		if (sq <= ((uint64_t)1 << i))
			return i;
	return HISTORY_BUCKETS - 1;
}

void
history_init(struct history *h)
{
	*h = (struct history){0};
	h->minute = -1;
}

static void
clear(struct history *h)
{
	if (h->p)
		for (size_t i = 0; i < HISTORY_SLOTS; i++) {
			free(h->p[i].queue);
			free(h->p[i].kind);
		}
	free(h->p);
	h->p = NULL;
	h->n = h->named = 0;
}

void
history_free(struct history *h)
{
	clear(h);
}

static uint64_t
hash(const char *queue, const char *kind)
{
	uint64_t x = 1469598103934665603ULL; /* FNV-1a */
	for (const char *s = queue; *s; s++)
		x = (x ^ (unsigned char)*s) * 1099511628211ULL;
	x = (x ^ 0xff) * 1099511628211ULL;
	for (const char *s = kind; *s; s++)
		x = (x ^ (unsigned char)*s) * 1099511628211ULL;
	return x;
}

/* The place of (queue, kind), or the free place it would take; NULL when
 * the table is full. */
static struct history_pair *
find(struct history *h, const char *queue, const char *kind)
{
	if (!h->p)
		h->p = xcalloc(HISTORY_SLOTS, sizeof(*h->p));
	size_t i = hash(queue, kind) % HISTORY_SLOTS;
	for (size_t k = 0; k < HISTORY_SLOTS; k++) {
		struct history_pair *p = &h->p[(i + k) % HISTORY_SLOTS];
		if (!p->queue || (strcmp(p->queue, queue) == 0 &&
				  strcmp(p->kind, kind) == 0))
			return p;
	}
	return NULL;
}

static struct history_pair *
take_place(struct history *h, struct history_pair *p, const char *queue,
	   const char *kind)
{
	p->queue = xstrdup(queue);
	p->kind = xstrdup(kind);
	h->n++;
	if (strcmp(kind, HISTORY_OTHER) != 0)
		h->named++;
	return p;
}

struct history_pair *
history_pair(struct history *h, const char *queue, const char *kind)
{
	struct history_pair *p = find(h, queue, kind);
	if (p && p->queue)
		return p;
	if (p && h->named < HISTORY_MAX_PAIRS && h->n < HISTORY_SLOTS / 2)
		return take_place(h, p, queue, kind);
	/* Over the cap: the queue's "(other)", or, past the table's room
	 * (more queues than it holds), the one "(other)" of all. */
	if (h->n < HISTORY_SLOTS / 2) {
		p = find(h, queue, HISTORY_OTHER);
		if (p)
			return p->queue
				       ? p
				       : take_place(h, p, queue, HISTORY_OTHER);
	}
	/* At most HISTORY_SLOTS / 2 + 1 places are ever taken, so find()
	 * ends at the pair or at a free place: never NULL here. */
	p = find(h, HISTORY_OTHER, HISTORY_OTHER);
	if (!p)
		abort();
	return p->queue ? p : take_place(h, p, HISTORY_OTHER, HISTORY_OTHER);
}

void
history_wait(struct history_pair *p, int64_t ms)
{
	p->wait[history_bucket(ms)]++;
	p->nwait++;
}

void
history_run(struct history_pair *p, int64_t ms)
{
	p->run[history_bucket(ms)]++;
	p->nrun++;
}

int
history_pair_used(const struct history_pair *p)
{
	return p->done || p->failed || p->retried || p->nwait || p->nrun;
}

struct history_pair *
history_next(const struct history *h, size_t *i)
{
	if (!h->p)
		return NULL;
	for (; *i < HISTORY_SLOTS; (*i)++)
		if (h->p[*i].queue)
			return &h->p[(*i)++];
	return NULL;
}

/* Adds b's counts to a. */
static void
add(struct history_pair *a, const struct history_pair *b)
{
	a->done += b->done;
	a->failed += b->failed;
	a->retried += b->retried;
	for (int k = 0; k < HISTORY_BUCKETS; k++) {
		a->wait[k] += b->wait[k];
		a->run[k] += b->run[k];
	}
	a->nwait += b->nwait;
	a->nrun += b->nrun;
}

size_t
history_take(struct history *h, struct history *out, int64_t now_minute)
{
	size_t i = 0, n = 0;
	struct history_pair *p;
	/* The minute of the cap these pairs were named under: the rows go
	 * to it, so that no minute's rows hold more than the cap's named
	 * pairs from one worker (stamped with the minute of the write, the
	 * pairs taken just after a minute began and those named afresh
	 * after it shared a minute: up to twice the cap). */
	/* The first take: what was named before it counts under this
	 * minute's cap, and stays named.  Cleared here as at a minute's
	 * change, the jobs ended after it named the cap's pairs again in
	 * the same minute (test_history's flood of kinds, straddling a
	 * worker's first heartbeat on a loaded machine: 250 named, none in
	 * "(other)"). */
	if (h->minute < 0)
		h->minute = now_minute;
	out->minute = h->minute;
	while ((p = history_next(h, &i)) != NULL) {
		if (!history_pair_used(p))
			continue;
		add(history_pair(out, p->queue, p->kind), p);
		n++;
		char *q = p->queue, *k = p->kind;
		*p = (struct history_pair){.queue = q, .kind = k};
	}
	if (h->minute != now_minute) {
		clear(h);
		h->minute = now_minute;
	}
	return n;
}

void
history_add_back(struct history *h, const struct history *from)
{
	size_t i = 0;
	struct history_pair *p;
	while ((p = history_next(from, &i)) != NULL)
		add(history_pair(h, p->queue, p->kind), p);
}

void
history_text(const uint32_t *b, char *buf)
{
	int last = -1;
	for (int k = 0; k < HISTORY_BUCKETS; k++)
		if (b[k])
			last = k;
	char *s = buf;
	*s++ = '{';
	for (int k = 0; k <= last; k++)
		s += sprintf(s, "%s%u", k ? "," : "", b[k]);
	*s++ = '}';
	*s = '\0';
}
