/*
 * api_filter: the filter of the console's jobs (/api/jobs, /api/jobs/count
 * and an action on a filter's matches, api_jobs.c): its keys read from a
 * query string or a JSON object, checked, and as parameters $1 to $9 of
 * FILTER_WHERE.
 */
#ifndef PGJOBD_WEB_API_FILTER_H
#define PGJOBD_WEB_API_FILTER_H

#include <cjson/cJSON.h>

#include "db/db.h"
#include "web/api.h"

/* The filter of /api/jobs, /api/jobs/count and an action on a filter:
 * each NULL when not given (borrowed from the request). */
struct filter {
	const char *state, *queue, *kind, *q, *from, *to, *limit_key,
		*ordering_key, *workflow;
	char workflow_id[24];
};

/* The filter's terms, parameters $1 to $9.  libpq plans an unnamed
 * statement with its values, so a term whose value is null folds away,
 * and a state brings the predicate of the partial index that holds its
 * jobs (schema 27: none names the state, so the state alone implies
 * none): jobs_claim_idx, jobs_waiting_idx, jobs_dead_idx.  Dead jobs are
 * "dead" alone, not "state = 'dead'" too: the column jobs_dead_idx's
 * predicate is on, so that a count of them reads that index only, never
 * the rows (a state is in no index). */
#define FILTER_WHERE FILTER_STATE FILTER_OPEN FILTER_TERMS
/*
 * The same for a read of a range of ids (id < $10 and id >= $11, windows
 * of api_jobs.c): without the open jobs' index predicate, which adds
 * nothing (a job available or running is unfinished and has no parent
 * left: jobs_finished_check, jobs_waiting_check) but lets the planner walk
 * jobs_claim_idx whole for a range of its last column, misled by the
 * default selectivity of coalesce(parents_left, 0) = 0 into expecting a
 * few hundred rows of a million: the primary key's range it is.
 */
#define FILTER_WHERE_RANGE FILTER_STATE FILTER_TERMS
#define FILTER_STATE                                                           \
	" ($1::text is null or (state = $1 and $1 <> 'dead')"                  \
	"  or ($1 = 'dead' and dead)"                                          \
	"  or ($1 in ('scheduled', 'retrying') and state = 'available'"        \
	"   and ($1 <> 'scheduled' or run_at > now())"                         \
	"   and ($1 <> 'retrying' or attempts > 0)))"
#define FILTER_OPEN                                                            \
	" and ($1::text is null"                                               \
	"  or $1 not in ('available', 'running', 'scheduled', 'retrying')"     \
	"  or (finished_at is null and coalesce(parents_left, 0) = 0))"
#define FILTER_TERMS                                                           \
	" and ($1::text is distinct from 'waiting'"                            \
	"  or (finished_at is null and parents_left > 0))"                     \
	" and ($1::text is distinct from 'dead' or dead)"                      \
	" and ($2::text is null or queue = $2)"                                \
	" and ($3::text is null or kind = $3)"                                 \
	" and ($4::text is null"                                               \
	"  or strpos(lower(payload::text), lower($4)) > 0"                     \
	"  or strpos(lower(last_error), lower($4)) > 0)"                       \
	" and ($5::timestamptz is null or created_at >= $5::timestamptz)"      \
	" and ($6::timestamptz is null or created_at < $6::timestamptz)"       \
	" and ($7::text is null or limit_key = $7)"                            \
	" and ($8::text is null or ordering_key = $8)"                         \
	" and ($9::bigint is null or workflow_id = $9::bigint)"

/* Where a filter's keys come from: a query string or a JSON object. */
typedef const char *api_filter_getter(void *ctx, const char *key);

/* Refuses a filter of an action with a key that is not a filter's, or a
 * value that is not a string (or null).  0, or -1 (out filled: 400). */
int api_filter_strict(const cJSON *fo, struct web_response *out);
/* A string member of the JSON object ctx, or NULL: a getter. */
const char *api_json_get(void *ctx, const char *key);
/* Reads the filter; 0, or -1 (out filled: 400). */
int api_filter_read(struct filter *f, api_filter_getter *get, void *ctx,
		    struct web_response *out);
/* Refuses a from or to that is not a time; 0, or -1 (out filled). */
int api_filter_times(struct db_conn *db, const struct filter *f,
		     struct web_response *out);
/* The filter as parameters $1 to $9 of p. */
void api_filter_params(const struct filter *f, const char **p);
/* 1 when a partial index serves the filter: waiting, available,
 * running, dead jobs (of a queue, or all), a workflow's, with no other
 * term (see the top of api_jobs.c). */
int api_filter_indexed(const struct filter *f);
/* 1 when the filter's state is one whose jobs jobs_claim_idx holds
 * (available, running, scheduled, retrying). */
int api_filter_open_state(const struct filter *f);
/*
 * For such a state: 1 when a page of n jobs is found sooner in windows of
 * ids (span of them below the cursor) than along that index whole, by
 * the statistics; 0 for the index; -1 (out filled).  api_filter.c says
 * how.
 */
int api_filter_windows_sooner(struct db_conn *db, const struct filter *f,
			      long long span, long n, struct web_response *out);

#endif
