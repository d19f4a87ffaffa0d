/*
 * queue: the job statements of a worker's connection, prepared on it once
 * (claims, ends, renewals), and their texts for the tests of their plans.
 * Each has its own file: claim.c, claim_limited.c, finish.c, renew.c.
 * Every write after a claim is compare-and-set on lease_token.  Results
 * reach the caller in the project's own types, from the loop, once per
 * statement sent.
 */
#ifndef PGJOBD_QUEUE_H
#define PGJOBD_QUEUE_H

struct dbev;

/*
 * Prepares the claim, finish and renew statements on a new connection;
 * call it before any of them is sent.  serial and per_key: whether any
 * queue the claim asks for is in that mode (its branch is left out if not).
 */
void queue_prepare(struct dbev *d, int serial, int per_key);

/*
 * The text of a statement queue_prepare() prepares, by its name
 * (pgjob_claim with every mode's branch, pgjob_finish, pgjob_finish_delete,
 * their _range and _again forms, pgjob_renew), malloc'd, with *nparams
 * set; NULL for another name.  For tests of the plans it gets
 * (tests/integration/test_plans.c).
 */
char *queue_statement(const char *name, int *nparams);

#endif
