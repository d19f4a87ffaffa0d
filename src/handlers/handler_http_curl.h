/*
 * handler_http_curl: libcurl, loaded with dlopen() the first time the http
 * handler needs it (see handler_http_curl.c), and the few calls of it that
 * handler_http.c and handler_http_result.c share.  Used by those two, and
 * by worker/otlp.c, which sends spans (docs/tracing.md).
 */
#ifndef PGJOBD_HANDLER_HTTP_CURL_H
#define PGJOBD_HANDLER_HTTP_CURL_H

#include <curl/curl.h>

#if LIBCURL_VERSION_NUM < 0x075500
#error "the http handler needs libcurl 7.85 or later"
#endif

/* The libcurl functions used here, without their curl_ prefix. */
#define LIBCURL_FUNCS(X)                                                       \
	X(global_init)                                                         \
	X(global_cleanup)                                                      \
	X(version_info)                                                        \
	X(easy_init)                                                           \
	X(easy_cleanup)                                                        \
	X(easy_setopt)                                                         \
	X(easy_perform)                                                        \
	X(easy_getinfo)                                                        \
	X(easy_header)                                                         \
	X(easy_strerror)                                                       \
	X(multi_init)                                                          \
	X(multi_cleanup)                                                       \
	X(multi_setopt)                                                        \
	X(multi_add_handle)                                                    \
	X(multi_remove_handle)                                                 \
	X(multi_assign)                                                        \
	X(multi_socket_action)                                                 \
	X(multi_timeout)                                                       \
	X(multi_info_read)                                                     \
	X(slist_append)                                                        \
	X(slist_free_all)                                                      \
	X(url)                                                                 \
	X(url_set)                                                             \
	X(url_get)                                                             \
	X(url_cleanup)                                                         \
	X(url_strerror)                                                        \
	X(getdate)                                                             \
	X(free)

/* lc.easy_init is curl_easy_init, and so on; filled by
 * handler_http_curl_load(). */
struct libcurl_table {
#define X(f) __typeof__(curl_##f) *f;
	LIBCURL_FUNCS(X)
#undef X
};
extern struct libcurl_table lc;

/*
 * Loads libcurl into lc, once per process.  Returns NULL, or why it cannot
 * be used (static storage): the same reason on every later call.
 */
const char *handler_http_curl_load(void);
/* handler_http_curl_load() and curl_global_init(); NULL, or why libcurl
 * cannot be used. */
const char *handler_http_curl_init(void);
/* curl_global_cleanup() if handler_http_curl_init() did its init. */
void handler_http_curl_cleanup(void);

/* curl_slist_append(); out of memory aborts, as in util.c. */
struct curl_slist *handler_http_curl_slist_add(struct curl_slist *l,
					       const char *s);
/* "host:port" of url (port defaulted from the scheme), or NULL with *why
 * set to libcurl's reason.  Caller frees. */
char *handler_http_curl_target(const char *url, const char **why);

#endif
