/*
 * handler_http_result: the outcome of a finished request (docs/handlers.md):
 * 2xx is done, its body the result when it is JSON; 408, 425, 429, 5xx and
 * every transfer error (connect, DNS, TLS, timeout) are retried, after
 * Retry-After when the server sent one; 3xx is not followed and is dead,
 * as is every other 4xx.  Its error text and log line name the server as
 * host:port, never a header value, the URL's path or query, or more of a
 * response body than an error needs.
 */
#include "handlers/handler_http_result.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/duration.h"
#include "common/pgtext.h"
#include "handlers/handler_http_curl.h"

#define ERROR_BODY_MAX 512 /* of the body, in an error text */

/* body[0..len) with surrounding whitespace trimmed; sets *len. */
static const char *
trim(const char *s, size_t *len)
{
	while (*len && isspace((unsigned char)*s))
		s++, (*len)--;
	while (*len && isspace((unsigned char)s[*len - 1]))
		(*len)--;
	return s;
}

/* The response body when it was kept whole and is JSON; else NULL.
 * Caller frees. */
static char *
body_json(const struct http_run *x)
{
	size_t len = x->body.len;
	const char *s = trim(x->body.data ? x->body.data : "", &len);

	if (x->body_total > x->body.len || len == 0)
		return NULL;
	return pgtext_is_jsonb(s, len) ? xstrndup(s, len) : NULL;
}

/* "HTTP 503: <the body's first 512 bytes>", sanitized; caller frees. */
static char *
status_text(const struct http_run *x, long status)
{
	size_t len = x->body.len;
	const char *s = trim(x->body.data ? x->body.data : "", &len);
	bool cut = len > ERROR_BODY_MAX || x->body_total > x->body.len;
	char *t;
	int n;

	if (len > ERROR_BODY_MAX) {
		len = ERROR_BODY_MAX;
		/* Not in the middle of a UTF-8 character. */
		while (len > 0 && ((unsigned char)s[len] & 0xc0) == 0x80)
			len--;
	}
	if (len == 0)
		return xasprintf("HTTP %ld", status);
	/* Copied, not printed: the body may hold NUL bytes. */
	t = xmalloc(len + 64);
	n = snprintf(t, 60, "HTTP %ld: ", status);
	memcpy(t + n, s, len);
	pgtext_sanitize(t + n, len);
	strcpy(t + n + len, cut ? "..." : "");
	return t;
}

/*
 * For a 3xx: where it points (not followed), as host:port only.  The path
 * and query of a Location can carry what the configured url carried (a
 * token in the query), and user:password@ too; none of it goes into
 * last_error or a log line.  Nor does the body, which often repeats the
 * Location in full.
 */
static char *
redirect_text(const struct http_run *x, long status)
{
	char *loc = NULL, *where, *t;
	const char *why;

	lc.easy_getinfo(x->easy, CURLINFO_REDIRECT_URL, &loc);
	if (!loc || !*loc || !(where = handler_http_curl_target(loc, &why)))
		return xasprintf("HTTP %ld: redirect not followed", status);
	t = xasprintf("HTTP %ld: redirect to %.*s not followed", status,
		      ERROR_BODY_MAX, where);
	pgtext_sanitize(t, strlen(t));
	free(where);
	return t;
}

/* A header of the final response, copied (caller frees), or NULL. */
static char *
header(const struct http_run *x, const char *name)
{
	struct curl_header *h;
	size_t len;
	const char *s;

	if (lc.easy_header(x->easy, name, 0, CURLH_HEADER, -1, &h) != CURLHE_OK)
		return NULL;
	len = strlen(h->value);
	s = trim(h->value, &len);
	return xstrndup(s, len);
}

/*
 * Retry-After as a delay in ms: delta-seconds, or an HTTP-date taken
 * relative to the response's Date header (the server's clock), else to
 * this host's clock; a date in the past is 0.  -1 when absent or
 * unreadable: the backoff decides.
 */
static int64_t
retry_after(const struct http_run *x)
{
	char *ra = header(x, "Retry-After"), *date;
	size_t digits;
	time_t when, base = time(NULL), server_now;
	int64_t ms = -1;

	if (!ra)
		return -1;
	digits = strspn(ra, "0123456789");
	if (digits > 0 && digits <= 10 && ra[digits] == '\0') {
		ms = strtoll(ra, NULL, 10) * 1000;
	} else if ((when = lc.getdate(ra, NULL)) >= 0) {
		date = header(x, "Date");
		if (date && (server_now = lc.getdate(date, NULL)) >= 0)
			base = server_now;
		free(date);
		ms = when > base ? (int64_t)(when - base) * 1000 : 0;
	} else {
		log_job(LOG_WARN, &x->lj,
			"Retry-After is neither seconds nor an HTTP-date; the "
			"backoff decides");
	}
	free(ra);
	return ms;
}

static bool
is_tls_error(CURLcode rc)
{
	switch (rc) {
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CIPHER:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_ISSUER_ERROR:
	case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
	case CURLE_SSL_INVALIDCERTSTATUS:
	case CURLE_SSL_CRL_BADFILE:
	case CURLE_SSL_ENGINE_NOTFOUND:
	case CURLE_SSL_ENGINE_SETFAILED:
	case CURLE_SSL_ENGINE_INITFAILED:
	case CURLE_USE_SSL_FAILED:
		return true;
	default:
		return false;
	}
}

/*
 * Of a transfer that timed out: whether the connect timeout ended it (the
 * connection, or its TLS, was not up), rather than the handler's timeout.
 */
static bool
connect_timed_out(const struct http_run *x)
{
	curl_off_t tcp = 0, tls = 0;

	if (x->timeout_ms > 0 && x->timeout_ms <= HTTP_CONNECT_TIMEOUT_MS)
		return false; /* the same limit: the handler's */
	lc.easy_getinfo(x->easy, CURLINFO_CONNECT_TIME_T, &tcp);
	lc.easy_getinfo(x->easy, CURLINFO_APPCONNECT_TIME_T, &tls);
	return tcp == 0 || (x->https && tls == 0);
}

/* A timeout: before the connection was up (the connect timeout), or
 * after (the handler's timeout).  Caller frees. */
static char *
timeout_text(const struct http_run *x, const char *detail)
{
	char d[32];

	if (connect_timed_out(x))
		return xasprintf(
			"could not connect to %s within %s (%s)", x->target,
			duration_format(HTTP_CONNECT_TIMEOUT_MS, d, sizeof(d)),
			detail);
	return xasprintf("timed out after %s (%s)",
			 duration_format(x->timeout_ms, d, sizeof(d)), detail);
}

/* The error text of a transfer that failed; caller frees. */
static char *
curl_error_text(const struct http_run *x, CURLcode rc)
{
	const char *detail = x->errbuf[0] ? x->errbuf : lc.easy_strerror(rc);
	long oserr = 0;
	char *t;

	if (rc == CURLE_COULDNT_CONNECT) {
		lc.easy_getinfo(x->easy, CURLINFO_OS_ERRNO, &oserr);
		t = xasprintf("could not connect to %s: %s", x->target,
			      oserr ? strerror((int)oserr) : detail);
	} else if (rc == CURLE_COULDNT_RESOLVE_HOST) {
		t = xasprintf("could not resolve %s: %s", x->target, detail);
	} else if (rc == CURLE_OPERATION_TIMEDOUT) {
		t = timeout_text(x, detail);
	} else if (is_tls_error(rc)) {
		t = xasprintf("TLS error with %s: %s", x->target, detail);
	} else {
		t = xasprintf("request to %s failed: %s", x->target, detail);
	}
	pgtext_sanitize(t, strlen(t));
	return t;
}

void
handler_http_result(struct http_run *x, CURLcode rc, struct handler_result *res)
{
	long status = 0;

	res->outcome = OUTCOME_RETRY;
	res->retry_in_ms = -1;
	res->snooze = false;
	if (rc != CURLE_OK) {
		res->error = curl_error_text(x, rc);
		/* The handler's timeout, not a host that did not answer. */
		res->timed_out =
			rc == CURLE_OPERATION_TIMEDOUT && !connect_timed_out(x);
		return;
	}
	lc.easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
	/* Kept with a failed attempt (sql/upgrade/013_attempts.sql). */
	res->has_status = status > 0 && status <= INT_MAX;
	res->status = res->has_status ? (int)status : 0;
	if (status >= 200 && status <= 299) {
		res->outcome = OUTCOME_DONE;
		res->result = body_json(x);
	} else if (status >= 300 && status <= 399) {
		res->outcome = OUTCOME_DEAD;
		res->error = redirect_text(x, status);
	} else if (status >= 400 && status <= 499 && status != 408 &&
		   status != 425 && status != 429) {
		res->outcome = OUTCOME_DEAD;
		res->error = status_text(x, status);
	} else {
		/* 408, 425, 429, 5xx, and statuses HTTP does not define. */
		res->error = status_text(x, status);
		res->retry_in_ms = retry_after(x);
		if ((status == 429 || status == 503) && res->retry_in_ms > 0)
			res->throttle_ms = res->retry_in_ms;
		/* Too many requests, or unavailable until then: the server
		 * said when to come back (RFC 9110, 10.2.3), a snooze. */
		res->snooze = (status == 429 || status == 503) &&
			      res->retry_in_ms >= 0;
	}
}

void
handler_http_log_attempt(const struct http_run *x, CURLcode rc,
			 const struct handler_result *res)
{
	static const char *names[] = {"done", "retry", "dead"};
	long status = 0;
	char what[64], d[32] = "";

	if (!x->why && rc == CURLE_OK)
		lc.easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
	if (status)
		snprintf(what, sizeof(what), "HTTP %ld", status);
	if (res->retry_in_ms >= 0)
		duration_format(res->retry_in_ms, d, sizeof(d));
	if (x->why) {
		/* Stopped: the worker decides how the attempt ends. */
		log_job(LOG_INFO, &x->lj, "POST %s: %s, wall %lld ms",
			x->target, x->why,
			(long long)(util_now_ms() - x->start_ms));
		return;
	}
	log_job(res->outcome == OUTCOME_DONE || res->snooze ? LOG_INFO
							    : LOG_WARN,
		&x->lj, "POST %s: %s -> %s%s%s, wall %lld ms, %zu bytes%s",
		x->target, status ? what : res->error,
		res->snooze ? "snooze" : names[res->outcome],
		d[0] ? " in " : "", d, (long long)(util_now_ms() - x->start_ms),
		x->body_total,
		x->body_total > x->body.len ? " (over 1 MiB: not kept)" : "");
}
