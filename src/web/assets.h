/*
 * assets: the web console's page (src/web/assets/: index.html, app.css and
 * the ES modules app.js imports), compiled into the binary by
 * cmake/embed_assets.cmake, so that `pgjob web` serves it without reading
 * a file or fetching anything at run time.  Each is served with an ETag,
 * a hash of its bytes, and gzip'd once at start for the browsers that
 * take it (docs/console.md, "Compression and caching").
 */
#ifndef PGJOBD_WEB_ASSETS_H
#define PGJOBD_WEB_ASSETS_H

#include <stdbool.h>
#include <stddef.h>

struct web_asset {
	const char *path;	  /* "/app.js" */
	const char *content_type; /* "text/javascript; charset=utf-8" */
	const unsigned char *data;
	size_t len;
};

/* Every asset, ended by an entry whose path is NULL (the generated
 * web_assets.c). */
extern const struct web_asset web_assets[];

/* What is sent for an asset: its bytes as they are or gzip'd. */
struct web_asset_body {
	const unsigned char *data; /* borrowed until web_assets_free() */
	size_t len;
	const char *encoding; /* "gzip", or NULL for the bytes as they are */
	const char *etag;     /* "\"<hash>\"", "\"<hash>-gzip\"" for gzip */
};

/*
 * Hashes and compresses every asset, once, before the server's threads
 * start (and web_assets_free() after they stopped).
 */
void web_assets_prepare(void);
void web_assets_free(void);

/*
 * The asset served at path ("/" is "/index.html"), or NULL.  Borrowed:
 * static for the process's life.
 */
const struct web_asset *web_asset_find(const char *path);

/*
 * The answer for a to a request with these Accept-Encoding and
 * If-None-Match header values (each NULL when absent): 304 with no bytes
 * when the browser's copy is a's current content (either encoding's ETag,
 * weak or strong, or "*"), else 200 with a's bytes, gzip'd when the
 * request takes gzip and that is smaller.  out->etag is set either way.
 */
int web_asset_answer(const struct web_asset *a, const char *accept_encoding,
		     const char *if_none_match, struct web_asset_body *out);

#endif
