/*
 * handler_http_result: what a finished request means (see
 * handler_http_result.c), and a request's state, which it shares with
 * handler_http.c (the request's life).  Used by those two only.
 */
#ifndef PGJOBD_HANDLER_HTTP_RESULT_H
#define PGJOBD_HANDLER_HTTP_RESULT_H

#include <stdbool.h>
#include <stdint.h>

#include <curl/curl.h>
#include <ev.h>

#include "common/log.h"
#include "common/util.h"
#include "handlers/handler_result.h"

#define HTTP_BODY_MAX		(1024 * 1024) /* response bytes kept */
#define HTTP_CONNECT_TIMEOUT_MS 10000

struct http_multi; /* handler_http.c's */

/* One request; owned by the handler_run (handler.c), freed by
 * handler_http_free(). */
struct http_run {
	struct http_run *prev, *next; /* in m->runs */
	void *run;		      /* handler.c's, handed back to finish */
	handler_finish_fn *finish;
	struct http_multi *m; /* NULL once abandoned by handler_http_fini() */
	struct log_job lj;
	CURL *easy;
	struct curl_slist *headers;
	char *target; /* "host:port" of the url, for messages */
	bool https;
	bool attached; /* the easy handle is in the multi */
	int64_t timeout_ms;
	int64_t start_ms;
	struct buf body;   /* the first HTTP_BODY_MAX bytes of the response */
	size_t body_total; /* response body bytes received */
	char errbuf[CURL_ERROR_SIZE];
	char *why;	/* "stopped: ..." once stopped; owned */
	ev_timer later; /* delivers a stop from the loop */
};

/* The outcome of x's transfer, ended with rc (CURLE_OK once stopped). */
void handler_http_result(struct http_run *x, CURLcode rc,
			 struct handler_result *res);
/* The attempt's one log line: how it ended, wall time, bytes. */
void handler_http_log_attempt(const struct http_run *x, CURLcode rc,
			      const struct handler_result *res);

#endif
