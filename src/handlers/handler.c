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
#include "handlers/handler.h"

#include <ctype.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ev.h>

#include "common/config.h"
#include "common/log.h"
#include "common/util.h"

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

static void
strv_free(char **v)
{
	if (!v)
		return;
	for (size_t i = 0; v[i]; i++)
		free(v[i]);
	free(v);
}

/*
 * Puts "NAME=value" e into env[0..*n), replacing a variable of the same
 * name (PATH included) unless the name starts with PGJOB_, which always
 * describe the job.  env has room for it.
 */
static void
env_put(char **env, size_t *n, const char *e)
{
	const char *eq = strchr(e, '=');
	size_t j, name_len;

	if (!eq || eq == e || strncmp(e, "PGJOB_", 6) == 0)
		return;
	name_len = (size_t)(eq - e) + 1;
	for (j = 0; j < *n; j++)
		if (strncmp(env[j], e, name_len) == 0)
			break;
	if (j < *n)
		free(env[j]);
	else
		(*n)++;
	env[j] = xstrdup(e);
}

/*
 * A job's command's environment: PATH, the PGJOB_* variables, then the
 * handler's env, whose entries replace a variable of the same name (PATH
 * included) except PGJOB_*, which always describe the job.  Caller frees
 * with strv_free().
 */
static char **
job_env(const struct job *job, const struct handler_conf *h, int slot)
{
	char **env = xcalloc(7 + h->env.n + 1, sizeof(char *));
	size_t n = 0;

	env[n++] = xstrdup("PATH=" HANDLER_DEFAULT_PATH);
	env[n++] = xasprintf("PGJOB_JOB_ID=%lld", (long long)job->id);
	env[n++] = xasprintf("PGJOB_KIND=%s", job->kind ? job->kind : "");
	env[n++] = xasprintf("PGJOB_QUEUE=%s", job->queue ? job->queue : "");
	env[n++] = xasprintf("PGJOB_ATTEMPT=%d", job->attempt);
	env[n++] = xasprintf("PGJOB_LEASE_TOKEN=%lld",
			     (long long)job->lease_token);
	env[n++] = xasprintf("PGJOB_SLOT=%d", slot);
	for (size_t i = 0; i < h->env.n; i++)
		env_put(env, &n, h->env.v[i]);
	env[n] = NULL;
	return env;
}

static struct handler_run *
run_new(struct ev_loop *loop, struct job *job, int slot, handler_done_fn done,
	void *arg)
{
	struct handler_run *run = xcalloc(1, sizeof(*run));
	run->loop = loop;
	run->job = job;
	run->slot = slot;
	run->done = done;
	run->arg = arg;
	run->res.retry_in_ms = -1;
	ev_timer_init(&run->later, later_cb, 0., 0.);
	run->later.data = run;
	return run;
}

/* Starts the exec run of spec for run. */
static void
start_exec(struct handler_run *run, const struct exec_spec *spec)
{
	run->exec = handler_exec_start(run, run->loop, spec, &run->res);
	run->kind = run->exec ? RUN_EXEC : RUN_DEFERRED;
	if (run->kind == RUN_DEFERRED)
		ev_timer_start(run->loop, &run->later);
}

struct handler_run *
handler_start_task(struct ev_loop *loop, const struct task_conf *task,
		   int partition, int64_t token, int slot, handler_done_fn done,
		   void *arg)
{
	struct handler_run *run = run_new(loop, NULL, slot, done, arg);
	char *env[] = {
		xstrdup("PATH=" HANDLER_DEFAULT_PATH),
		xasprintf("PGJOB_TASK=%s", task->name),
		xasprintf("PGJOB_PARTITION=%d", partition),
		xasprintf("PGJOB_FENCING_TOKEN=%lld", (long long)token),
		xasprintf("PGJOB_SLOT=%d", slot),
		NULL,
	};
	struct exec_spec spec = {.argv = task->command.v,
				 .env = env,
				 .run_as = &task->run_as,
				 .task = task->name,
				 .partition = partition};
	start_exec(run, &spec);
	for (size_t i = 0; env[i]; i++)
		free(env[i]);
	return run;
}

struct handler_run *
handler_start(struct ev_loop *loop, struct job *job, int slot,
	      handler_done_fn done, void *arg)
{
	struct handler_run *run = run_new(loop, job, slot, done, arg);
	const struct handler_conf *h = job->handler;

	if (!h) {
		defer_retry(run,
			    xasprintf("no handler for kind %s", job->kind));
	} else if (h->type == HANDLER_EXEC) {
		char **env = job_env(job, h, slot);
		struct exec_spec spec = {
			.argv = h->command.v,
			.env = env,
			.input = job->payload,
			.timeout_ms = h->timeout_ms,
			.run_as = &h->run_as,
			.lj = {job->id, job->kind, job->attempt},
		};
		start_exec(run, &spec);
		strv_free(env);
		return run;
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

/*
 * JSON as PostgreSQL's jsonb input reads it (RFC 8259, and numeric's
 * limits), without recursion: a result is up to 1 MiB, so it may nest half
 * a million deep.  Each helper takes p at the start of its token and
 * returns the first byte after it, or NULL when the text is not JSON.
 *
 * Every rule below was checked against PostgreSQL 15 with
 * `select $1::jsonb` on a UTF8 database: raw U+0000-U+001F in a string
 * (tab, newline...) and \u0000 are refused, as are lone surrogate escapes
 * ("\ud800", "\udc00", "\ud800\u0041"); DEL and escaped control
 * characters ("\u0001") are accepted; whitespace is space, tab, LF and CR
 * only (not VT, FF, NBSP or a BOM); numbers follow the grammar strictly
 * (no "01", "1.", ".5", "+1", "1e") and must fit numeric: 1e999, -0 and
 * 0e1000000 are accepted, 1e131072, 1e-16384 and 1.5e-16383 are not.
 * What is not checked: nesting beyond PostgreSQL's max_stack_depth (some
 * ten thousand levels by default), which depends on the server.
 */
static const unsigned char *
json_ws(const unsigned char *p, const unsigned char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

/* The value of the four hex digits at p, or -1. */
static long
json_hex4(const unsigned char *p, const unsigned char *end)
{
	long v = 0;

	if (end - p < 4)
		return -1;
	for (int i = 0; i < 4; i++) {
		int c = p[i];
		int d = c >= '0' && c <= '9'   ? c - '0'
			: c >= 'a' && c <= 'f' ? c - 'a' + 10
			: c >= 'A' && c <= 'F' ? c - 'A' + 10
					       : -1;
		if (d < 0)
			return -1;
		v = v * 16 + d;
	}
	return v;
}

/* A string; p is at its opening quote. */
static const unsigned char *
json_string(const unsigned char *p, const unsigned char *end)
{
	if (p == end || *p++ != '"')
		return NULL;
	while (p < end) {
		unsigned char c = *p;
		long u;

		if (c == '"')
			return p + 1;
		if (c < 0x20)
			return NULL; /* raw control characters: escape them */
		if (c >= 0x80) {
			size_t n = utf8_len(p, (size_t)(end - p));
			if (n == 0)
				return NULL;
			p += n;
			continue;
		}
		if (c != '\\') {
			p++;
			continue;
		}
		if (++p == end)
			return NULL;
		if (*p && strchr("\"\\/bfnrt", *p)) {
			p++;
			continue;
		}
		if (*p != 'u' || (u = json_hex4(p + 1, end)) < 0)
			return NULL;
		p += 5;
		if (u == 0 || (u >= 0xdc00 && u <= 0xdfff))
			return NULL; /* jsonb: no \u0000, no lone low half */
		if (u >= 0xd800 && u <= 0xdbff) {
			/* A high half must be followed by a low one. */
			if (end - p < 6 || p[0] != '\\' || p[1] != 'u')
				return NULL;
			u = json_hex4(p + 2, end);
			if (u < 0xdc00 || u > 0xdfff)
				return NULL;
			p += 6;
		}
	}
	return NULL;
}

/* Digits at p: sets *n to how many (saturated), returns the end. */
static const unsigned char *
json_digits(const unsigned char *p, const unsigned char *end, int64_t *n)
{
	*n = 0;
	while (p < end && *p >= '0' && *p <= '9') {
		if (*n < INT64_MAX / 2)
			(*n)++;
		p++;
	}
	return p;
}

/*
 * A number, which jsonb stores as numeric: the exponent must be below
 * INT_MAX / 2 in size, the display scale (digits after the point, less
 * the exponent) at most 16383, and a value other than zero must have its
 * first significant digit at most at 10^131071.
 */
static const unsigned char *
json_number(const unsigned char *p, const unsigned char *end)
{
	int64_t int_digits = 1, frac_digits = 0, exp = 0, lead = 0;
	bool nonzero;

	if (p < end && *p == '-')
		p++;
	if (p == end || *p < '0' || *p > '9')
		return NULL;
	/* lead: the power of ten of the first significant digit. */
	nonzero = *p != '0';
	if (nonzero)
		p = json_digits(p, end, &int_digits);
	else
		p++; /* "0", never "01" */
	lead = int_digits - 1;
	if (p < end && *p == '.') {
		const unsigned char *frac = ++p;
		p = json_digits(p, end, &frac_digits);
		if (frac_digits == 0)
			return NULL;
		for (const unsigned char *q = frac; q < p && !nonzero; q++)
			if (*q != '0') {
				nonzero = true;
				lead = -(int64_t)(q - frac) - 1;
			}
	}
	if (p < end && (*p == 'e' || *p == 'E')) {
		bool neg = false;

		p++;
		if (p < end && (*p == '+' || *p == '-'))
			neg = *p++ == '-';
		if (p == end || *p < '0' || *p > '9')
			return NULL;
		for (; p < end && *p >= '0' && *p <= '9'; p++)
			if (exp < INT32_MAX) /* saturates: refused below */
				exp = exp * 10 + (*p - '0');
		if (neg)
			exp = -exp;
	}
	if (exp >= INT32_MAX / 2 || exp <= -(INT32_MAX / 2))
		return NULL;
	if (frac_digits - exp > 16383)
		return NULL;
	if (nonzero && lead + exp > 131071)
		return NULL;
	return p;
}

static const unsigned char *
json_literal(const unsigned char *p, const unsigned char *end)
{
	static const char *const words[] = {"true", "false", "null"};

	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
		size_t n = strlen(words[i]);
		if ((size_t)(end - p) >= n && memcmp(p, words[i], n) == 0)
			return p + n;
	}
	return NULL;
}

/* An object's key and its colon; p is where the key should start. */
static const unsigned char *
json_key(const unsigned char *p, const unsigned char *end)
{
	p = json_string(json_ws(p, end), end);
	if (p)
		p = json_ws(p, end);
	return p && p < end && *p == ':' ? p + 1 : NULL;
}

int
handler_is_json(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s, *end = p + len;
	struct buf open = {0}; /* the containers around p: '{' or '[' */
	int ok = 0;

	for (;;) {
		/* A value, or the start of a container. */
		p = json_ws(p, end);
		if (p == end)
			goto out;
		if (*p == '{' || *p == '[') {
			char c = (char)*p;
			p = json_ws(p + 1, end);
			if (p < end && *p == (c == '{' ? '}' : ']')) {
				p++;
			} else {
				buf_append(&open, &c, 1);
				if (c == '{' && !(p = json_key(p, end)))
					goto out;
				continue;
			}
		} else if (*p == '"') {
			p = json_string(p, end);
		} else if (*p == '-' || (*p >= '0' && *p <= '9')) {
			p = json_number(p, end);
		} else {
			p = json_literal(p, end);
		}
		if (!p)
			goto out;
		/* After a value: close containers, then a comma or the end. */
		for (p = json_ws(p, end); open.len > 0 && p < end;
		     p = json_ws(p + 1, end)) {
			char top = open.data[open.len - 1];
			if (*p != (top == '{' ? '}' : ']'))
				break;
			open.len--;
		}
		if (open.len == 0) {
			ok = p == end;
			goto out;
		}
		if (p == end || *p != ',')
			goto out;
		p++;
		if (open.data[open.len - 1] == '{' && !(p = json_key(p, end)))
			goto out;
	}
out:
	buf_free(&open);
	return ok;
}
