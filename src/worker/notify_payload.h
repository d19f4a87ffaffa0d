/*
 * notify_payload: the payload of a NOTIFY pgjob, as the trigger
 * pgjob.jobs_notify() writes it.  Apart from the worker's other headers: a
 * pure parse, with no loop (tests/unit/test_notify_payload.c).
 */
#ifndef PGJOBD_NOTIFY_PAYLOAD_H
#define PGJOBD_NOTIFY_PAYLOAD_H

#include <stdint.h>

/* The most due jobs a notification is believed to announce. */
#define NOTIFY_MAX_DUE 1000000

/* Where the earliest of a notification's jobs sorts in its queue's index:
 * its priority, and the earliest run_at of that priority (microseconds
 * since the epoch).  known: 0 when the payload did not say. */
struct notify_key {
	int known;
	int priority;
	int64_t run_at_us;
};

/*
 * Reads a NOTIFY payload of the trigger pgjob.jobs_notify(): "<transaction
 * id> <due jobs>", two decimal numbers, then, since schema 17, " <priority>
 * <run_at µs>".  Returns 0 with *xid and *due (capped at NOTIFY_MAX_DUE)
 * and *key set, or -1 for anything else (an empty payload, from pgjob
 * retry; or one that any role can send: NOTIFY needs no privilege).  A
 * tail that is not two such numbers leaves key->known 0.
 */
int notify_parse(const char *payload, uint64_t *xid, long long *due,
		 struct notify_key *key);

#endif
