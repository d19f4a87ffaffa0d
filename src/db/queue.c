/*
 * queue: the job statements a worker prepares on each new connection, so
 * that each is parsed and planned once per connection, not once per batch:
 * the claim (claim.c), the six forms of the finish (finish.c), the
 * renewal (renew.c), the limited claim (claim_limited.c); and their texts
 * by name, for the tests of their plans.
 */
#include "db/queue.h"

#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "db/claim.h"
#include "db/claim_limited.h"
#include "db/finish.h"
#include "db/internal.h"
#include "db/renew.h"

/* The finish's six forms (finish.c). */
static const char *const finishes[] = {
	"pgjob_finish",	      "pgjob_finish_delete",
	"pgjob_finish_range", "pgjob_finish_delete_range",
	"pgjob_finish_again", "pgjob_finish_delete_again"};

char *
queue_statement(const char *name, int *nparams)
{
	if (strcmp(name, "pgjob_claim") == 0)
		return queue_claim_sql(1, 1, nparams);
	char *finish = queue_finish_sql(name, nparams);
	if (finish)
		return finish;
	*nparams = QUEUE_RENEW_NPARAMS;
	if (strcmp(name, "pgjob_renew") == 0)
		return xstrdup(queue_renew_sql);
	*nparams = 0;
	return NULL;
}

void
queue_prepare(struct dbev *d, int serial, int per_key)
{
	/* A branch no queue of the worker's uses still costs every claim
	 * its executor's start and end: only the ones used go in. */
	int nclaim;
	char *claim = queue_claim_sql(serial, per_key, &nclaim);
	for (size_t i = 0; i < sizeof(finishes) / sizeof(finishes[0]); i++) {
		int n;
		char *sql = queue_finish_sql(finishes[i], &n);
		dbev_prepare(d, finishes[i], sql, n);
		free(sql);
	}
	dbev_prepare(d, "pgjob_claim", claim, nclaim);
	dbev_prepare(d, "pgjob_renew", queue_renew_sql, QUEUE_RENEW_NPARAMS);
	dbev_prepare(d, "pgjob_claim_limited", queue_claim_limited_sql,
		     QUEUE_CLAIM_LIMITED_NPARAMS);
	free(claim);
}
