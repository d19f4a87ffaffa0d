/*
 * size: the one grammar of byte sizes, for the config (an exec handler's
 * limits: memory and file_size).
 *
 *   <digits>[<unit>]   unit: B, KiB, MiB, GiB or TiB (powers of 1024);
 *                      none: bytes
 *
 * No fractions and no decimal units (KB, MB): a limit is exact, and
 * "1GB" read as 10^9 or 2^30 would be a guess.
 */
#ifndef PGJOBD_SIZE_H
#define PGJOBD_SIZE_H

#include <stddef.h>
#include <stdint.h>

/* The largest size accepted: 1 PiB, far past any address space. */
#define SIZE_MAX_BYTES ((int64_t)1 << 50)

/*
 * Parses s into *bytes.  Returns 0, or -1 with *why (may be NULL) set to a
 * static reason: "empty", "negative", "not a number", "unknown unit (use
 * B, KiB, MiB, GiB or TiB)" or "too large".
 */
int size_parse(const char *s, int64_t *bytes, const char **why);

/* The shortest exact spelling of bytes: "512MiB", "1GiB", "1000B".  Writes
 * into buf (at least SIZE_LEN bytes) and returns it. */
#define SIZE_LEN 32
const char *size_format(int64_t bytes, char *buf, size_t len);

#endif
