/*
 * handler_http_curl: libcurl is not linked but loaded with dlopen() the
 * first time it is needed: by handler_http_init() for a config with an
 * http handler, or by the first request.  libcurl and the libraries it
 * pulls in (a second TLS stack, HTTP/2, IDN, ssh, rtmp...) add a good
 * share to the resident set of every process that maps them, and most
 * configs have no http handler (docs/daemon.md: a worker at rest stays
 * under 8 MiB).  Every libcurl call goes through the table lc, whose
 * members have the exact types of curl.h's declarations; curl.h is still
 * what the code is compiled against.
 */
#include "handlers/handler_http_curl.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"

#define LIBCURL_MIN 0x075500 /* checked again at run time */
/* libcurl's soname: libcurl.so.4 since 7.16 (2006). */
#define LIBCURL_SONAME "libcurl.so.4"

struct libcurl_table lc;
static bool global_ready; /* curl_global_init() done */

struct curl_slist *
handler_http_curl_slist_add(struct curl_slist *l, const char *s)
{
	struct curl_slist *n = lc.slist_append(l, s);

	if (!n) {
		log_errorx("out of memory (curl_slist_append)");
		abort();
	}
	return n;
}

/* Never unloaded: its TLS libraries cannot be, and a worker that used it
 * keeps using it. */
const char *
handler_http_curl_load(void)
{
	static void *dl;
	static char why[512];

	if (dl)
		return NULL;
	if (why[0])
		return why;
	dlerror();
	void *h = dlopen(LIBCURL_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(why, sizeof(why), "cannot load libcurl: %s",
			 dlerror());
		return why;
	}
#define X(f)                                                                   \
	if (!why[0] && !(lc.f = (__typeof__(lc.f))dlsym(h, "curl_" #f)))       \
		snprintf(why, sizeof(why),                                     \
			 "%s has no curl_%s: libcurl %s or "                   \
			 "later is needed",                                    \
			 LIBCURL_SONAME, #f, "7.85");
	LIBCURL_FUNCS(X)
#undef X
	const curl_version_info_data *v =
		why[0] ? NULL : lc.version_info(CURLVERSION_NOW);
	if (v && (unsigned)v->version_num < LIBCURL_MIN)
		snprintf(why, sizeof(why),
			 "libcurl %s is too old: 7.85 or later is needed",
			 v->version);
	if (why[0]) {
		dlclose(h);
		memset(&lc, 0, sizeof(lc));
		return why;
	}
	dl = h;
	return NULL;
}

const char *
handler_http_curl_init(void)
{
	const char *why = handler_http_curl_load();

	if (why || global_ready)
		return why;
	if (lc.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		log_errorx("curl_global_init failed");
		abort();
	}
	global_ready = true;
	return NULL;
}

void
handler_http_curl_cleanup(void)
{
	if (global_ready)
		lc.global_cleanup();
	global_ready = false;
}

char *
handler_http_curl_target(const char *url, const char **why)
{
	CURLU *u = lc.url();
	char *host = NULL, *port = NULL, *s = NULL;
	CURLUcode rc;

	if (!u) {
		log_errorx("out of memory (curl_url)");
		abort();
	}
	rc = lc.url_set(u, CURLUPART_URL, url, 0);
	if (rc == CURLUE_OK)
		rc = lc.url_get(u, CURLUPART_HOST, &host, 0);
	if (rc == CURLUE_OK)
		rc = lc.url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT);
	if (rc == CURLUE_OK)
		s = xasprintf("%s:%s", host, port);
	else
		*why = lc.url_strerror(rc);
	lc.free(host);
	lc.free(port);
	lc.url_cleanup(u);
	return s;
}
