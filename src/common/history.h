/*
 * history: what a worker ended per (queue, kind) since its last write to
 * pgjob.history_minutes (sql/schema/tables/history.sql): counts, and
 * histograms of wait and run times over fixed log-scale buckets, which
 * merge by adding (docs/operations.md, "History").  The worker counts in
 * memory per attempt and writes at its heartbeat, one statement for every
 * pair: the job's path pays a hash lookup and three increments.
 *
 * A kind is the application's to name: at most HISTORY_MAX_PAIRS distinct
 * pairs per worker and minute; any further kind of a queue counts as
 * (queue, "(other)"), so that a flood of kinds cannot grow the table.
 */
#ifndef PGJOBD_HISTORY_H
#define PGJOBD_HISTORY_H

#include <stddef.h>
#include <stdint.h>

/* Bucket 0: up to 1 ms; bucket i: up to 2^(i/2) ms; the last: longer
 * (pgjob.history_bound(), which counts from 1). */
#define HISTORY_BUCKETS	  55
#define HISTORY_MAX_PAIRS 200
#define HISTORY_OTHER	  "(other)"

struct history_pair {
	char *queue, *kind; /* NULL: a free place */
	int64_t done, failed, retried;
	uint32_t wait[HISTORY_BUCKETS], run[HISTORY_BUCKETS];
	uint32_t nwait, nrun; /* the observations in wait[], run[] */
};

struct history {
	struct history_pair *p; /* open addressing, HISTORY_SLOTS places */
	size_t n;		/* pairs in use */
	size_t named;		/* of them, not an "(other)" one */
	int64_t minute;		/* the minute its pairs were counted in */
};

/* The bucket of a time of ms milliseconds (< 0 counts as 0). */
int history_bucket(int64_t ms);

void history_init(struct history *h);
void history_free(struct history *h);

/* The pair (queue, kind), added if new: (queue, "(other)") once
 * HISTORY_MAX_PAIRS named pairs are in use.  Never NULL. */
struct history_pair *history_pair(struct history *h, const char *queue,
				  const char *kind);

/* Counts a wait or run time in the pair. */
void history_wait(struct history_pair *p, int64_t ms);
void history_run(struct history_pair *p, int64_t ms);

/* 1 when the pair has counted something since it was last taken. */
int history_pair_used(const struct history_pair *p);

/*
 * Moves what h counted into out (initialized, empty), which the caller
 * writes and frees; h's pairs stay, with zero counts, until the minute
 * now_minute differs from the one they were counted in (then they go, and
 * the cap counts afresh).  Returns how many pairs out holds; out->minute
 * is the minute they were counted in (h's, or now_minute for h's first
 * take), which the write stamps them with.
 */
size_t history_take(struct history *h, struct history *out, int64_t now_minute);

/* Adds back what a failed write took (from history_take()). */
void history_add_back(struct history *h, const struct history *from);

/* The pairs in use, in the order of the table's places: for i from 0,
 * history_at(h, &i) gives the next one, NULL at the end. */
struct history_pair *history_next(const struct history *h, size_t *i);

/* A histogram as the text of an integer[] ("{0,3,1}"), stopped at its
 * last bucket that is not zero ("{}" when none); buf of at least
 * HISTORY_TEXT bytes. */
#define HISTORY_TEXT (HISTORY_BUCKETS * 11 + 3)
void history_text(const uint32_t *b, char *buf);

#endif
