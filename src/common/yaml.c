/*
 * yaml: parses a YAML document with libyaml's document API into a tree of
 * ynodes, and reads typed values out of it, recording every problem with
 * its position for config to report.
 */
#include "common/yaml.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
/* libyaml's header (this module's own is "common/yaml.h"). */
#include <yaml.h>

#include "common/text.h"
#include "common/duration.h"
#include "common/env.h"
#include "common/util.h"

#define DURATION_HINT  "(use 500ms, 30s, 5m, 2h, 7d)"
#define JSON_MAX_DEPTH 64
/* Aliases can make a small file stand for a huge tree: cap what we copy. */
#define JSON_MAX_VALUES 100000

/* One recorded error, sorted by position when they are handed over. */
struct yaml_error {
	int line, column;
	size_t seq;
	char *msg;
};

void
yaml_doc_error(struct yaml_doc *d, const struct ynode *at, const char *path,
	       const char *fmt, ...)
{
	struct yaml_error *e;
	int line = at ? at->line : 1, column = at ? at->column : 1;
	char *what;
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&what, fmt, ap) < 0)
		abort(); /* out of memory, as in xmalloc() */
	va_end(ap);
	if (d->nerrs == d->caperrs) {
		d->caperrs = d->caperrs ? 2 * d->caperrs : 8;
		d->errs = xrealloc(d->errs, d->caperrs * sizeof(*d->errs));
	}
	e = &d->errs[d->nerrs];
	e->line = line;
	e->column = column;
	e->seq = d->nerrs++;
	char *msg =
		*path ? xasprintf("%s:%d:%d: %s: %s", d->name, line, column,
				  path, what)
		      : xasprintf("%s:%d:%d: %s", d->name, line, column, what);
	/* Messages quote keys and values, which reach a terminal or a log:
	 * one line, with nothing in it that a terminal would act on. */
	e->msg = text_safe(msg, NULL, NULL);
	free(msg);
	free(what);
}

static int
error_cmp(const void *a, const void *b)
{
	const struct yaml_error *x = a, *y = b;

	if (x->line != y->line)
		return x->line < y->line ? -1 : 1;
	if (x->column != y->column)
		return x->column < y->column ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

size_t
yaml_doc_take_errors(struct yaml_doc *d, char ***msgs)
{
	size_t n = d->nerrs;

	*msgs = NULL;
	if (n == 0)
		return 0;
	qsort(d->errs, n, sizeof(*d->errs), error_cmp);
	*msgs = xcalloc(n, sizeof(**msgs));
	for (size_t i = 0; i < n; i++)
		(*msgs)[i] = d->errs[i].msg;
	d->nerrs = 0;
	return n;
}

static void
syntax_at(struct yaml_doc *d, int line, int column, const char *problem)
{
	struct ynode at = {.line = line, .column = column};

	yaml_doc_error(d, &at, "syntax", "%s", problem);
}

static void
syntax_error(struct yaml_doc *d, const yaml_parser_t *p, const char *text,
	     size_t len)
{
	int line = (int)p->problem_mark.line + 1;
	int column = (int)p->problem_mark.column + 1;

	if (p->error == YAML_READER_ERROR) {
		/* The reader reports a byte offset only: count characters. */
		line = column = 1;
		for (size_t i = 0; i < p->problem_offset && i < len; i++) {
			if (text[i] == '\n') {
				line++;
				column = 1;
			} else if ((text[i] & 0xc0) != 0x80) {
				column++;
			}
		}
	}
	syntax_at(d, line, column, p->problem ? p->problem : "out of memory");
}

/* What the sort of a map's keys compares. */
struct key_sort {
	const struct ypair *pairs;
	size_t *compares;
};

/* By key bytes, then by position: equal keys stay in document order. */
static int
key_cmp(const void *a, const void *b, void *arg)
{
	const struct key_sort *ks = arg;
	size_t i = *(const size_t *)a, j = *(const size_t *)b;
	const struct ynode *x = ks->pairs[i].key, *y = ks->pairs[j].key;
	size_t n = x->len < y->len ? x->len : y->len;
	int c = memcmp(x->text, y->text, n);

	(*ks->compares)++;
	if (c == 0 && x->len != y->len)
		c = x->len < y->len ? -1 : 1;
	if (c == 0)
		c = i < j ? -1 : i > j;
	return c;
}

/*
 * Marks each pair of map n whose string key an earlier pair has: sorting
 * the keys once costs O(n log n), where comparing each key with every
 * earlier one took minutes for 100,000 keys (a reload, under a watchdog).
 * yaml_entry_ok() then reports each in document order.
 */
static void
mark_duplicates(struct yaml_doc *d, struct ynode *n)
{
	struct key_sort ks = {n->pairs, &d->key_compares};
	size_t *order = xcalloc(n->n, sizeof(*order)), m = 0;

	for (size_t i = 0; i < n->n; i++)
		if (n->pairs[i].key->type == YNODE_SCALAR)
			order[m++] = i;
	qsort_r(order, m, sizeof(*order), key_cmp, &ks);
	for (size_t i = 1; i < m; i++) {
		const struct ynode *x = n->pairs[order[i - 1]].key;
		const struct ynode *y = n->pairs[order[i]].key;
		n->pairs[order[i]].dup =
			x->len == y->len && !memcmp(x->text, y->text, x->len);
	}
	free(order);
}

/* Copies libyaml's nodes: ours are theirs, one for one, in the same order. */
static void
copy_tree(struct yaml_doc *d, yaml_document_t *doc)
{
	d->nnodes = (size_t)(doc->nodes.top - doc->nodes.start);
	d->nodes = xcalloc(d->nnodes, sizeof(*d->nodes));
	for (size_t i = 0; i < d->nnodes; i++) {
		const yaml_node_t *src = &doc->nodes.start[i];
		struct ynode *n = &d->nodes[i];

		n->line = (int)src->start_mark.line + 1;
		n->column = (int)src->start_mark.column + 1;
		if (src->type == YAML_SEQUENCE_NODE) {
			yaml_node_item_t *it = src->data.sequence.items.start;

			n->type = YNODE_LIST;
			n->n = (size_t)(src->data.sequence.items.top - it);
			n->items = xcalloc(n->n, sizeof(*n->items));
			for (size_t j = 0; j < n->n; j++)
				n->items[j] = &d->nodes[it[j] - 1];
		} else if (src->type == YAML_MAPPING_NODE) {
			yaml_node_pair_t *p = src->data.mapping.pairs.start;

			n->type = YNODE_MAP;
			n->n = (size_t)(src->data.mapping.pairs.top - p);
			n->pairs = xcalloc(n->n, sizeof(*n->pairs));
			for (size_t j = 0; j < n->n; j++) {
				n->pairs[j].key = &d->nodes[p[j].key - 1];
				n->pairs[j].value = &d->nodes[p[j].value - 1];
			}
		} else {
			n->type = YNODE_SCALAR;
			n->len = src->data.scalar.length;
			n->text = xstrndup((const char *)src->data.scalar.value,
					   n->len);
			n->plain = src->data.scalar.style ==
				   YAML_PLAIN_SCALAR_STYLE;
		}
	}
	for (size_t i = 0; i < d->nnodes; i++)
		if (d->nodes[i].type == YNODE_MAP && d->nodes[i].n > 1)
			mark_duplicates(d, &d->nodes[i]);
	d->root = d->nnodes ? &d->nodes[0] : NULL;
}

/*
 * Limits that keep a load linear in the size of the text.  libyaml's
 * scanner takes time quadratic in the depth of flow collections ([[[[...),
 * and its loader looks every anchor and alias up in a list of the anchors
 * so far: a config 100,000 brackets deep, or with 100,000 anchors, would
 * hold --check-config, or a reload, for minutes.  No real config comes
 * near these.
 */
#define FLOW_MAX_DEPTH 64
#define MAX_ANCHORS    1000
#define MAX_ALIASES    10000

/* The anchor of a node's event, or NULL. */
static const yaml_char_t *
event_anchor(const yaml_event_t *e)
{
	switch (e->type) {
	case YAML_SCALAR_EVENT:
		return e->data.scalar.anchor;
	case YAML_SEQUENCE_START_EVENT:
		return e->data.sequence_start.anchor;
	case YAML_MAPPING_START_EVENT:
		return e->data.mapping_start.anchor;
	default:
		return NULL;
	}
}

/* Why event e (one more in the counts) passes a limit, or NULL. */
static const char *
over_limit(const yaml_event_t *e, int *flow, int *anchors, int *aliases)
{
	static const char deep[] = "collections nested more than 64 deep";

	if (event_anchor(e) && ++*anchors > MAX_ANCHORS)
		return "more than 1000 anchors";
	switch (e->type) {
	case YAML_ALIAS_EVENT:
		return ++*aliases > MAX_ALIASES ? "more than 10000 aliases"
						: NULL;
	case YAML_SEQUENCE_START_EVENT:
		if (e->data.sequence_start.style != YAML_FLOW_SEQUENCE_STYLE)
			return NULL;
		return ++*flow > FLOW_MAX_DEPTH ? deep : NULL;
	case YAML_MAPPING_START_EVENT:
		if (e->data.mapping_start.style != YAML_FLOW_MAPPING_STYLE)
			return NULL;
		return ++*flow > FLOW_MAX_DEPTH ? deep : NULL;
	case YAML_SEQUENCE_END_EVENT:
	case YAML_MAPPING_END_EVENT:
		/* Nothing opened inside a flow collection is a block one:
		 * while one is open, the end is a flow collection's. */
		if (*flow > 0)
			(*flow)--;
		return NULL;
	default:
		return NULL;
	}
}

/*
 * Reads the events of the whole stream before the loader does, and stops at
 * the first that passes a limit, recording it at its position.  The events
 * come from libyaml's own scanner, so quotes, escapes, comments and block
 * scalars are read exactly as the loader reads them (an apostrophe in a
 * plain scalar starts nothing).  libyaml hands an event over once it has
 * read one token and at most 1024 characters past it (a possible key runs
 * out there), so stopping costs little whatever follows: a million
 * brackets are refused at the 65th.  Returns 0 when the loader may go on;
 * -1 after recording a limit or a syntax error.
 */
static int
guard(struct yaml_doc *d, const char *text, size_t len)
{
	yaml_parser_t parser;
	yaml_event_t e;
	int flow = 0, anchors = 0, aliases = 0, rc = -1;

	if (!yaml_parser_initialize(&parser))
		abort(); /* out of memory */
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	for (;;) {
		if (!yaml_parser_parse(&parser, &e)) {
			syntax_error(d, &parser, text, len);
			break;
		}
		const char *why = over_limit(&e, &flow, &anchors, &aliases);
		int end = e.type == YAML_STREAM_END_EVENT;
		if (why)
			syntax_at(d, (int)e.start_mark.line + 1,
				  (int)e.start_mark.column + 1, why);
		yaml_event_delete(&e);
		if (why)
			break;
		if (end) {
			rc = 0;
			break;
		}
	}
	yaml_parser_delete(&parser);
	return rc;
}

int
yaml_doc_load(struct yaml_doc *d, const char *name, const char *text,
	      size_t len)
{
	yaml_parser_t parser;
	yaml_document_t doc, next;
	int rc = -1;

	*d = (struct yaml_doc){.name = name, .json_left = JSON_MAX_VALUES};
	if (guard(d, text, len) < 0)
		return -1;
	if (!yaml_parser_initialize(&parser))
		abort(); /* out of memory */
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	if (!yaml_parser_load(&parser, &doc))
		goto fail;
	copy_tree(d, &doc);
	yaml_document_delete(&doc);
	/* A second document would be silently ignored: refuse it. */
	if (!yaml_parser_load(&parser, &next))
		goto fail;
	if (yaml_document_get_root_node(&next))
		syntax_at(d, (int)next.start_mark.line + 1,
			  (int)next.start_mark.column + 1,
			  "only one document is allowed");
	else
		rc = 0;
	yaml_document_delete(&next);
	yaml_parser_delete(&parser);
	return rc;
fail:
	syntax_error(d, &parser, text, len);
	yaml_parser_delete(&parser);
	return -1;
}

void
yaml_doc_release(struct yaml_doc *d)
{
	for (size_t i = 0; i < d->nnodes; i++) {
		free(d->nodes[i].text);
		free(d->nodes[i].items);
		free(d->nodes[i].pairs);
	}
	free(d->nodes);
	for (size_t i = 0; i < d->nerrs; i++)
		free(d->errs[i].msg);
	free(d->errs);
	*d = (struct yaml_doc){0};
}

static bool
is_null_text(const char *s)
{
	return !*s || !strcmp(s, "~") || !strcmp(s, "null") ||
	       !strcmp(s, "Null") || !strcmp(s, "NULL");
}

bool
yaml_is_null(const struct ynode *n)
{
	return n->type == YNODE_SCALAR && n->plain && is_null_text(n->text);
}

bool
yaml_map_ok(struct yaml_doc *d, const struct ynode *n, const char *path)
{
	if (!n || n->type == YNODE_MAP || yaml_is_null(n))
		return true;
	yaml_doc_error(d, n, path, "expected a map");
	return false;
}

bool
yaml_entry_ok(struct yaml_doc *d, const struct ynode *map, size_t i,
	      const char *path)
{
	const struct ynode *k = map->pairs[i].key;
	char *kpath;

	if (k->type != YNODE_SCALAR) {
		yaml_doc_error(d, k, path, "keys must be strings");
		return false;
	}
	if (!map->pairs[i].dup)
		return true;
	kpath = xasprintf("%s%s%s", path, *path ? "." : "", k->text);
	yaml_doc_error(d, k, kpath, "duplicate key \"%s\"", k->text);
	free(kpath);
	return false;
}

char *
yaml_scalar(struct yaml_doc *d, const struct ynode *n, const char *path)
{
	char *why, *s;

	if (strlen(n->text) != n->len) {
		yaml_doc_error(d, n, path, "contains a NUL character");
		return NULL;
	}
	if ((s = env_expand(n->text, &why)))
		return s;
	yaml_doc_error(d, n, path, "%s", why);
	free(why);
	return NULL;
}

char *
yaml_string(struct yaml_doc *d, const struct ynode *n, const char *path)
{
	if (n->type != YNODE_SCALAR || yaml_is_null(n)) {
		yaml_doc_error(d, n, path, "expected a string");
		return NULL;
	}
	return yaml_scalar(d, n, path);
}

static bool
is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool
is_integer(const char *s)
{
	s += *s == '-';
	return is_digit(*s) && strspn(s, "0123456789") == strlen(s);
}

int
yaml_int(struct yaml_doc *d, const struct ynode *n, const char *path,
	 int64_t min, int64_t max, int64_t *out)
{
	char *s;
	long long v;
	int rc = -1;

	if (n->type != YNODE_SCALAR || !n->plain || yaml_is_null(n)) {
		yaml_doc_error(d, n, path, "expected an integer");
		return -1;
	}
	if (!(s = yaml_scalar(d, n, path)))
		return -1;
	if (!is_integer(s)) {
		yaml_doc_error(d, n, path, "expected an integer");
		goto out;
	}
	errno = 0;
	v = strtoll(s, NULL, 10);
	if (errno ? *s == '-' : v < min) {
		yaml_doc_error(d, n, path, "must be at least %lld",
			       (long long)min);
		goto out;
	}
	if (errno || v > max) {
		yaml_doc_error(d, n, path, "must be at most %lld",
			       (long long)max);
		goto out;
	}
	*out = v;
	rc = 0;
out:
	free(s);
	return rc;
}

int
yaml_duration(struct yaml_doc *d, const struct ynode *n, const char *path,
	      int64_t min, int64_t max, int64_t *out)
{
	char *s, limit[32];
	const char *why;
	int64_t ms;
	int rc = -1;

	if (n->type != YNODE_SCALAR || yaml_is_null(n)) {
		yaml_doc_error(d, n, path,
			       "expected a duration " DURATION_HINT);
		return -1;
	}
	if (!(s = yaml_scalar(d, n, path)))
		return -1;
	if (duration_parse(s, &ms, &why) < 0) {
		yaml_doc_error(d, n, path, "bad duration \"%s\" %s", s,
			       strcmp(why, "too large") ? DURATION_HINT
							: "(too large)");
	} else if (ms < min || ms > max) {
		duration_format(ms < min ? min : max, limit, sizeof(limit));
		yaml_doc_error(d, n, path, "must be at %s %s",
			       ms < min ? "least" : "most", limit);
	} else {
		*out = ms;
		rc = 0;
	}
	free(s);
	return rc;
}

static int
find_name(const char *const *names, const char *s)
{
	for (int i = 0; names[i]; i++)
		if (!strcmp(names[i], s))
			return i;
	return -1;
}

int
yaml_bool(struct yaml_doc *d, const struct ynode *n, const char *path,
	  bool *out)
{
	static const char *const yes[] = {"true", "True", "TRUE", "yes",
					  "Yes",  "YES",  NULL};
	static const char *const no[] = {"false", "False", "FALSE", "no",
					 "No",	  "NO",	   NULL};
	char *s;
	int rc = -1;

	if (n->type != YNODE_SCALAR || !n->plain) {
		yaml_doc_error(d, n, path, "expected true or false");
		return -1;
	}
	if (!(s = yaml_scalar(d, n, path)))
		return -1;
	if (find_name(yes, s) >= 0 || find_name(no, s) >= 0) {
		*out = find_name(yes, s) >= 0;
		rc = 0;
	} else {
		yaml_doc_error(d, n, path, "expected true or false");
	}
	free(s);
	return rc;
}

int
yaml_choice(struct yaml_doc *d, const struct ynode *n, const char *path,
	    const char *const *names, const char *what, int *out)
{
	char *s = yaml_string(d, n, path);
	struct buf list = {0};
	int i;

	if (!s)
		return -1;
	if ((i = find_name(names, s)) >= 0) {
		*out = i;
	} else {
		for (int j = 0; names[j]; j++)
			buf_appendf(&list, "%s%s",
				    !j		   ? ""
				    : names[j + 1] ? ", "
						   : " or ",
				    names[j]);
		yaml_doc_error(d, n, path, "unknown %s \"%s\" (use %s)", what,
			       s, list.data);
		buf_free(&list);
	}
	free(s);
	return i >= 0 ? 0 : -1;
}

int
yaml_strings(struct yaml_doc *d, const struct ynode *n, const char *path,
	     struct strlist *out)
{
	int rc = 0;

	if (n->type != YNODE_LIST) {
		yaml_doc_error(d, n, path, "expected a list of strings");
		return -1;
	}
	if (n->n == 0) {
		yaml_doc_error(d, n, path, "must not be empty");
		return -1;
	}
	out->v = xrealloc(out->v, (out->n + n->n + 1) * sizeof(*out->v));
	for (size_t i = 0; i < n->n; i++) {
		char *ipath = xasprintf("%s[%zu]", path, i);
		char *s = yaml_string(d, n->items[i], ipath);

		if (!s)
			rc = -1;
		out->v[out->n++] = s ? s : xstrdup("");
		free(ipath);
	}
	out->v[out->n] = NULL;
	return rc;
}

/* ---- JSON ---- */

static cJSON *json_value(struct yaml_doc *d, const struct ynode *n,
			 const char *path, int depth);

/* JSON's number syntax, so that the text can be kept exactly as written. */
static bool
is_json_number(const char *s)
{
	s += *s == '-';
	if (!is_digit(*s))
		return false;
	s += *s == '0' ? 1 : strspn(s, "0123456789");
	if (*s == '.') {
		if (!is_digit(*++s))
			return false;
		s += strspn(s, "0123456789");
	}
	if (*s == 'e' || *s == 'E') {
		s++;
		s += *s == '+' || *s == '-';
		if (!is_digit(*s))
			return false;
		s += strspn(s, "0123456789");
	}
	return *s == '\0';
}

static cJSON *
json_scalar(struct yaml_doc *d, const struct ynode *n, const char *path)
{
	char *s = yaml_scalar(d, n, path);
	cJSON *j;

	if (!s)
		return NULL;
	if (!n->plain)
		j = cJSON_CreateString(s);
	else if (is_null_text(s))
		j = cJSON_CreateNull();
	else if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE"))
		j = cJSON_CreateTrue();
	else if (!strcmp(s, "false") || !strcmp(s, "False") ||
		 !strcmp(s, "FALSE"))
		j = cJSON_CreateFalse();
	else if (is_json_number(s))
		j = cJSON_CreateRaw(s); /* no rounding through a double */
	else
		j = cJSON_CreateString(s);
	free(s);
	return j;
}

static cJSON *
json_list(struct yaml_doc *d, const struct ynode *n, const char *path,
	  int depth)
{
	cJSON *arr = cJSON_CreateArray();
	bool ok = true;

	for (size_t i = 0; i < n->n; i++) {
		char *ipath = xasprintf("%s[%zu]", path, i);
		cJSON *item = json_value(d, n->items[i], ipath, depth + 1);

		if (item)
			cJSON_AddItemToArray(arr, item);
		ok = ok && item;
		free(ipath);
	}
	if (!ok) {
		cJSON_Delete(arr);
		return NULL;
	}
	return arr;
}

static cJSON *
json_map(struct yaml_doc *d, const struct ynode *n, const char *path, int depth)
{
	cJSON *obj = cJSON_CreateObject();
	bool ok = true;

	for (size_t i = 0; i < n->n; i++) {
		const char *key = n->pairs[i].key->text;
		char *kpath;
		cJSON *v;

		if (!yaml_entry_ok(d, n, i, path)) {
			ok = false;
			continue;
		}
		kpath = xasprintf("%s%s%s", path, *path ? "." : "", key);
		v = json_value(d, n->pairs[i].value, kpath, depth + 1);
		if (v)
			cJSON_AddItemToObject(obj, key, v);
		ok = ok && v;
		free(kpath);
	}
	if (!ok) {
		cJSON_Delete(obj);
		return NULL;
	}
	return obj;
}

static cJSON *
json_value(struct yaml_doc *d, const struct ynode *n, const char *path,
	   int depth)
{
	if (d->json_left == 0)
		return NULL;
	if (--d->json_left == 0) {
		yaml_doc_error(d, n, path, "too many values (%d at most)",
			       JSON_MAX_VALUES);
		return NULL;
	}
	if (depth > JSON_MAX_DEPTH) {
		yaml_doc_error(d, n, path,
			       "nested too deeply (%d levels at most)",
			       JSON_MAX_DEPTH);
		return NULL;
	}
	if (n->type == YNODE_LIST)
		return json_list(d, n, path, depth);
	if (n->type == YNODE_MAP)
		return json_map(d, n, path, depth);
	return json_scalar(d, n, path);
}

char *
yaml_json(struct yaml_doc *d, const struct ynode *n, const char *path)
{
	cJSON *j;
	char *text, *s;

	if (n->type != YNODE_MAP) {
		yaml_doc_error(d, n, path, "expected a map");
		return NULL;
	}
	if (!(j = json_value(d, n, path, 0)))
		return NULL;
	if (!(text = cJSON_PrintUnformatted(j)))
		abort(); /* out of memory */
	s = xstrdup(text);
	cJSON_free(text);
	cJSON_Delete(j);
	return s;
}

/* ---- maps read by a table of keys ---- */

static void
store_int(void *dst, size_t size, int64_t v)
{
	if (size == sizeof(int64_t))
		*(int64_t *)dst = v;
	else if (size == sizeof(int))
		*(int *)dst = (int)v;
	else
		*(bool *)dst = v != 0;
}

static void
read_string(struct yaml_doc *d, const struct ynode *n, const char *path,
	    const struct yaml_field *f, char **dst)
{
	char *s = yaml_string(d, n, path);
	const char *why;

	if (s && f->check && (why = f->check(s))) {
		yaml_doc_error(d, n, path, "%s", why);
		free(s);
	} else if (s) {
		free(*dst);
		*dst = s;
	}
}

static void
read_field(struct yaml_doc *d, const struct ynode *k, const struct ynode *v,
	   const char *path, const struct yaml_field *f, struct yaml_walk *w)
{
	void *dst = (char *)w->obj + f->off;
	struct yaml_walk sub = *w;
	int64_t i64;
	int i;

	switch (f->type) {
	case YF_STRING:
		read_string(d, v, path, f, dst);
		break;
	case YF_INT:
		if (yaml_int(d, v, path, f->min, f->max, &i64) == 0)
			store_int(dst, f->size, i64);
		break;
	case YF_DURATION:
		yaml_duration(d, v, path, f->min, f->max, dst);
		break;
	case YF_BOOL:
		yaml_bool(d, v, path, dst);
		break;
	case YF_CHOICE:
		if (yaml_choice(d, v, path, f->names, f->what, &i) == 0)
			store_int(dst, f->size, i);
		break;
	case YF_JSON:
		if (!yaml_is_null(v))
			*(char **)dst = yaml_json(d, v, path);
		break;
	case YF_MAP:
		sub = (struct yaml_walk){.t = f->sub, .obj = dst};
		sub.variant = w->variant;
		sub.variants = w->variants;
		sub.variant_of = w->variant_of;
		yaml_walk_map(d, k, v, path, &sub);
		break;
	case YF_READ:
		f->read(d, v, path, dst);
		break;
	case YF_LATER:
		break;
	}
}

static int
field_index(const struct yaml_field *t, const char *key)
{
	for (int i = 0; t[i].key; i++)
		if (!strcmp(t[i].key, key))
			return i;
	return -1;
}

/* The variants of only: "exec", "exec or process"; static storage. */
static const char *
variant_name(const struct yaml_walk *w, unsigned only)
{
	static char names[128];
	size_t len = 0;
	int n = 0, total = 0;

	for (int i = 0; w->variants && w->variants[i]; i++)
		total += (only & (1u << i)) != 0;
	names[0] = '\0';
	for (int i = 0; w->variants && w->variants[i]; i++) {
		if (!(only & (1u << i)))
			continue;
		n++;
		len += (size_t)snprintf(names + len, sizeof(names) - len,
					"%s%s",
					n == 1	     ? ""
					: n == total ? " or "
						     : ", ",
					w->variants[i]);
		if (len >= sizeof(names))
			break;
	}
	return n ? names : "other";
}

void
yaml_walk_map(struct yaml_doc *d, const struct ynode *at,
	      const struct ynode *map, const char *path, struct yaml_walk *w)
{
	const struct yaml_field *t = w->t;

	if (!yaml_map_ok(d, map, path))
		return;
	for (size_t p = 0; map && p < map->n; p++) {
		const struct ynode *k = map->pairs[p].key;
		char *kpath;
		int i;

		if (!yaml_entry_ok(d, map, p, path))
			continue;
		kpath = xasprintf("%s%s%s", path, *path ? "." : "", k->text);
		if ((i = field_index(t, k->text)) < 0 && w->partial) {
			/* skipped unread: see struct yaml_walk */
		} else if (i < 0) {
			yaml_doc_error(d, k, kpath, "unknown key \"%s\"",
				       k->text);
		} else if (t[i].only && w->variant &&
			   !(t[i].only & w->variant)) {
			yaml_doc_error(d, k, kpath, "%s is only for %s %s",
				       t[i].key, variant_name(w, t[i].only),
				       w->variant_of);
		} else {
			w->key[i] = k;
			w->val[i] = map->pairs[p].value;
			read_field(d, k, w->val[i], kpath, &t[i], w);
		}
		free(kpath);
	}
	for (int i = 0; t[i].key && !w->partial; i++)
		if (t[i].required && !w->val[i] &&
		    (!t[i].only || (t[i].only & w->variant)))
			yaml_doc_error(d, at, path,
				       "missing required key \"%s\"", t[i].key);
}

const struct ynode *
yaml_walked(const struct yaml_walk *w, const char *key)
{
	int i = field_index(w->t, key);

	return i < 0 ? NULL : w->val[i];
}
