/*
 * gzip: the console's answers compressed for a browser that takes them
 * (docs/console.md, "Compression and caching"): which requests take gzip,
 * and a body compressed in memory, within a bound.
 */
#ifndef PGJOBD_WEB_GZIP_H
#define PGJOBD_WEB_GZIP_H

#include <stdbool.h>
#include <stddef.h>

/*
 * Bodies of at most this many bytes are compressed; a longer one goes as
 * it is.  Every body is whole in memory before it is sent (the API's are
 * bounded by their pages and API_DOC_MAX, the assets are the binary's), so
 * this bounds what compressing one adds: its deflateBound(), a little
 * more than the body.
 */
#define WEB_GZIP_MAX (8 * 1024 * 1024)

/*
 * true when an Accept-Encoding header value takes gzip: "gzip" (or
 * "x-gzip", or "*" without a gzip entry) with a q above 0, case aside.
 * NULL (no header) takes none: the body goes as it is.
 */
bool web_gzip_accepted(const char *accept_encoding);

/*
 * len bytes of in as a gzip stream (RFC 1952) at zlib's level (1 to 9)
 * into *out (caller frees), *out_len its length.  Returns 0, or -1 with
 * nothing allocated when len is over WEB_GZIP_MAX or zlib fails.
 */
int web_gzip(const void *in, size_t len, int level, unsigned char **out,
	     size_t *out_len);

/*
 * *body (*len bytes, malloc'd) gzip'd at level 6 in its place (the old one
 * freed) when the request's Accept-Encoding takes gzip and *len is from
 * min bytes: returns "gzip".  NULL when it stays as it is.
 */
const char *web_gzip_body(const char *accept_encoding, size_t min, char **body,
			  size_t *len);

#endif
