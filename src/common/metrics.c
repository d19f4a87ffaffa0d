/*
 * metrics: the Prometheus text format and metrics.listen's "host:port".
 * See metrics.h.
 */
#include "common/metrics.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"

int
metrics_parse_listen(const char *s, char **host, char **port)
{
	const char *h = s, *colon, *p;
	size_t hlen;

	if (s[0] == '[') {
		const char *end = strchr(s, ']');
		if (!end || end[1] != ':' || end == s + 1)
			return -1;
		h = s + 1;
		hlen = (size_t)(end - h);
		colon = end + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon)
			return -1;
		hlen = (size_t)(colon - s);
		if (memchr(s, ':', hlen)) /* IPv6 needs its brackets */
			return -1;
	}
	p = colon + 1;
	if (!*p || strlen(p) > 5 || strspn(p, "0123456789") != strlen(p) ||
	    atol(p) > 65535)
		return -1;
	if (hlen == 0 || (hlen == 1 && h[0] == '*'))
		*host = NULL;
	else
		*host = xstrndup(h, hlen);
	*port = xstrdup(p);
	return 0;
}

/*
 * Appends s with \ and newline escaped, and " too when quote is set (a
 * label value).  A label value is also made valid UTF-8 without control
 * characters: a byte that is not UTF-8 (a name cut inside a character)
 * and a control character other than newline read '?'.  The text format
 * must be UTF-8, and a scraper refuses the whole page for one bad byte:
 * a queue's name is the only place where such a byte could come from.
 */
static void
escape(struct buf *b, const char *s, int quote)
{
	while (*s) {
		uint32_t cp;
		size_t n = quote ? text_char(s, &cp) : 1;
		if (*s == '\\')
			buf_append(b, "\\\\", 2);
		else if (*s == '\n')
			buf_append(b, "\\n", 2);
		else if (*s == '"' && quote)
			buf_append(b, "\\\"", 2);
		else if (quote && (n == 0 || text_is_control(cp)))
			buf_append(b, "?", 1);
		else
			buf_append(b, s, n);
		s += n ? n : 1;
	}
}

/* The shortest decimal that reads back as v; Prometheus' names for the
 * special values. */
static void
value(struct buf *b, double v)
{
	char s[40];

	if (isnan(v)) {
		buf_append(b, "NaN", 3);
		return;
	}
	if (isinf(v)) {
		buf_append(b, v > 0 ? "+Inf" : "-Inf", 4);
		return;
	}
	for (int prec = 15; prec <= 17; prec++) {
		snprintf(s, sizeof(s), "%.*g", prec, v);
		if (strtod(s, NULL) == v)
			break;
	}
	buf_append(b, s, strlen(s));
}

void
metrics_label(struct buf *labels, const char *name, const char *v)
{
	buf_appendf(labels, "%s%s=\"", labels->len ? "," : "", name);
	escape(labels, v, 1);
	buf_append(labels, "\"", 1);
}

void
metrics_label_int(struct buf *labels, const char *name, long long v)
{
	buf_appendf(labels, "%s%s=\"%lld\"", labels->len ? "," : "", name, v);
}

void
metrics_header(struct buf *b, const char *name, const char *type,
	       const char *help)
{
	buf_appendf(b, "# HELP %s ", name);
	escape(b, help, 0);
	buf_appendf(b, "\n# TYPE %s %s\n", name, type);
}

/* "name{labels} " (no braces without labels). */
static void
series(struct buf *b, const char *name, const char *suffix, const char *labels)
{
	if (labels && *labels)
		buf_appendf(b, "%s%s{%s} ", name, suffix, labels);
	else
		buf_appendf(b, "%s%s ", name, suffix);
}

static void
sample(struct buf *b, const char *name, const char *type, const char *help,
       const char *labels, double v)
{
	if (help)
		metrics_header(b, name, type, help);
	series(b, name, "", labels);
	value(b, v);
	buf_append(b, "\n", 1);
}

void
metrics_counter(struct buf *b, const char *name, const char *help,
		const char *labels, double v)
{
	sample(b, name, "counter", help, labels, v);
}

void
metrics_gauge(struct buf *b, const char *name, const char *help,
	      const char *labels, double v)
{
	sample(b, name, "gauge", help, labels, v);
}

static void
bucket(struct buf *b, const char *name, const char *labels, double le,
       uint64_t cum)
{
	buf_appendf(b, "%s_bucket{%s%sle=\"", name, labels ? labels : "",
		    labels && *labels ? "," : "");
	value(b, le);
	buf_appendf(b, "\"} %llu\n", (unsigned long long)cum);
}

void
metrics_histogram(struct buf *b, const char *name, const char *help,
		  const char *labels, const double *bounds,
		  const uint64_t *counts, size_t n, double sum, uint64_t count)
{
	uint64_t cum = 0;

	if (help)
		metrics_header(b, name, "histogram", help);
	for (size_t i = 0; i < n; i++) {
		cum += counts[i];
		bucket(b, name, labels, bounds[i], cum);
	}
	bucket(b, name, labels, INFINITY, count);
	series(b, name, "_sum", labels);
	value(b, sum);
	buf_append(b, "\n", 1);
	series(b, name, "_count", labels);
	buf_appendf(b, "%llu\n", (unsigned long long)count);
}

size_t
metrics_bucket(const double *bounds, size_t n, double v)
{
	size_t i = 0;
	while (i < n && !(v <= bounds[i]))
		i++;
	return i;
}

/* ---- several expositions as one (databases:) ---- */

/* One family while merging: its HELP and TYPE, then every part's
 * samples. */
struct family {
	char *name;
	struct buf head, samples;
};

/* The family called name (the text up to the first space) in f, added
 * if new. */
static struct family *
family_of(struct family **f, size_t *n, const char *name, size_t len,
	  bool *added)
{
	for (size_t i = 0; i < *n; i++)
		if (strlen((*f)[i].name) == len &&
		    memcmp((*f)[i].name, name, len) == 0) {
			*added = false;
			return &(*f)[i];
		}
	*f = xrealloc(*f, (*n + 1) * sizeof(**f));
	struct family *new = &(*f)[(*n)++];
	*new = (struct family){.name = xstrndup(name, len)};
	*added = true;
	return new;
}

/* Appends the sample line (len bytes, no newline) with label first. */
static void
labelled(struct buf *b, const char *line, size_t len, const char *label)
{
	size_t name = strcspn(line, "{ ");
	if (name > len)
		name = len;
	buf_append(b, line, name);
	if (name < len && line[name] == '{') {
		buf_appendf(b, "{%s%s", label,
			    line[name + 1] == '}' ? "" : ",");
		name++;
	} else {
		buf_appendf(b, "{%s}", label);
	}
	buf_append(b, line + name, len - name);
	buf_append(b, "\n", 1);
}

void
metrics_merge(struct buf *out, const char *label_name,
	      const char *const *values, const struct buf *parts, size_t n)
{
	struct family *f = NULL;
	size_t nf = 0;

	for (size_t p = 0; p < n; p++) {
		struct buf label = {0};
		struct family *cur = NULL;
		bool own_head = false;
		metrics_label(&label, label_name, values[p]);
		for (const char *l = parts[p].data; l && *l;) {
			size_t len = strcspn(l, "\n");
			if (len > 7 && (!strncmp(l, "# HELP ", 7) ||
					!strncmp(l, "# TYPE ", 7))) {
				const char *nm = l + 7;
				size_t nlen = strcspn(nm, " \n");
				if (l[2] == 'H')
					cur = family_of(&f, &nf, nm, nlen,
							&own_head);
				/* HELP and TYPE once: from the first part
				 * that has the family. */
				if (cur && own_head) {
					buf_append(&cur->head, l, len);
					buf_append(&cur->head, "\n", 1);
				}
			} else if (len > 0 && l[0] != '#') {
				if (!cur)
					cur = family_of(&f, &nf, "", 0,
							&own_head);
				labelled(&cur->samples, l, len, label.data);
			}
			l += len + (l[len] == '\n');
		}
		buf_free(&label);
	}
	for (size_t i = 0; i < nf; i++) {
		if (f[i].head.len)
			buf_append(out, f[i].head.data, f[i].head.len);
		if (f[i].samples.len)
			buf_append(out, f[i].samples.data, f[i].samples.len);
		free(f[i].name);
		buf_free(&f[i].head);
		buf_free(&f[i].samples);
	}
	free(f);
}
