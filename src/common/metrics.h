/*
 * metrics: the Prometheus text exposition format, and the "host:port" of
 * metrics.listen.  Pure: the functions append to a struct buf and need
 * neither a loop nor a server (the server is daemon/httpd.c).
 */
#ifndef PGJOBD_METRICS_H
#define PGJOBD_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "common/util.h"

/* The Content-Type of the Prometheus text exposition format. */
#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/*
 * Splits "host:port" into new strings (caller frees both):
 *   "127.0.0.1:9188", "localhost:9188"  host as written
 *   "[::1]:9188"                        host "::1" (brackets for IPv6)
 *   ":9188", "*:9188"                   *host = NULL: every interface
 * The port is 0..65535, digits only (0: the kernel picks one).  Returns 0,
 * or -1 (and nothing allocated) when s is not of that form.
 */
int metrics_parse_listen(const char *s, char **host, char **port);

/* ---- Prometheus text format ---- */

/*
 * Appends name="value" to a label set, after a comma when it is not empty,
 * with value escaped (\\, \" and \n).  Label names are trusted identifiers.
 * The set is then passed as labels below (NULL or "" for none).
 */
void metrics_label(struct buf *labels, const char *name, const char *value);
/* The same with an integer value (slot="3"). */
void metrics_label_int(struct buf *labels, const char *name, long long value);

/*
 * Appends "# HELP name help" (help escaped: \\ and \n) and "# TYPE name
 * type" ("counter", "gauge", "histogram").  The sample functions below call
 * it themselves when given a help text.
 */
void metrics_header(struct buf *b, const char *name, const char *type,
		    const char *help);

/*
 * Appends one sample line, "name{labels} value".  A family's HELP and TYPE
 * must appear once, before its first sample: pass help for the first
 * series of a name and NULL for the rest.  Values print in the shortest
 * form that reads back exactly; NaN and infinities as NaN, +Inf, -Inf.
 */
void metrics_counter(struct buf *b, const char *name, const char *help,
		     const char *labels, double v);
void metrics_gauge(struct buf *b, const char *name, const char *help,
		   const char *labels, double v);

/*
 * Appends one histogram series: name_bucket{labels,le="bound"} with
 * cumulative counts for each of the n bounds (ascending), le="+Inf" (=
 * count), name_sum and name_count.  counts[i] is the number of observations
 * in bucket i alone, bounds[i-1] < v <= bounds[i] (see metrics_bucket());
 * observations above the last bound are only in count.  help as above.
 */
void metrics_histogram(struct buf *b, const char *name, const char *help,
		       const char *labels, const double *bounds,
		       const uint64_t *counts, size_t n, double sum,
		       uint64_t count);
/* The bucket of v: the first i with v <= bounds[i], or n (above all). */
size_t metrics_bucket(const double *bounds, size_t n, double v);

/*
 * Appends the n expositions parts[] (each as the functions above write
 * one) as one: each family's HELP and TYPE once, then the samples of every
 * part in turn, each with label_name="values[i]" as its first label
 * (escaped).  With databases:, /metrics renders each database's workers
 * apart and merges them with database="name": a family's samples stay
 * together, as the text format requires.
 */
void metrics_merge(struct buf *out, const char *label_name,
		   const char *const *values, const struct buf *parts,
		   size_t n);

#endif
