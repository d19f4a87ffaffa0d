/*
 * assets: finding an embedded asset by its path, its ETag and its gzip'd
 * bytes.  The table itself is generated (cmake/embed_assets.cmake writes
 * web_assets.c in the build folder).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "common/util.h"
#include "web/assets.h"
#include "web/gzip.h"

/*
 * What web_assets_prepare() adds to each asset, in web_assets[]'s order.
 * The ETag is the first 128 bits of the SHA-256 of the bytes: a build
 * that changes an asset changes its tag, and with Cache-Control: no-cache
 * the browser asks again at each load and sees the new one at once, while
 * an unchanged asset costs a 304 and no body.
 */
struct prepared {
	char etag[40];	     /* "\"<32 hex>\"" */
	char etag_gzip[48];  /* "\"<32 hex>-gzip\"" */
	unsigned char *gzip; /* NULL when gzip does not make it smaller */
	size_t gzip_len;
};
static struct prepared *prepared;

void
web_assets_prepare(void)
{
	size_t n = 0;

	while (web_assets[n].path)
		n++;
	prepared = xcalloc(n ? n : 1, sizeof(*prepared));
	for (size_t i = 0; i < n; i++) {
		const struct web_asset *a = &web_assets[i];
		struct prepared *p = &prepared[i];
		unsigned char md[EVP_MAX_MD_SIZE];
		char hex[33];
		unsigned int mdlen = 0;

		if (!EVP_Digest(a->data, a->len, md, &mdlen, EVP_sha256(),
				NULL))
			abort(); /* SHA-256 of bytes in memory cannot fail */
		for (size_t k = 0; k < 16; k++)
			snprintf(hex + 2 * k, 3, "%02x", md[k]);
		snprintf(p->etag, sizeof(p->etag), "\"%s\"", hex);
		snprintf(p->etag_gzip, sizeof(p->etag_gzip), "\"%s-gzip\"",
			 hex);
		/* Once, so the best compression costs nothing per request. */
		if (web_gzip(a->data, a->len, 9, &p->gzip, &p->gzip_len) == 0 &&
		    p->gzip_len >= a->len) {
			free(p->gzip);
			p->gzip = NULL;
		}
	}
}

void
web_assets_free(void)
{
	if (!prepared)
		return;
	for (size_t i = 0; web_assets[i].path; i++)
		free(prepared[i].gzip);
	free(prepared);
	prepared = NULL;
}

const struct web_asset *
web_asset_find(const char *path)
{
	if (strcmp(path, "/") == 0)
		path = "/index.html";
	for (const struct web_asset *a = web_assets; a->path; a++)
		if (strcmp(a->path, path) == 0)
			return a;
	return NULL;
}

/* true when the entity tag at s, of n bytes (quotes included, a W/ prefix
 * not), is tag. */
static bool
same_tag(const char *s, size_t n, const char *tag)
{
	return n == strlen(tag) && memcmp(s, tag, n) == 0;
}

/* true when If-None-Match's value inm names p's content. */
static bool
unchanged(const struct prepared *p, const char *inm)
{
	const char *s = inm;

	/* A list of entity tags, compared weakly (RFC 9110, 13.1.2): a
	 * browser may send either encoding's tag for the same bytes. */
	while (s && *s) {
		while (*s == ' ' || *s == '\t' || *s == ',')
			s++;
		if (*s == '*')
			return true;
		if (strncmp(s, "W/", 2) == 0)
			s += 2;
		if (*s != '"')
			return false; /* not an entity tag: no match */
		const char *end = strchr(s + 1, '"');
		if (!end)
			return false;
		size_t n = (size_t)(end - s) + 1;
		if (same_tag(s, n, p->etag) || same_tag(s, n, p->etag_gzip))
			return true;
		s = end + 1;
	}
	return false;
}

int
web_asset_answer(const struct web_asset *a, const char *accept_encoding,
		 const char *if_none_match, struct web_asset_body *out)
{
	const struct prepared *p = &prepared[a - web_assets];
	bool gzip = p->gzip && web_gzip_accepted(accept_encoding);

	*out = (struct web_asset_body){a->data, a->len, NULL, p->etag};
	if (gzip)
		*out = (struct web_asset_body){p->gzip, p->gzip_len, "gzip",
					       p->etag_gzip};
	if (unchanged(p, if_none_match)) {
		/* Headers only; no Content-Encoding for no body. */
		out->data = (const unsigned char *)"";
		out->len = 0;
		out->encoding = NULL;
		return 304;
	}
	return 200;
}
