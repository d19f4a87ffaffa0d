/*
 * pgtext: what PostgreSQL will store.  A handler's output becomes a job's
 * last_error (a text column: valid UTF-8 without NUL) or its result (a
 * jsonb value): text that PostgreSQL would refuse must never fail the
 * statement that ends the job.
 */
#ifndef PGJOBD_PGTEXT_H
#define PGJOBD_PGTEXT_H

#include <stddef.h>

/*
 * Replaces every byte that is not part of valid UTF-8, and every NUL, with
 * '?', in place over s[0..len), so the text can go into a PostgreSQL text
 * column.  Leading UTF-8 continuation bytes (a character cut in half by a
 * tail) are replaced too.
 */
void pgtext_sanitize(char *s, size_t len);
/*
 * True when s[0..len) is JSON text that PostgreSQL's jsonb input accepts:
 * RFC 8259 (no raw control characters in strings, JSON whitespace only),
 * valid UTF-8 without NUL, no \u0000 or unpaired surrogate escape, numbers
 * that numeric can hold.  Nesting deeper than the server's stack allows is
 * not checked.
 */
int pgtext_is_jsonb(const char *s, size_t len);

#endif
