/*
 * example.c: a complete pgjobd handler plugin, and the one the tests use.
 *
 * Build:   cc -shared -fPIC -o pgjobd_example.so example.c \
 *              $(pkg-config --cflags pgjobd-plugin)
 * Config:  handlers:
 *            example:
 *              type: plugin
 *              library: pgjobd_example.so
 *              symbol: pgjobd_example
 *
 * What it does with a job's payload (a JSON object):
 *   {} or anything else    done, result {"ok":true}
 *   {"fail": "retry"}      retry, with an error
 *   {"fail": "dead"}       fail: the job is dead at once
 *   {"retry_in": 30}       snooze: run again in 30 seconds
 *   {"sleep_ms": 500}      sleeps first (a slow job; a timeout test)
 *   {"crash": true}        raises SIGSEGV (a crash test: kills the worker)
 *
 * To stay self-contained it looks keys up with a tiny scanner instead of a
 * JSON library: good enough for a demonstration (a key that appears inside
 * a string value would fool it); a real plugin should parse the payload
 * with a JSON library.
 */
#include <ctype.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <pgjobd/plugin.h>

/* What init sets up: here only a counter, to show where state lives. */
struct example {
	unsigned long runs;
};

/* Points at the value of "key" in json, or NULL when absent. */
static const char *
find_value(const char *json, const char *key)
{
	size_t klen = strlen(key);
	const char *p = json;

	while ((p = strchr(p, '"')) != NULL) {
		p++;
		if (strncmp(p, key, klen) == 0 && p[klen] == '"') {
			p += klen + 1;
			while (isspace((unsigned char)*p))
				p++;
			if (*p != ':')
				continue;
			p++;
			while (isspace((unsigned char)*p))
				p++;
			return p;
		}
	}
	return NULL;
}

/* True when "key" has the string value s. */
static int
has_string(const char *json, const char *key, const char *s)
{
	const char *v = find_value(json, key);
	size_t n = strlen(s);

	return v && v[0] == '"' && strncmp(v + 1, s, n) == 0 && v[n + 1] == '"';
}

/* The number value of "key", or -1 when absent or not a number. */
static long
get_number(const char *json, const char *key)
{
	const char *v = find_value(json, key);

	if (!v || !isdigit((unsigned char)*v))
		return -1;
	return strtol(v, NULL, 10);
}

static char *
copy(const char *s)
{
	char *p = malloc(strlen(s) + 1); /* pgjobd frees it with free() */
	if (p)
		strcpy(p, s);
	return p;
}

/* config_json is the handler's config: map; this plugin needs none. */
static int
example_init(const char *config_json, void **state)
{
	struct example *ex = calloc(1, sizeof(*ex));

	(void)config_json;
	if (!ex)
		return 1; /* pgjobd logs it and retries the jobs later */
	*state = ex;
	return 0;
}

static void
example_fini(void *state)
{
	free(state);
}

static enum pgjobd_outcome
example_run(void *state, const struct pgjobd_job *job,
	    struct pgjobd_result *out)
{
	struct example *ex = state;
	const char *payload = job->payload;
	const char *v;
	long n;

	ex->runs++;
	if ((n = get_number(payload, "sleep_ms")) > 0) {
		struct timespec ts = {n / 1000, (n % 1000) * 1000000L};
		nanosleep(&ts, NULL);
	}
	if ((v = find_value(payload, "crash")) && strncmp(v, "true", 4) == 0)
		raise(SIGSEGV);
	if (has_string(payload, "fail", "dead")) {
		out->error = copy("example: asked to fail");
		return PGJOBD_FAIL;
	}
	if (has_string(payload, "fail", "retry")) {
		out->error = copy("example: asked to retry");
		return PGJOBD_RETRY;
	}
	if ((n = get_number(payload, "retry_in")) >= 0) {
		/* A delay and no error: a snooze, not a failed attempt. */
		out->retry_in_ms = (int64_t)n * 1000;
		return PGJOBD_RETRY;
	}
	out->result = copy("{\"ok\":true}");
	return PGJOBD_DONE;
}

/* The object that the handler's symbol: names. */
const struct pgjobd_plugin pgjobd_example = {
	.abi_version = PGJOBD_PLUGIN_ABI,
	.name = "example",
	.init = example_init,
	.fini = example_fini,
	.run = example_run,
};
