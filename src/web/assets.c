/*
 * assets: finding an embedded asset by its path.  The table itself is
 * generated (cmake/embed_assets.cmake writes web_assets.c in the build
 * folder).
 */
#include <string.h>

#include "web/assets.h"

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
