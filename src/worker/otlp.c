/*
 * otlp: the attempts' spans, sent to an OTLP/HTTP endpoint (POST
 * /v1/traces, JSON) by a thread of the worker's own.  The loop only copies
 * a finished attempt into a bounded buffer under a mutex held for that
 * copy: it never waits for the network, so a slow or absent collector
 * cannot slow a claim.  A full buffer drops the new span and counts it.
 * The thread sends what there is every second, or at once when the buffer
 * is half full, one request at a time with libcurl's easy interface (the
 * library the http handler loads: handlers/handler_http_curl.c).
 */
#include "worker/otlp.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/config.h"
#include "common/job.h"
#include "common/log.h"
#include "common/trace.h"
#include "common/util.h"
#include "handlers/handler_http_curl.h"

/* How long a request may take, and how often the thread sends. */
#define SEND_TIMEOUT_MS 5000
#define SEND_EVERY_MS	1000
/* At most one warning a minute about dropped or unsent spans. */
#define WARN_EVERY_MS 60000

struct span {
	char trace[33], id[17], parent[17];
	unsigned flags;
	int64_t start_ns, end_ns;
	int64_t job_id;
	int attempt;
	const char *outcome; /* static */
	char kind[128], queue[128], worker[128];
};

struct otlp {
	char *url, *service;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct span *buf; /* cap, oldest first from head */
	int cap, head, n;
	int stop;
	/* Under mu: spans dropped (buffer full), sent, not sent (the
	 * endpoint failed); what the loop last warned about. */
	uint64_t dropped, sent, failed;
	uint64_t warned_dropped, warned_failed;
	int64_t warned_ms;
};

static int64_t
realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void
add_attr(cJSON *attrs, const char *key, const char *s, int64_t i)
{
	cJSON *a = cJSON_CreateObject();
	cJSON *v = cJSON_CreateObject();
	char num[24];
	cJSON_AddStringToObject(a, "key", key);
	if (s) {
		cJSON_AddStringToObject(v, "stringValue", s);
	} else {
		/* int64 is a string in OTLP's JSON (the protobuf mapping). */
		snprintf(num, sizeof(num), "%lld", (long long)i);
		cJSON_AddStringToObject(v, "intValue", num);
	}
	cJSON_AddItemToObject(a, "value", v);
	cJSON_AddItemToArray(attrs, a);
}

/*
 * One ExportTraceServiceRequest (opentelemetry-proto's
 * collector/trace/v1) in OTLP's JSON: ids in hex, 64-bit integers as
 * strings, enums as numbers.  The attempt is a CONSUMER span named after
 * OpenTelemetry's messaging conventions ("process <queue>"), a child of the
 * span the job was enqueued in.
 */
static char *
request_json(const struct otlp *o, const struct span *s, int n)
{
	cJSON *root = cJSON_CreateObject();
	cJSON *rs = cJSON_AddArrayToObject(root, "resourceSpans");
	cJSON *r = cJSON_CreateObject();
	cJSON_AddItemToArray(rs, r);
	cJSON *res = cJSON_AddObjectToObject(r, "resource");
	cJSON *rattrs = cJSON_AddArrayToObject(res, "attributes");
	add_attr(rattrs, "service.name", o->service, 0);
	cJSON *ss = cJSON_AddArrayToObject(r, "scopeSpans");
	cJSON *sc = cJSON_CreateObject();
	cJSON_AddItemToArray(ss, sc);
	cJSON *scope = cJSON_AddObjectToObject(sc, "scope");
	cJSON_AddStringToObject(scope, "name", "pgjobd");
	cJSON_AddStringToObject(scope, "version", PGJOBD_VERSION);
	cJSON *spans = cJSON_AddArrayToObject(sc, "spans");
	for (int i = 0; i < n; i++) {
		char name[160], t[24];
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "traceId", s[i].trace);
		cJSON_AddStringToObject(j, "spanId", s[i].id);
		cJSON_AddStringToObject(j, "parentSpanId", s[i].parent);
		snprintf(name, sizeof(name), "process %s", s[i].queue);
		cJSON_AddStringToObject(j, "name", name);
		cJSON_AddNumberToObject(j, "kind", 5); /* SPAN_KIND_CONSUMER */
		snprintf(t, sizeof(t), "%lld", (long long)s[i].start_ns);
		cJSON_AddStringToObject(j, "startTimeUnixNano", t);
		snprintf(t, sizeof(t), "%lld", (long long)s[i].end_ns);
		cJSON_AddStringToObject(j, "endTimeUnixNano", t);
		cJSON *a = cJSON_AddArrayToObject(j, "attributes");
		add_attr(a, "messaging.system", "pgjob", 0);
		add_attr(a, "messaging.operation.type", "process", 0);
		add_attr(a, "messaging.destination.name", s[i].queue, 0);
		add_attr(a, "messaging.message.id", NULL, s[i].job_id);
		add_attr(a, "pgjob.kind", s[i].kind, 0);
		add_attr(a, "pgjob.attempt", NULL, s[i].attempt);
		add_attr(a, "pgjob.outcome", s[i].outcome, 0);
		add_attr(a, "pgjob.worker", s[i].worker, 0);
		cJSON *st = cJSON_AddObjectToObject(j, "status");
		/* STATUS_CODE_OK, or ERROR for an attempt that failed. */
		int ok = strcmp(s[i].outcome, "done") == 0 ||
			 strcmp(s[i].outcome, "snoozed") == 0;
		cJSON_AddNumberToObject(st, "code", ok ? 1 : 2);
		cJSON_AddItemToArray(spans, j);
	}
	char *out = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	if (!out)
		abort(); /* out of memory, as xmalloc() */
	return out;
}

static size_t
discard(char *p, size_t size, size_t n, void *arg)
{
	(void)p;
	(void)arg;
	return size * n;
}

/* One request; 0 when the endpoint answered 2xx. */
static int
post(const struct otlp *o, const char *body)
{
	CURL *e = lc.easy_init();
	struct curl_slist *h = NULL;
	long code = 0;
	int rc = -1;
	if (!e)
		return -1;
	h = handler_http_curl_slist_add(h, "Content-Type: application/json");
	h = handler_http_curl_slist_add(h, "Expect:");
	lc.easy_setopt(e, CURLOPT_URL, o->url);
	lc.easy_setopt(e, CURLOPT_HTTPHEADER, h);
	lc.easy_setopt(e, CURLOPT_POSTFIELDS, body);
	lc.easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)SEND_TIMEOUT_MS);
	/* A thread: no SIGALRM for the resolver's timeout. */
	lc.easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	lc.easy_setopt(e, CURLOPT_WRITEFUNCTION, discard);
	lc.easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	if (lc.easy_perform(e) == CURLE_OK &&
	    lc.easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code) == CURLE_OK &&
	    code >= 200 && code < 300)
		rc = 0;
	lc.slist_free_all(h);
	lc.easy_cleanup(e);
	return rc;
}

static void *
sender(void *arg)
{
	struct otlp *o = arg;
	struct span *batch = xcalloc((size_t)o->cap, sizeof(*batch));
	for (;;) {
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += SEND_EVERY_MS / 1000;
		pthread_mutex_lock(&o->mu);
		while (!o->stop && o->n < (o->cap + 1) / 2)
			if (pthread_cond_timedwait(&o->cv, &o->mu, &until) ==
			    ETIMEDOUT)
				break;
		int n = o->n, stop = o->stop;
		for (int i = 0; i < n; i++)
			batch[i] = o->buf[(o->head + i) % o->cap];
		o->head = (o->head + n) % o->cap;
		o->n = 0;
		pthread_mutex_unlock(&o->mu);
		if (n > 0) {
			char *body = request_json(o, batch, n);
			int rc = post(o, body);
			free(body);
			pthread_mutex_lock(&o->mu);
			if (rc == 0)
				o->sent += (uint64_t)n;
			else
				o->failed += (uint64_t)n;
			pthread_mutex_unlock(&o->mu);
		}
		if (stop)
			break;
	}
	free(batch);
	return NULL;
}

struct otlp *
otlp_new(const struct config *cfg)
{
	if (!cfg->tracing_endpoint)
		return NULL;
	const char *why = handler_http_curl_init();
	if (why) {
		log_errorx("tracing: no spans sent: %s", why);
		return NULL;
	}
	struct otlp *o = xcalloc(1, sizeof(*o));
	const char *base = cfg->tracing_endpoint;
	size_t len = strlen(base);
	/* otlp_endpoint is the base URL, as OTEL_EXPORTER_OTLP_ENDPOINT. */
	o->url = xasprintf("%.*s/v1/traces",
			   (int)(len && base[len - 1] == '/' ? len - 1 : len),
			   base);
	o->service =
		xstrdup(cfg->tracing_service ? cfg->tracing_service : "pgjobd");
	o->cap = cfg->tracing_buffer > 0 ? cfg->tracing_buffer : 2048;
	o->buf = xcalloc((size_t)o->cap, sizeof(*o->buf));
	pthread_mutex_init(&o->mu, NULL);
	pthread_cond_init(&o->cv, NULL);
	if (pthread_create(&o->thread, NULL, sender, o) != 0) {
		log_errorx("tracing: no spans sent: cannot start a thread");
		pthread_mutex_destroy(&o->mu);
		pthread_cond_destroy(&o->cv);
		free(o->buf);
		free(o->url);
		free(o->service);
		free(o);
		return NULL;
	}
	return o;
}

static void
copy(char *dst, size_t len, const char *s)
{
	snprintf(dst, len, "%s", s ? s : "");
}

/* Under mu: a warning a minute at most, of what was dropped or not sent
 * since the last one. */
static void
warn_losses(struct otlp *o)
{
	int64_t now = util_now_ms();
	if (now - o->warned_ms < WARN_EVERY_MS)
		return;
	if (o->dropped > o->warned_dropped || o->failed > o->warned_failed) {
		log_warnx("tracing: %llu spans dropped (buffer full) and %llu "
			  "not accepted by %s so far",
			  (unsigned long long)o->dropped,
			  (unsigned long long)o->failed, o->url);
		o->warned_dropped = o->dropped;
		o->warned_failed = o->failed;
		o->warned_ms = now;
	}
}

void
otlp_span(struct otlp *o, const struct job *job, int64_t wall_ms,
	  const char *outcome, const char *worker)
{
	if (!o || !job->traceparent[0] || !trace_valid(job->trace))
		return;
	int64_t end = realtime_ns();
	pthread_mutex_lock(&o->mu);
	if (o->n == o->cap) {
		o->dropped++;
	} else {
		struct span *s = &o->buf[(o->head + o->n) % o->cap];
		memcpy(s->trace, job->traceparent + 3, 32);
		s->trace[32] = '\0';
		memcpy(s->id, job->traceparent + 36, 16);
		s->id[16] = '\0';
		memcpy(s->parent, job->trace + 36, 16);
		s->parent[16] = '\0';
		s->flags = (unsigned)strtoul(job->traceparent + 53, NULL, 16);
		s->end_ns = end;
		s->start_ns = end - (wall_ms > 0 ? wall_ms : 0) * 1000000;
		s->job_id = job->id;
		s->attempt = job->attempt;
		s->outcome = outcome;
		copy(s->kind, sizeof(s->kind), job->kind);
		copy(s->queue, sizeof(s->queue), job->queue);
		copy(s->worker, sizeof(s->worker), worker);
		if (++o->n >= (o->cap + 1) / 2)
			pthread_cond_signal(&o->cv);
	}
	warn_losses(o);
	pthread_mutex_unlock(&o->mu);
}

void
otlp_free(struct otlp *o)
{
	if (!o)
		return;
	pthread_mutex_lock(&o->mu);
	o->stop = 1;
	pthread_cond_signal(&o->cv);
	pthread_mutex_unlock(&o->mu);
	pthread_join(o->thread, NULL);
	log_info("tracing: %llu spans sent, %llu dropped (buffer full), %llu "
		 "not accepted by %s",
		 (unsigned long long)o->sent, (unsigned long long)o->dropped,
		 (unsigned long long)o->failed, o->url);
	pthread_mutex_destroy(&o->mu);
	pthread_cond_destroy(&o->cv);
	free(o->buf);
	free(o->url);
	free(o->service);
	free(o);
}
