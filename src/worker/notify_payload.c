/*
 * notify_payload: the grammar of a NOTIFY pgjob payload (notify_payload.h).
 * A pure parse, apart from the worker's handling of the notification
 * (notify.c): any role may send one, so every byte is checked, and it is
 * unit-tested without a loop or a database.
 */
#include "worker/notify_payload.h"

#include <stddef.h>

/* A signed decimal of at most 18 digits at *p, then the end or a space. */
static int
notify_number(const char **p, long long *v)
{
	const char *s = *p;
	int neg = *s == '-', n = 0;
	long long x = 0;
	s += neg;
	for (; *s >= '0' && *s <= '9' && n < 18; s++, n++)
		x = x * 10 + (*s - '0');
	if (n == 0 || (*s && *s != ' '))
		return -1;
	*v = neg ? -x : x;
	*p = s;
	return 0;
}

int
notify_parse(const char *payload, uint64_t *xid, long long *due,
	     struct notify_key *key)
{
	const char *p = payload;
	uint64_t x = 0;
	long long d = 0, pr, ra;
	int nx = 0, nd = 0;

	key->known = 0;
	if (!p)
		return -1;
	for (; *p >= '0' && *p <= '9' && nx < 20; p++, nx++) {
		if (x > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
			return -1;
		x = x * 10 + (uint64_t)(*p - '0');
	}
	if (nx == 0 || *p++ != ' ')
		return -1;
	for (; *p >= '0' && *p <= '9'; p++, nd++)
		if (d < NOTIFY_MAX_DUE)
			d = d * 10 + (*p - '0');
	if (nd == 0 || (*p && *p != ' ') || d <= 0)
		return -1;
	if (*p == ' ') {
		p++;
		if (notify_number(&p, &pr) == 0 && *p == ' ' && pr >= -32768 &&
		    pr <= 32767) {
			p++;
			if (notify_number(&p, &ra) == 0 && !*p)
				*key = (struct notify_key){1, (int)pr, ra};
		}
	}
	*xid = x;
	*due = d < NOTIFY_MAX_DUE ? d : NOTIFY_MAX_DUE;
	return 0;
}
