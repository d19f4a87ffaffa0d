/*
 * handler_process_proto: the lines of protocol 1 (see the header and
 * docs/handlers.md, "The protocol").  Every field a message needs is
 * checked for its type here, so that the supervision in handler_process.c
 * sees only well-formed messages, and a program's mistake is named in the
 * words the job's error and the log will carry.
 */
#include "handlers/handler_process_proto.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/duration.h"
#include "common/pgtext.h"

#define ERROR_MAX 16384 /* of a failed reply's error: its end kept */
#define QUOTE_MAX 60	/* of a bad line, in the error */

static const char *const names[] = {
	[PROTO_HELLO] = "hello",       [PROTO_DONE] = "done",
	[PROTO_FAILED] = "failed",     [PROTO_SNOOZE] = "snooze",
	[PROTO_PROGRESS] = "progress",
};

const char *
handler_process_proto_name(enum proto_type t)
{
	return names[t];
}

/* s as a JSON string (quoted, escaped), appended to b. */
static void
append_str(struct buf *b, const char *s)
{
	cJSON *j = cJSON_CreateString(s ? s : "");
	char *out = j ? cJSON_PrintUnformatted(j) : NULL;

	if (!out)
		abort(); /* out of memory, as xmalloc() */
	buf_append(b, out, strlen(out));
	cJSON_Delete(j);
	free(out);
}

void
handler_process_proto_job(struct buf *b, const struct job *job,
			  int64_t timeout_ms, int64_t deadline_ms,
			  int64_t lease_ms)
{
	const char *payload = job->payload ? job->payload : "{}";
	size_t from;

	buf_appendf(b, "{\"type\":\"job\",\"id\":%lld,\"kind\":",
		    (long long)job->id);
	append_str(b, job->kind);
	buf_appendf(b, ",\"queue\":");
	append_str(b, job->queue);
	buf_appendf(b,
		    ",\"attempt\":%d,\"max_attempts\":%d,\"timeout_ms\":%lld,"
		    "\"deadline_ms\":%lld,\"lease_ms\":%lld,",
		    job->attempt, job->max_attempts, (long long)timeout_ms,
		    (long long)deadline_ms, (long long)lease_ms);
	/* The attempt's W3C trace context (docs/tracing.md): only when the
	 * job has one, hex and dashes only. */
	if (job->traceparent[0])
		buf_appendf(b, "\"traceparent\":\"%s\",", job->traceparent);
	buf_append(b, "\"payload\":", 10);
	from = b->len;
	buf_append(b, payload, strlen(payload));
	/* jsonb's text has no raw line break (one inside a string would be
	 * invalid JSON); one outside a string is white space: the line
	 * stays one line whatever the text. */
	for (size_t i = from; i < b->len; i++)
		if (b->data[i] == '\n' || b->data[i] == '\r')
			b->data[i] = ' ';
	buf_append(b, "}\n", 2);
}

void
handler_process_proto_cancel(struct buf *b, int64_t id, const char *reason)
{
	buf_appendf(b, "{\"type\":\"cancel\",\"id\":%lld,\"reason\":",
		    (long long)id);
	append_str(b, reason);
	buf_append(b, "}\n", 2);
}

void
handler_process_proto_shutdown(struct buf *b)
{
	static const char line[] = "{\"type\":\"shutdown\"}\n";
	buf_append(b, line, sizeof(line) - 1);
}

void
handler_process_proto_free(struct proto_msg *m)
{
	free(m->result);
	free(m->error);
	free(m->progress);
	*m = (struct proto_msg){0};
}

static int fail(char **why, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Sets *why (valid text) and returns -1. */
static int
fail(char **why, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	*why = xvasprintf(fmt, ap);
	va_end(ap);
	pgtext_sanitize(*why, strlen(*why));
	return -1;
}

/* A delay as the protocol writes it: seconds (a number) or a duration
 * string ("30s", "5m").  Returns 0, or -1. */
static int
read_delay(const cJSON *v, int64_t *ms)
{
	if (cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < 1e10) {
		*ms = (int64_t)(v->valuedouble * 1000. + 0.5);
		return 0;
	}
	if (cJSON_IsString(v) && duration_parse(v->valuestring, ms, NULL) == 0)
		return 0;
	return -1;
}

/* A failed reply's error: valid text, its end kept when long (a
 * traceback's last lines say the most); caller frees. */
static char *
error_text(const char *s)
{
	size_t n = strlen(s);
	char *e = n > ERROR_MAX ? xasprintf("...%s", s + n - ERROR_MAX)
				: xstrdup(s);

	n = strlen(e);
	while (n && (e[n - 1] == '\n' || e[n - 1] == ' '))
		e[--n] = '\0';
	pgtext_sanitize(e, n);
	return e;
}

static int
parse_hello(const cJSON *j, const char *kind, char **why)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "protocol");
	const cJSON *kinds = cJSON_GetObjectItemCaseSensitive(j, "kinds");
	const cJSON *k;
	bool found = false;

	if (!cJSON_IsNumber(v))
		return fail(why, "hello without a numeric protocol");
	if (v->valuedouble != HANDLER_PROCESS_PROTOCOL)
		return fail(why,
			    "protocol %g is not one this pgjobd speaks (%d)",
			    v->valuedouble, HANDLER_PROCESS_PROTOCOL);
	if (!cJSON_IsArray(kinds))
		return fail(why, "hello without a list of kinds");
	cJSON_ArrayForEach(k, kinds)
	{
		if (!cJSON_IsString(k))
			return fail(why, "hello's kinds are not strings");
		found |= !strcmp(k->valuestring, kind);
	}
	if (!found)
		return fail(why,
			    "the program does not handle kind %s (its hello "
			    "does not list it)",
			    kind);
	return 0;
}

/*
 * Whether the line has a \u0000 escape (an odd run of backslashes before
 * "u0000"): cJSON's strings end at the NUL it stands for, so a result
 * would come out cut short, where jsonb refuses it whole.
 */
static bool
has_nul_escape(const char *s, size_t len)
{
	for (size_t i = 0; i + 5 < len; i++) {
		size_t k = 0;
		if (memcmp(s + i + 1, "u0000", 5) != 0)
			continue;
		while (k <= i && s[i - k] == '\\')
			k++;
		if (k % 2)
			return true;
	}
	return false;
}

static void
parse_done(const cJSON *j, const char *line, size_t len, struct proto_msg *m)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "result");
	char *t;

	if (!v || cJSON_IsNull(v))
		return;
	t = has_nul_escape(line, len) ? NULL : cJSON_PrintUnformatted(v);
	if (t && pgtext_is_jsonb(t, strlen(t))) {
		m->result = t;
		return;
	}
	m->result_refused = true;
	free(t);
}

static int
parse_failed(const cJSON *j, struct proto_msg *m, char **why)
{
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
	const cJSON *r = cJSON_GetObjectItemCaseSensitive(j, "retry_in");
	const cJSON *d = cJSON_GetObjectItemCaseSensitive(j, "dead");

	if (!cJSON_IsString(e))
		return fail(why, "failed without an error string");
	if (r && !cJSON_IsNull(r) && read_delay(r, &m->delay_ms) < 0)
		return fail(why, "retry_in is not seconds or a duration");
	if (d && !cJSON_IsBool(d))
		return fail(why, "dead is not true or false");
	m->dead = cJSON_IsTrue(d);
	m->error = error_text(e->valuestring);
	return 0;
}

/* The message of a parsed object j. */
static int
parse_object(const cJSON *j, const char *line, size_t len, const char *kind,
	     struct proto_msg *m, char **why)
{
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "type");
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id");
	const cJSON *v;
	int i;

	if (!cJSON_IsString(t))
		return fail(why, "a message without a type");
	for (i = PROTO_PROGRESS; i >= 0; i--)
		if (!strcmp(t->valuestring, names[i]))
			break;
	if (i < 0)
		return fail(why, "unknown message type %.40s", t->valuestring);
	m->type = (enum proto_type)i;
	if (m->type == PROTO_HELLO)
		return parse_hello(j, kind, why);
	/* Job ids are below 2^53: a double holds them exactly. */
	if (!cJSON_IsNumber(id) || id->valuedouble < 1 ||
	    id->valuedouble > 9007199254740992. ||
	    id->valuedouble != (double)(int64_t)id->valuedouble)
		return fail(why, "%s without a numeric id", names[m->type]);
	m->id = (int64_t)id->valuedouble;
	switch (m->type) {
	case PROTO_DONE:
		parse_done(j, line, len, m);
		return 0;
	case PROTO_FAILED:
		return parse_failed(j, m, why);
	case PROTO_SNOOZE:
		v = cJSON_GetObjectItemCaseSensitive(j, "in");
		if (read_delay(v, &m->delay_ms) < 0)
			return fail(why, "snooze without \"in\" as seconds or "
					 "a duration");
		return 0;
	default: /* progress */
		v = cJSON_GetObjectItemCaseSensitive(j, "progress");
		m->progress = v ? cJSON_PrintUnformatted(v) : NULL;
		return 0;
	}
}

int
handler_process_proto_parse(const char *line, size_t len, const char *kind,
			    struct proto_msg *m, char **why)
{
	const char *end = NULL;
	cJSON *j = cJSON_ParseWithLengthOpts(line, len, &end, false);
	int rc;

	*m = (struct proto_msg){.delay_ms = -1};
	*why = NULL;
	while (end && end < line + len &&
	       (*end == ' ' || *end == '\t' || *end == '\r'))
		end++;
	if (!j || !cJSON_IsObject(j) || end != line + len)
		rc = fail(why, "a line that is not one JSON object (%.*s%s)",
			  (int)(len < QUOTE_MAX ? len : QUOTE_MAX), line,
			  len > QUOTE_MAX ? "..." : "");
	else
		rc = parse_object(j, line, len, kind, m, why);
	cJSON_Delete(j);
	if (rc < 0)
		handler_process_proto_free(m);
	return rc;
}
