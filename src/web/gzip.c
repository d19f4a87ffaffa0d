/*
 * gzip: see gzip.h.
 */
#include "web/gzip.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <zlib.h>

#include "common/util.h"

/* The q of one coding's parameters (";q=0.5"): 0 for q=0, 0.0, 0.00 or
 * 0.000, else 1 (only "refused or not" matters here). */
static int
q_positive(const char *p, const char *end)
{
	while (p < end) {
		while (p < end && (*p == ';' || *p == ' ' || *p == '\t'))
			p++;
		if (end - p >= 2 && (p[0] == 'q' || p[0] == 'Q') &&
		    p[1] == '=') {
			p += 2;
			if (p < end && *p == '1')
				return 1;
			if (p < end && *p == '0')
				p++;
			if (p < end && *p == '.')
				p++;
			while (p < end && *p == '0')
				p++;
			/* Anything but zeros up to the next parameter. */
			return p < end && *p != ';' && *p != ' ' && *p != '\t';
		}
		while (p < end && *p != ';')
			p++;
	}
	return 1;
}

bool
web_gzip_accepted(const char *ae)
{
	int gzip = -1, star = -1; /* -1 unnamed, 0 refused, 1 taken */
	const char *p = ae;

	while (p && *p) {
		const char *end = strchr(p, ',');
		if (!end)
			end = p + strlen(p);
		while (p < end && (*p == ' ' || *p == '\t'))
			p++;
		const char *name = p;
		while (p < end && *p != ';' && *p != ' ' && *p != '\t')
			p++;
		size_t n = (size_t)(p - name);
		int q = q_positive(p, end);
		if ((n == 4 && strncasecmp(name, "gzip", 4) == 0) ||
		    (n == 6 && strncasecmp(name, "x-gzip", 6) == 0))
			gzip = gzip == 0 ? 0 : q;
		else if (n == 1 && *name == '*')
			star = q;
		p = *end ? end + 1 : end;
	}
	return gzip == 1 || (gzip == -1 && star == 1);
}

int
web_gzip(const void *in, size_t len, int level, unsigned char **out,
	 size_t *out_len)
{
	z_stream z = {0};

	if (len > WEB_GZIP_MAX)
		return -1;
	/* 15 window bits, +16: a gzip header and trailer, not zlib's. */
	if (deflateInit2(&z, level, Z_DEFLATED, 15 + 16, 8,
			 Z_DEFAULT_STRATEGY) != Z_OK)
		return -1;
	size_t cap = deflateBound(&z, (uLong)len);
	unsigned char *buf = xmalloc(cap);
	z.next_in = (Bytef *)(uintptr_t)in;
	z.avail_in = (uInt)len;
	z.next_out = buf;
	z.avail_out = (uInt)cap;
	/* deflateBound() is room for the whole stream: one call ends it. */
	int rc = deflate(&z, Z_FINISH);
	*out_len = cap - z.avail_out;
	deflateEnd(&z);
	if (rc != Z_STREAM_END) {
		free(buf);
		return -1;
	}
	*out = buf;
	return 0;
}

const char *
web_gzip_body(const char *accept_encoding, size_t min, char **body, size_t *len)
{
	unsigned char *z;
	size_t n;

	if (*len < min || !web_gzip_accepted(accept_encoding) ||
	    web_gzip(*body, *len, 6, &z, &n) < 0)
		return NULL;
	free(*body);
	*body = (char *)z;
	*len = n;
	return "gzip";
}
