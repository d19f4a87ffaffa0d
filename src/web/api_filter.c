/*
 * api_filter: the filter of the console's jobs.  See api_filter.h.
 */
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "web/api_filter.h"
#include "web/api_response.h"

/* The text search: characters at most. */
#define Q_MAX 200

/* The keys of a filter, as /api/jobs takes them. */
static const char *const filter_keys[] = {
	"state", "queue",     "kind",	      "q",	  "from",
	"to",	 "limit_key", "ordering_key", "workflow",
};

/* The states of a job, and two filters of available jobs: "scheduled"
 * (due later) and "retrying" (due again after a failed attempt). */
static const char *const states[] = {"waiting",	  "available", "running",
				     "done",	  "dead",      "cancelled",
				     "scheduled", "retrying"};
#define N_STATES (sizeof(states) / sizeof(states[0]))

/*
 * Refuses a filter of an action with a key that is not a filter's, or a
 * value that is not a string (or null): ignored, a misspelt "kinds" or a
 * workflow given as a number would widen a bulk delete to every job.
 * Returns 0, or -1 after filling out with a 400.
 */
int
api_filter_strict(const cJSON *fo, struct web_response *out)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, fo)
	{
		size_t i = 0, n = sizeof(filter_keys) / sizeof(filter_keys[0]);
		while (i < n && strcmp(it->string, filter_keys[i]) != 0)
			i++;
		if (i == n || !(cJSON_IsString(it) || cJSON_IsNull(it))) {
			char *msg = xasprintf(
				"filter: %s \"%s\" (the keys of /api/jobs, "
				"each a string)",
				i == n ? "unknown key" : "not a string:",
				it->string);
			web_response_error(out, 400, msg);
			free(msg);
			return -1;
		}
	}
	return 0;
}

/* A string member of a JSON object, or NULL. */
const char *
api_json_get(void *ctx, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(ctx, key);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Reads the filter; 0, or -1 after filling out with a 400. */
int
api_filter_read(struct filter *f, api_filter_getter *get, void *ctx,
		struct web_response *out)
{
	const char **slot[] = {&f->state,     &f->queue,	&f->kind,
			       &f->q,	      &f->from,		&f->to,
			       &f->limit_key, &f->ordering_key, &f->workflow};
	memset(f, 0, sizeof(*f));
	for (size_t i = 0; i < sizeof(filter_keys) / sizeof(filter_keys[0]);
	     i++) {
		const char *v = get(ctx, filter_keys[i]);
		/* An empty field of the page's form is no filter. */
		*slot[i] = v && *v ? v : NULL;
	}
	if (f->state) {
		size_t i = 0;
		while (i < N_STATES && strcmp(f->state, states[i]) != 0)
			i++;
		if (i == N_STATES) {
			web_response_error(out, 400,
					   "state: one of waiting, available, "
					   "running, done, dead, cancelled, "
					   "scheduled, retrying");
			return -1;
		}
	}
	if (f->q && strlen(f->q) > Q_MAX) {
		web_response_error(out, 400, "q: at most 200 bytes");
		return -1;
	}
	if (f->workflow && api_parse_id(f->workflow, f->workflow_id,
					sizeof(f->workflow_id)) < 0) {
		web_response_error(out, 400, "workflow: not a workflow id");
		return -1;
	}
	return 0;
}

/*
 * Refuses a from or to that is not a time, with words of its own: the
 * database's "invalid input syntax for type timestamp with time zone"
 * names neither the field nor the form it takes.  0, or -1 (out filled).
 */
int
api_filter_times(struct db_conn *db, const struct filter *f,
		 struct web_response *out)
{
	const char *p[] = {f->from, f->to};
	char *err = NULL;
	if (!f->from && !f->to)
		return 0;
	struct db_rows *res = db_query(
		db, "select $1::timestamptz, $2::timestamptz", 2, p, &err);
	if (res) {
		db_rows_free(res);
		return 0;
	}
	/* Class 22, data exception: the value, not the database. */
	if (strncmp(err, "22", 2) == 0)
		web_response_error(out, 400,
				   "from, to: a date and time, as "
				   "2026-01-31T14:00:00Z or 2026-01-31 14:00");
	else
		api_fail(db, out, err);
	free(err);
	return -1;
}

/* The filter as parameters $1 to $9 of p. */
void
api_filter_params(const struct filter *f, const char **p)
{
	p[0] = f->state;
	p[1] = f->queue;
	p[2] = f->kind;
	p[3] = f->q;
	p[4] = f->from;
	p[5] = f->to;
	p[6] = f->limit_key;
	p[7] = f->ordering_key;
	p[8] = f->workflow ? f->workflow_id : NULL;
}

/* 1 for the states whose jobs jobs_claim_idx holds, available and running
 * alike (and the two filters of available jobs). */
int
api_filter_open_state(const struct filter *f)
{
	return f->state && (strcmp(f->state, "available") == 0 ||
			    strcmp(f->state, "running") == 0 ||
			    strcmp(f->state, "scheduled") == 0 ||
			    strcmp(f->state, "retrying") == 0);
}

/*
 * Whether a page of n jobs in an open state is found sooner in windows of
 * ids, newest first, than along jobs_claim_idx whole: that index holds
 * the available and running jobs alike and in the claim's order, so
 * reading it for one state, newest first, reads every row it holds (a
 * backlog of a million: seconds).  Windows read about n / density ids,
 * where density is the state's share of the span of ids; the index about
 * as many rows as it holds.  Both from the statistics (the state's most
 * common values are exact enough; scheduled and retrying jobs are counted
 * as available, which errs towards windows, whose reads are bounded
 * anyway).  1 for windows, 0 for the index, -1 (out filled).
 */
int
api_filter_windows_sooner(struct db_conn *db, const struct filter *f,
			  long long span, long n, struct web_response *out)
{
	const char *base =
		strcmp(f->state, "running") == 0 ? "running" : "available";
	const char *p[] = {base, f->queue};
	double state = api_plan_rows(db, out,
				     "explain (format json) select 1"
				     " from pgjob.jobs where state = $1"
				     " and ($2::text is null or queue = $2)",
				     2, p);
	if (state < -1)
		return -1;
	double open = api_plan_rows(db, out,
				    "explain (format json) select 1"
				    " from pgjob.jobs"
				    " where state in ('available', 'running')"
				    " and ($1::text is null or queue = $1)",
				    1, p + 1);
	if (open < -1)
		return -1;
	/* The planner's least is one row: no statistics, or none match. */
	if (state <= 1 || open <= 1)
		return 0;
	return (double)n * (double)span / state < open;
}

int
api_filter_indexed(const struct filter *f)
{
	if (f->q || f->kind || f->from || f->to || f->limit_key ||
	    f->ordering_key)
		return 0;
	if (f->workflow)
		return 1;
	return f->state && strcmp(f->state, "done") != 0 &&
	       strcmp(f->state, "cancelled") != 0;
}
