/*
 * The web console's page timings (tests/bench/web.sh): calls
 * web_api_get() as the server does, on one connection set up as the
 * server's (application_name "pgjob web", statement_timeout 5s), n times
 * per page after one warm-up call, and prints one line per page:
 *
 *   PAGE<TAB>p50 ms<TAB>p95 ms<TAB>max ms<TAB>bytes of the answer
 *
 * Usage: pgjobd_bench_web CONNINFO N PAGE...  where PAGE is a path under
 * /api/ with an optional query string ("jobs?state=dead&queue=email"; no
 * escapes).  A page that answers anything but 200 gets the line "PAGE
 * (answered STATUS)" with "-" for its figures, and the exit status is
 * then 1.  What it leaves out of a browser's request: HTTP, the session
 * check, the network.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"
#include "db/db.h"
#include "web/api.h"

struct query {
	char *text; /* "k=v\0k=v" */
	size_t len;
};

static const char *
query_get(void *ctx, const char *key)
{
	struct query *q = ctx;
	size_t n = strlen(key);
	for (char *p = q->text; p && p < q->text + q->len; p += strlen(p) + 1)
		if (strncmp(p, key, n) == 0 && p[n] == '=')
			return p + n + 1;
	return NULL;
}

static int
cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double
now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Times page n times; prints its line.  Returns 0, or -1 when it failed. */
static int
bench(struct db_conn *db, const char *page, int n)
{
	char *path = xstrdup(page);
	char *qm = strchr(path, '?');
	struct query q = {NULL, 0};
	if (qm) {
		*qm = '\0';
		q.text = qm + 1;
		q.len = strlen(q.text);
		for (size_t i = 0; i < q.len; i++)
			if (q.text[i] == '&')
				q.text[i] = '\0';
	}
	struct web_query wq = {query_get, &q};
	double *t = xcalloc((size_t)n, sizeof(double));
	size_t bytes = 0;
	int rc = 0;
	for (int i = -1; i < n && rc == 0; i++) {
		struct web_response out = {0};
		double t0 = now_ms();
		if (web_api_get(db, path, &wq, &out) < 0 || out.status != 200) {
			fprintf(stderr, "pgjobd_bench_web: %s: %d %s\n", page,
				out.status, out.body ? out.body : "");
			/* Its line, so that the table says it (web.sh). */
			printf("%s (answered %d)\t-\t-\t-\t-\n", page,
			       out.status);
			rc = -1;
		}
		if (i >= 0)
			t[i] = now_ms() - t0;
		bytes = out.len;
		free(out.body);
	}
	if (rc == 0) {
		qsort(t, (size_t)n, sizeof(double), cmp);
		printf("%s\t%.1f\t%.1f\t%.1f\t%zu\n", page, t[n / 2],
		       t[(n * 95 + 99) / 100 - 1], t[n - 1], bytes);
	}
	free(t);
	free(path);
	return rc;
}

int
main(int argc, char **argv)
{
	char *err;
	if (argc < 4) {
		fprintf(stderr, "usage: pgjobd_bench_web CONNINFO N PAGE...\n");
		return 2;
	}
	int n = atoi(argv[2]);
	struct db_conn *db = db_connect(argv[1], "pgjob web", &err);
	if (!db || n < 1) {
		fprintf(stderr, "pgjobd_bench_web: %s\n", db ? "N >= 1" : err);
		return 2;
	}
	if (web_api_session(db, &err) < 0) {
		fprintf(stderr, "pgjobd_bench_web: %s\n", err);
		return 1;
	}
	int rc = 0;
	for (int i = 3; i < argc; i++)
		rc |= bench(db, argv[i], n) < 0;
	db_close(db);
	return rc;
}
