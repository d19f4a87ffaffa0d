/*
 * otlp: the spans of a job's way through the queue (its enqueue, each
 * attempt's wait and the attempt itself: docs/tracing.md), sent to an
 * OTLP/HTTP endpoint (POST /v1/traces, JSON) by a thread of the worker's
 * own.  The loop only copies a finished attempt into a bounded buffer under
 * a mutex held for that copy: it never waits for the network, so a slow or
 * absent collector cannot slow a claim.  A full buffer drops the new
 * attempt's spans and counts them (/metrics: the worker's stats entry).
 * The thread sends what there is every second, or at once when the buffer
 * is half full, one request at a time with libcurl's easy interface (the
 * library the http handler loads: handlers/handler_http_curl.c).
 */
#include "worker/otlp.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/config.h"
#include "common/job.h"
#include "common/log.h"
#include "common/stats.h"
#include "common/text.h"
#include "common/trace.h"
#include "common/util.h"
#include "handlers/handler_http_curl.h"

/* How long a request may take, and how often the thread sends. */
#define SEND_TIMEOUT_MS 5000
#define SEND_EVERY_MS	1000
/* At most one warning a minute about dropped or unsent spans. */
#define WARN_EVERY_MS 60000

/* What is sent of one attempt: its span, its wait's, and its job's
 * enqueue's when it is the job's first; nspans of them. */
struct rec {
	char trace[33], id[17], parent[17], wait_id[17], enq_id[17];
	int64_t start_ns, end_ns;
	int64_t wait_ns; /* the wait's start; 0: no wait span */
	int64_t enq_ns;	 /* the enqueue; 0: no enqueue span */
	int nspans;
	int64_t job_id;
	int attempt;
	const char *outcome; /* static */
	char kind[128], queue[128], worker[128];
};

struct otlp {
	char *url, *service;
	struct stats_worker *st; /* the /metrics counters */
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct rec *buf; /* nrec, oldest first from head: n of them */
	int nrec, head, n;
	int cap, spans; /* the spans in buf[]: up to cap */
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

/* A string literal appended to a struct buf. */
#define LIT(b, s) buf_append((b), (s), sizeof(s) - 1)

static void
json_str(struct buf *b, const char *s)
{
	LIT(b, "\"");
	text_escape_append(b, s, true);
	LIT(b, "\"");
}

/* One attribute (key a constant), after a comma unless it is the first:
 * a string value, or (s NULL) an int64, a string in OTLP's JSON (the
 * protobuf mapping). */
static void
attr(struct buf *b, bool first, const char *key, const char *s, int64_t i)
{
	if (!first)
		LIT(b, ",");
	LIT(b, "{\"key\":\"");
	buf_append(b, key, strlen(key));
	LIT(b, "\",\"value\":{");
	if (s) {
		LIT(b, "\"stringValue\":");
		json_str(b, s);
	} else {
		LIT(b, "\"intValue\":\"");
		buf_append_int(b, (long long)i);
		LIT(b, "\"");
	}
	LIT(b, "}}");
}

/* One span of r, named "<verb> <queue>", with the attributes all three
 * have, then (attempt) the attempt's and its wait's: its number, outcome
 * and worker; then (status > 0) its status code. */
static void
span_json(struct buf *b, const struct rec *r, const char *id, const char *verb,
	  int kind, int64_t start, int64_t end, const char *op, bool attempt,
	  int status)
{
	LIT(b, "{\"traceId\":");
	json_str(b, r->trace);
	LIT(b, ",\"spanId\":");
	json_str(b, id);
	LIT(b, ",\"parentSpanId\":");
	json_str(b, r->parent);
	LIT(b, ",\"name\":\"");
	buf_append(b, verb, strlen(verb));
	LIT(b, " ");
	text_escape_append(b, r->queue, true);
	LIT(b, "\",\"kind\":");
	buf_append_int(b, kind);
	LIT(b, ",\"startTimeUnixNano\":\"");
	buf_append_int(b, (long long)start);
	LIT(b, "\",\"endTimeUnixNano\":\"");
	buf_append_int(b, (long long)end);
	LIT(b, "\",\"attributes\":[");
	attr(b, true, "messaging.system", "pgjob", 0);
	if (op)
		attr(b, false, "messaging.operation.type", op, 0);
	attr(b, false, "messaging.destination.name", r->queue, 0);
	attr(b, false, "messaging.message.id", NULL, r->job_id);
	attr(b, false, "pgjob.kind", r->kind, 0);
	if (attempt) {
		attr(b, false, "pgjob.attempt", NULL, r->attempt);
		attr(b, false, "pgjob.outcome", r->outcome, 0);
		attr(b, false, "pgjob.worker", r->worker, 0);
	}
	LIT(b, "]");
	if (status) {
		LIT(b, ",\"status\":{\"code\":");
		buf_append_int(b, status);
		LIT(b, "}");
	}
	LIT(b, "}");
}

/*
 * One ExportTraceServiceRequest (opentelemetry-proto's
 * collector/trace/v1) in OTLP's JSON: ids in hex, 64-bit integers as
 * strings, enums as numbers.  Named and kinded after OpenTelemetry's
 * messaging conventions: the enqueue a PRODUCER span "send <queue>", the
 * attempt a CONSUMER span "process <queue>"; the wait, which they have no
 * name for, an INTERNAL span "wait <queue>".  All three are children of
 * the span the job was enqueued in (docs/tracing.md says why).
 *
 * Written as text, the fields in the order cJSON printed them until
 * 2026-12-07: a tree of cJSON objects (some forty allocations a span)
 * made the export cost 11 µs of pgjobd's CPU a job of three spans, a
 * third of the rate of a 2-core machine (docs/performance.md, "Changes
 * to the design").  Strings as the log's JSON lines write them
 * (text_escape_append()): valid JSON whatever a kind, a queue or a
 * worker's name holds, where cJSON passed a byte that is not UTF-8 on.
 */
static char *
request_json(const struct otlp *o, const struct rec *s, int n)
{
	struct buf b = {0};
	LIT(&b, "{\"resourceSpans\":[{\"resource\":{\"attributes\":[");
	attr(&b, true, "service.name", o->service, 0);
	buf_appendf(&b,
		    "]},\"scopeSpans\":[{\"scope\":{\"name\":\"pgjobd\","
		    "\"version\":\"%s\"},\"spans\":[",
		    PGJOBD_VERSION);
	for (int i = 0; i < n; i++) {
		const struct rec *x = &s[i];
		if (i)
			LIT(&b, ",");
		if (x->enq_ns) {
			span_json(&b, x, x->enq_id, "send", 4 /* PRODUCER */,
				  x->enq_ns, x->enq_ns, "send", false, 0);
			LIT(&b, ",");
		}
		if (x->wait_ns) {
			span_json(&b, x, x->wait_id, "wait", 1 /* INTERNAL */,
				  x->wait_ns, x->start_ns, NULL, true, 0);
			LIT(&b, ",");
		}
		/* STATUS_CODE_OK, or ERROR for an attempt that failed. */
		int ok = strcmp(x->outcome, "done") == 0 ||
			 strcmp(x->outcome, "snoozed") == 0;
		span_json(&b, x, x->id, "process", 5 /* CONSUMER */,
			  x->start_ns, x->end_ns, "process", true, ok ? 1 : 2);
	}
	LIT(&b, "]}]}]}");
	return b.data;
}

static size_t
discard(char *p, size_t size, size_t n, void *arg)
{
	(void)p;
	(void)arg;
	return size * n;
}

/* One request: -1 when the endpoint answered 2xx, else why it failed
 * (enum stats_trace_reason). */
static int
post(const struct otlp *o, const char *body)
{
	CURL *e = lc.easy_init();
	struct curl_slist *h = NULL;
	long code = 0;
	int why = STATS_TRACE_OTHER;
	if (!e)
		return why;
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
	CURLcode rc = lc.easy_perform(e);
	if (rc == CURLE_OK &&
	    lc.easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code) == CURLE_OK)
		why = code >= 200 && code < 300 ? -1 : STATS_TRACE_STATUS;
	else if (rc == CURLE_COULDNT_CONNECT ||
		 rc == CURLE_COULDNT_RESOLVE_HOST ||
		 rc == CURLE_COULDNT_RESOLVE_PROXY)
		why = STATS_TRACE_CONNECT;
	else if (rc == CURLE_OPERATION_TIMEDOUT)
		why = STATS_TRACE_TIMEOUT;
	lc.slist_free_all(h);
	lc.easy_cleanup(e);
	return why;
}

static void *
sender(void *arg)
{
	struct otlp *o = arg;
	struct rec *batch = xcalloc((size_t)o->nrec, sizeof(*batch));
	for (;;) {
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += SEND_EVERY_MS / 1000;
		pthread_mutex_lock(&o->mu);
		while (!o->stop && o->spans < (o->cap + 1) / 2)
			if (pthread_cond_timedwait(&o->cv, &o->mu, &until) ==
			    ETIMEDOUT)
				break;
		int n = o->n, stop = o->stop, spans = o->spans;
		for (int i = 0; i < n; i++)
			batch[i] = o->buf[(o->head + i) % o->nrec];
		o->head = (o->head + n) % o->nrec;
		o->n = 0;
		o->spans = 0;
		stats_set(&o->st->trace_queued, 0);
		pthread_mutex_unlock(&o->mu);
		if (n > 0) {
			char *body = request_json(o, batch, n);
			int64_t t0 = util_now_us();
			int why = post(o, body);
			stats_observe(
				o->st->trace_send, &o->st->trace_send_count,
				&o->st->trace_send_sum_us, util_now_us() - t0);
			free(body);
			pthread_mutex_lock(&o->mu);
			if (why < 0) {
				o->sent += (uint64_t)spans;
				stats_add(&o->st->trace_exported,
					  (uint64_t)spans);
			} else {
				o->failed += (uint64_t)spans;
				stats_add(&o->st->trace_failed,
					  (uint64_t)spans);
				stats_add(&o->st->trace_failures[why], 1);
			}
			pthread_mutex_unlock(&o->mu);
		}
		if (stop)
			break;
	}
	free(batch);
	return NULL;
}

struct otlp *
otlp_new(const struct config *cfg, struct stats_worker *st)
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
	o->st = st;
	/* At least an attempt's three spans: a smaller buffer (the config
	 * takes 1 and 2, as it did when a span was an attempt's) would drop
	 * every first attempt. */
	o->cap = cfg->tracing_buffer <= 0  ? 2048
		 : cfg->tracing_buffer < 3 ? 3
					   : cfg->tracing_buffer;
	/* Each attempt's record holds 2 or 3 of the cap spans. */
	o->nrec = o->cap / 2;
	o->buf = xcalloc((size_t)o->nrec, sizeof(*o->buf));
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
	stats_set(&st->trace_capacity, o->cap);
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

/*
 * The job's enqueue is sent with its first attempt that ends it or
 * schedules its retry: an attempt given back (snoozed, interrupted) or
 * lost is run again as the first, which sends it then.  Its span id is the
 * same each time (trace_enqueue_span_id()): a job that pgjob retry runs
 * again sends the same span again, not a second enqueue.
 */
static int
first(const struct job *job, const char *outcome)
{
	return job->attempt - job->lost_attempts == 1 &&
	       (strcmp(outcome, "done") == 0 || strcmp(outcome, "retry") == 0 ||
		strcmp(outcome, "dead") == 0);
}

/* Fills r with job's attempt, which ended at end_ns after wall_ms. */
static void
fill(struct rec *r, const struct job *job, int64_t end_ns, int64_t wall_ms,
     const char *outcome, const char *worker)
{
	memcpy(r->trace, job->traceparent + 3, 32);
	r->trace[32] = '\0';
	memcpy(r->id, job->traceparent + 36, 16);
	r->id[16] = '\0';
	memcpy(r->parent, job->trace + 36, 16);
	r->parent[16] = '\0';
	r->end_ns = end_ns;
	r->start_ns = end_ns - (wall_ms > 0 ? wall_ms : 0) * 1000000;
	/* The claim measured the times before it on the database's clock,
	 * from its now(); they are placed before the attempt's start on
	 * this one, so that a job's spans keep their order whatever the two
	 * clocks' skew (docs/tracing.md). */
	r->nspans = 1;
	r->wait_ns = r->enq_ns = 0;
	if (job->waited_us >= 0) {
		r->wait_ns = r->start_ns - job->waited_us * 1000;
		trace_span_id(r->wait_id);
		r->nspans++;
	}
	if (job->enqueued_us >= 0 && first(job, outcome)) {
		r->enq_ns = r->start_ns - job->enqueued_us * 1000;
		trace_enqueue_span_id(r->trace, job->id, r->enq_id);
		r->nspans++;
	}
	r->job_id = job->id;
	r->attempt = job->attempt;
	r->outcome = outcome;
	copy(r->kind, sizeof(r->kind), job->kind);
	copy(r->queue, sizeof(r->queue), job->queue);
	copy(r->worker, sizeof(r->worker), worker);
}

void
otlp_span(struct otlp *o, const struct job *job, int64_t wall_ms,
	  const char *outcome, const char *worker)
{
	if (!o || !job->traceparent[0] || !trace_valid(job->trace))
		return;
	struct rec r;
	/* Made before the lock: the loop holds it only for the copy. */
	fill(&r, job, realtime_ns(), wall_ms, outcome, worker);
	pthread_mutex_lock(&o->mu);
	if (o->spans + r.nspans > o->cap || o->n == o->nrec) {
		o->dropped += (uint64_t)r.nspans;
		stats_add(&o->st->trace_dropped, (uint64_t)r.nspans);
	} else {
		o->buf[(o->head + o->n) % o->nrec] = r;
		o->n++;
		o->spans += r.nspans;
		stats_set(&o->st->trace_queued, o->spans);
		if (o->spans >= (o->cap + 1) / 2)
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
	stats_set(&o->st->trace_capacity, 0);
	pthread_mutex_destroy(&o->mu);
	pthread_cond_destroy(&o->cv);
	free(o->buf);
	free(o->url);
	free(o->service);
	free(o);
}
