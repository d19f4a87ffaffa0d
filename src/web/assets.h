/*
 * assets: the web console's page (src/web/assets/: index.html, app.js,
 * app.css), compiled into the binary by cmake/embed_assets.cmake, so that
 * `pgjob web` serves it without reading a file or fetching anything at run
 * time.
 */
#ifndef PGJOBD_WEB_ASSETS_H
#define PGJOBD_WEB_ASSETS_H

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

/*
 * The asset served at path ("/" is "/index.html"), or NULL.  Borrowed:
 * static for the process's life.
 */
const struct web_asset *web_asset_find(const char *path);

#endif
