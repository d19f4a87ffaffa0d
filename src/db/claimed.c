/*
 * claimed: the answer of either claim (claim.c, claim_limited.c), read
 * into the project's types: the jobs taken ('c' rows), where each queue's
 * parallel branch stopped ('p'), what each said of its queue's flow
 * control ('l', 'u', 'w') and the sweep tickets granted ('s').  Apart from
 * the claims: both statements answer in these rows.
 */
#include "db/claimed.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/job.h"
#include "common/trace.h"
#include "common/util.h"
#include "db/db.h"
#include "db/internal.h"

/* Column col of row i, in us, at least 0; -1 when null. */
static int64_t
us_before(const PGresult *res, int i, int col)
{
	if (PQgetisnull(res, i, col))
		return -1;
	long long v = strtoll(PQgetvalue(res, i, col), NULL, 10);
	return v > 0 ? v : 0;
}

/* The claimed jobs of a claim's result, as new structs. */
static struct job **
claimed_jobs(const PGresult *res, int *n)
{
	int rows = PQntuples(res);
	struct job **jobs = xcalloc((size_t)rows + 1, sizeof(*jobs));
	*n = 0;
	for (int i = 0; i < rows; i++) {
		if (*PQgetvalue(res, i, 0) != 'c')
			continue;
		struct job *j = xcalloc(1, sizeof(*j));
		j->id = strtoll(PQgetvalue(res, i, 1), NULL, 10);
		j->kind = xstrdup(PQgetvalue(res, i, 2));
		j->queue = xstrdup(PQgetvalue(res, i, 3));
		if (!PQgetisnull(res, i, 4))
			j->payload = xstrdup(PQgetvalue(res, i, 4));
		j->attempt = atoi(PQgetvalue(res, i, 5));
		j->max_attempts = atoi(PQgetvalue(res, i, 6));
		j->lease_token = strtoll(PQgetvalue(res, i, 7), NULL, 10);
		if (!PQgetisnull(res, i, 8))
			j->ordering_key = xstrdup(PQgetvalue(res, i, 8));
		/* The plain claim's 'c' rows: 1 for a job with children. */
		j->parent = !PQgetisnull(res, i, 9);
		j->lost_attempts = atoi(PQgetvalue(res, i, 11));
		/* NULL: over the limit, not sent (payload_bytes says how
		 * big). */
		j->payload_bytes = strtoll(PQgetvalue(res, i, 12), NULL, 10);
		j->wait_ms =
			PQgetisnull(res, i, 13)
				? -1
				: strtoll(PQgetvalue(res, i, 13), NULL, 10);
		if (!PQgetisnull(res, i, 14)) {
			j->trace = xstrdup(PQgetvalue(res, i, 14));
			trace_attempt(j->trace, j->traceparent);
		}
		/* Never below 0: a limited claim's now() is its statement's
		 * start, which a job enqueued meanwhile can follow. */
		j->enqueued_us = us_before(res, i, 15);
		j->waited_us = us_before(res, i, 16);
		jobs[(*n)++] = j;
	}
	return jobs;
}

/* The queues of the request (c->names) sorted by name, with their place in
 * it: a row's queue is found by a binary search, not by a walk of every
 * queue asked for, for every job (a worker can serve a thousand). */
struct named {
	const char *name;
	size_t k;
};

static int
named_cmp(const void *a, const void *b)
{
	return strcmp(((const struct named *)a)->name,
		      ((const struct named *)b)->name);
}

static struct named *
names_sorted(const struct db_call *c)
{
	struct named *s = xcalloc(c->n + 1, sizeof(*s));
	for (size_t k = 0; k < c->n; k++)
		s[k] = (struct named){c->names[k], k};
	qsort(s, c->n, sizeof(*s), named_cmp);
	return s;
}

/* The place of queue q in the request, or c->n if it is not there. */
static size_t
name_find(const struct db_call *c, const struct named *s, const char *q)
{
	struct named key = {q, 0};
	const struct named *f = bsearch(&key, s, c->n, sizeof(*s), named_cmp);
	return f ? f->k : c->n;
}

/* Per queue asked for, the position of the last job its parallel branch
 * took ('p' rows name the queue). */
static void
claimed_positions(const PGresult *res, const struct db_call *c,
		  const struct named *s, struct queue_position *pos, bool *has)
{
	for (int i = 0; i < PQntuples(res); i++) {
		if (*PQgetvalue(res, i, 0) != 'p')
			continue;
		size_t k = name_find(c, s, PQgetvalue(res, i, 3));
		if (k == c->n || has[k])
			continue;
		snprintf(pos[k].priority, sizeof(pos[k].priority), "%s",
			 PQgetvalue(res, i, 9));
		snprintf(pos[k].run_at, sizeof(pos[k].run_at), "%s",
			 PQgetvalue(res, i, 10));
		snprintf(pos[k].id, sizeof(pos[k].id), "%s",
			 PQgetvalue(res, i, 1));
		has[k] = true;
	}
}

static const char *const wait_names[QUEUE_WAIT_N] = {
	[QUEUE_WAIT_PAUSED] = "paused",
	[QUEUE_WAIT_THROTTLED] = "throttled",
	[QUEUE_WAIT_CONCURRENCY] = "concurrency",
	[QUEUE_WAIT_RATE] = "rate",
	[QUEUE_WAIT_KEY_CONCURRENCY] = "key_concurrency",
	[QUEUE_WAIT_KEY_RATE] = "key_rate",
	[QUEUE_WAIT_BUSY] = "busy",
};

const char *
queue_wait_name(enum queue_wait w)
{
	return w < QUEUE_WAIT_N ? wait_names[w] : "?";
}

/* Per queue asked for, what the 'l', 'u' and 'w' rows say of its flow
 * control (kind: why; pr... ra: the retry in ms). */
static void
claimed_flow(const PGresult *res, const struct db_call *c,
	     const struct named *s, struct queue_flow_said *flow)
{
	for (int i = 0; i < PQntuples(res); i++) {
		char t = *PQgetvalue(res, i, 0);
		if (t != 'l' && t != 'u' && t != 'w')
			continue;
		size_t k = name_find(c, s, PQgetvalue(res, i, 3));
		if (k == c->n)
			continue;
		struct queue_flow_said *f = &flow[k];
		f->flow = t == 'l'   ? QUEUE_FLOW_LIMITED
			  : t == 'u' ? QUEUE_FLOW_UNLIMITED
				     : QUEUE_FLOW_WAIT;
		f->why = QUEUE_WAIT_BUSY;
		for (int w = 0; w < QUEUE_WAIT_N; w++)
			if (strcmp(PQgetvalue(res, i, 2), wait_names[w]) == 0)
				f->why = (enum queue_wait)w;
		f->retry_ms =
			PQgetisnull(res, i, 10)
				? -1
				: strtoll(PQgetvalue(res, i, 10), NULL, 10);
	}
}

/* The sweep tickets the claim was granted ('s' rows): ticket[k] for queue k
 * of the request. */
static void
claimed_tickets(const PGresult *res, const struct db_call *c,
		const struct named *s, bool *ticket)
{
	for (int i = 0; i < PQntuples(res); i++) {
		if (*PQgetvalue(res, i, 0) != 's')
			continue;
		size_t k = name_find(c, s, PQgetvalue(res, i, 3));
		if (k < c->n)
			ticket[k] = true;
	}
}

void
queue_claimed_read_turn(const struct db_call *c, const struct db_status *st,
			const PGresult *res, int turn_wait_ms)
{
	struct queue_position *pos = xcalloc(c->n + 1, sizeof(*pos));
	bool *has = xcalloc(c->n + 1, sizeof(bool));
	struct queue_flow_said *flow = xcalloc(c->n + 1, sizeof(*flow));
	bool *ticket = xcalloc(c->n + 1, sizeof(bool));
	struct queue_claimed out = {.pos = pos,
				    .has_pos = has,
				    .flow = flow,
				    .ticket = ticket,
				    .turn_wait_ms = turn_wait_ms};
	int *queue_of = NULL;
	if (st->error == DB_OK) {
		struct named *s = names_sorted(c);
		out.jobs = claimed_jobs(res, &out.njobs);
		claimed_positions(res, c, s, pos, has);
		claimed_flow(res, c, s, flow);
		claimed_tickets(res, c, s, ticket);
		queue_of = xcalloc((size_t)out.njobs + 1, sizeof(int));
		for (int i = 0; i < out.njobs; i++) {
			size_t k = name_find(c, s, out.jobs[i]->queue);
			queue_of[i] = k < c->n ? (int)k : -1;
		}
		free(s);
	}
	out.queue_of = queue_of;
	((queue_claim_fn *)c->cb)(c->arg, st, &out);
	free(queue_of);
	free(out.jobs);
	free(pos);
	free(has);
	free(flow);
	free(ticket);
}

void
queue_claimed_read(const struct db_call *c, const struct db_status *st,
		   const PGresult *res)
{
	queue_claimed_read_turn(c, st, res, -1);
}
