/*
 * history: a worker's write of what it ended per (queue, kind) into the
 * row of the current minute of pgjob.history_minutes
 * (sql/schema/tables/history.sql), and the pruning duty's rollup.
 */
#ifndef PGJOBD_DB_HISTORY_H
#define PGJOBD_DB_HISTORY_H

struct dbev;
struct db_status;
struct history;

typedef void history_done_fn(void *arg, const struct db_status *st);

/* Adds every pair of h (read now, not kept) to its row of the current
 * minute: one statement, the pairs in the order of their names, so that
 * two workers' writes lock the rows they share in the same order. */
int history_write(struct dbev *d, const struct history *h, history_done_fn *cb,
		  void *arg);
/* The same, at once, on the connection under d, which must have nothing
 * pending (a worker's clean exit); best effort. */
void history_write_now(struct dbev *d, const struct history *h);
/* pgjob.history_prune(): the minutes past 24 hours rolled up to hours, the
 * hours past 30 days deleted; cb gets how many minute rows went. */
typedef void history_pruned_fn(void *arg, const struct db_status *st,
			       long long n);
int history_prune(struct dbev *d, history_pruned_fn *cb, void *arg);

#endif
