/*
 * handler_http: POSTs a job's payload to its handler's webhook with
 * libcurl's multi interface on a libev loop (see handler_http.c).  Used by
 * handler.c only.
 */
#ifndef PGJOBD_HANDLER_HTTP_H
#define PGJOBD_HANDLER_HTTP_H

#include "common/job.h"
#include "handlers/handler_result.h"

struct config;
struct ev_loop;
struct http_run;

/* curl_global_init, and a warning per http handler without tls_verify.
 * Returns 0, or -1 (logged) when libcurl cannot be loaded. */
int handler_http_init(const struct config *cfg);
/*
 * Whether url is one a request can be made to: libcurl (loaded if need be)
 * parses it and finds a host in it.  NULL, or why not (static storage).
 */
const char *handler_http_check_url(const char *url);
/* Frees every loop's multi handle; abandons requests still in flight. */
void handler_http_fini(void);
/*
 * Starts the POST of job's payload to its handler's url on loop, for run;
 * job is borrowed until the run is finished.  Returns the request's state
 * (freed with handler_http_free()), or NULL with *fail set to a RETRY
 * result when it cannot be made (a url libcurl cannot parse).  When the
 * request ends, finish(run, ...) is called from a loop callback.
 */
struct http_run *handler_http_start(void *run, struct ev_loop *loop,
				    const struct job *job,
				    handler_finish_fn *finish,
				    struct handler_result *fail);
/* Aborts the request; finish follows from the loop: RETRY "stopped: why". */
void handler_http_stop(struct http_run *x, const char *why);
/* Aborts the request if it still runs and frees x. */
void handler_http_free(struct http_run *x);

#endif
