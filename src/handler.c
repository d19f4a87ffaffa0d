/*
 * handler: the handler registry.  Dispatches a claimed job to the module of
 * its handler type, delivers every result from the loop, and owns each run
 * from handler_start() until its done callback has returned.
 *
 * A result that is known before anything runs (no handler for the kind, an
 * unusable plugin, a command that cannot be spawned, a url that cannot be
 * parsed) and every plugin run go through a zero-delay timer, so done is
 * never called from inside handler_start() or handler_stop(): the worker can
 * finish its own bookkeeping first.  Exec and http runs are finished by
 * their modules, from their own loop callbacks.
 */
#include "handler.h"

#include <ctype.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <ev.h>

#include "config.h"
#include "log.h"
#include "util.h"

enum run_kind {
	RUN_DEFERRED, /* the result is in run->res already */
	RUN_PLUGIN,   /* the plugin is called from the zero timer */
	RUN_EXEC,     /* a child process; handler_exec.c finishes it */
	RUN_HTTP,     /* a request; handler_http.c finishes it */
};

struct handler_run {
	struct ev_loop *loop;
	struct job *job; /* borrowed until done returns */
	int slot;
	handler_done_fn done;
	void *arg;
	enum run_kind kind;
	struct exec_run *exec; /* RUN_EXEC; owned */
	struct http_run *http; /* RUN_HTTP; owned */
	ev_timer later;	       /* RUN_DEFERRED, RUN_PLUGIN */
	struct handler_result res;
	bool stopped;
	bool finished; /* done is running or has run */
};

void
job_free(struct job *job)
{
	if (!job)
		return;
	free(job->kind);
	free(job->queue);
	free(job->payload);
	free(job->ordering_key);
	free(job);
}

void
handler_result_clear(struct handler_result *r)
{
	free(r->result);
	free(r->error);
	r->outcome = OUTCOME_DONE;
	r->result = NULL;
	r->error = NULL;
	r->retry_in_ms = -1;
}

int
handler_init(const struct config *cfg)
{
	int rc;

	handler_fini();
	rc = handler_plugin_load_all(cfg);
	if (handler_http_init(cfg) < 0)
		rc = -1;
	return rc;
}

void
handler_fini(void)
{
	handler_plugin_unload_all();
	handler_http_fini();
}

static void
later_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct handler_run *run = w->data;

	ev_timer_stop(loop, w);
	if (run->kind == RUN_PLUGIN) {
		if (run->stopped) {
			log_job(LOG_INFO,
				&(struct log_job){run->job->id, run->job->kind,
						  run->job->attempt},
				"%s before the plugin ran", run->res.error);
		} else {
			handler_plugin_run(run->job, run->slot, &run->res);
		}
	}
	handler_finish(run, &run->res);
}

/* Sets run->res to a RETRY result with msg as its error; takes msg. */
static void
defer_retry(struct handler_run *run, char *msg)
{
	handler_result_clear(&run->res);
	run->res.outcome = OUTCOME_RETRY;
	run->res.error = msg;
}

struct handler_run *
handler_start(struct ev_loop *loop, struct job *job, int slot,
	      handler_done_fn done, void *arg)
{
	struct handler_run *run = xcalloc(1, sizeof(*run));
	const struct handler_conf *h = job->handler;

	run->loop = loop;
	run->job = job;
	run->slot = slot;
	run->done = done;
	run->arg = arg;
	run->res.retry_in_ms = -1;
	ev_timer_init(&run->later, later_cb, 0., 0.);
	run->later.data = run;

	if (!h) {
		defer_retry(run,
			    xasprintf("no handler for kind %s", job->kind));
	} else if (h->type == HANDLER_EXEC) {
		run->exec = handler_exec_start(run, loop, job, slot, &run->res);
		run->kind = run->exec ? RUN_EXEC : RUN_DEFERRED;
	} else if (h->type == HANDLER_HTTP) {
		run->http = handler_http_start(run, loop, job, &run->res);
		run->kind = run->http ? RUN_HTTP : RUN_DEFERRED;
	} else if (h->type == HANDLER_PLUGIN) {
		run->kind = RUN_PLUGIN;
	} else {
		defer_retry(run,
			    xasprintf("%s handlers are not implemented yet",
				      config_handler_type_name(h->type)));
	}
	if (run->kind == RUN_DEFERRED || run->kind == RUN_PLUGIN)
		ev_timer_start(loop, &run->later);
	return run;
}

void
handler_stop(struct handler_run *run, const char *why)
{
	if (run->finished || run->stopped)
		return;
	run->stopped = true;
	if (run->kind == RUN_EXEC) {
		handler_exec_stop(run->exec, why);
	} else if (run->kind == RUN_HTTP) {
		handler_http_stop(run->http, why);
	} else if (run->kind == RUN_PLUGIN) {
		/* Not yet called: it will not be. */
		defer_retry(run, xasprintf("stopped: %s", why));
	}
	/* RUN_DEFERRED: the result is known and is delivered as it is. */
}

void
handler_finish(struct handler_run *run, struct handler_result *res)
{
	run->finished = true;
	ev_timer_stop(run->loop, &run->later);
	run->done(run->arg, res);
	handler_result_clear(res);
	if (res != &run->res)
		handler_result_clear(&run->res);
	if (run->exec)
		handler_exec_free(run->exec);
	if (run->http)
		handler_http_free(run->http);
	free(run);
}

int
handler_parse_duration(const char *s, int64_t *ms)
{
	static const struct {
		const char *unit;
		double ms;
	} units[] = {{"", 1000},       {"ms", 1},	   {"s", 1000},
		     {"m", 60 * 1000}, {"h", 3600 * 1000}, {"d", 86400 * 1000}};
	char *end;
	double v;

	if (!s || !(isdigit((unsigned char)s[0]) || s[0] == '.'))
		return -1;
	v = strtod(s, &end);
	if (end == s || !isfinite(v) || v < 0)
		return -1;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(end, units[i].unit) != 0)
			continue;
		v *= units[i].ms;
		if (v > 1e15) /* some 30,000 years: not a delay */
			return -1;
		/* Rounded to the nearest ms, as llround() would for these
		 * non-negative values, without libm (issue 6: every library
		 * a worker maps costs it resident memory). */
		*ms = (int64_t)(v + 0.5);
		return 0;
	}
	return -1;
}

const char *
handler_format_duration(int64_t ms, char *buf, size_t len)
{
	static const struct {
		const char *unit;
		int64_t ms;
	} units[] = {
		{"d", 86400000}, {"h", 3600000}, {"m", 60000}, {"s", 1000}};

	if (ms > 0) {
		for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
			if (ms % units[i].ms == 0) {
				snprintf(buf, len, "%lld%s",
					 (long long)(ms / units[i].ms),
					 units[i].unit);
				return buf;
			}
		}
	}
	snprintf(buf, len, "%lldms", (long long)ms);
	return buf;
}

/* Length of the valid UTF-8 sequence at p, or 0 (NUL counts as invalid). */
static size_t
utf8_len(const unsigned char *p, size_t left)
{
	unsigned char c = p[0];
	unsigned char lo = 0x80, hi = 0xbf;
	size_t n;

	if (c == 0)
		return 0;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4;
	else
		return 0;
	if (n > left)
		return 0;
	/* No overlong forms, no surrogates, nothing above U+10FFFF. */
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	if (p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return n;
}

void
handler_sanitize_utf8(char *s, size_t len)
{
	unsigned char *p = (unsigned char *)s;
	size_t i = 0;

	while (i < len) {
		size_t n = utf8_len(p + i, len - i);
		if (n == 0) {
			p[i] = '?';
			n = 1;
		}
		i += n;
	}
}

int
handler_is_json(const char *s, size_t len)
{
	const char *end = NULL;
	cJSON *j;

	for (size_t i = 0; i < len;) {
		size_t n = utf8_len((const unsigned char *)s + i, len - i);
		if (n == 0)
			return 0;
		/* jsonb refuses \u0000; an escape is always two chars. */
		if (s[i] == '\\' && i + 1 < len) {
			if (s[i + 1] == 'u' && len - i >= 6 &&
			    memcmp(s + i + 2, "0000", 4) == 0)
				return 0;
			n = 2;
		}
		i += n;
	}
	j = cJSON_ParseWithLengthOpts(s, len, &end, 0);
	if (!j)
		return 0;
	cJSON_Delete(j);
	while (end < s + len && isspace((unsigned char)*end))
		end++;
	return end == s + len;
}
