/*
 * yaml: parses a YAML document with libyaml's document API into a tree of
 * ynodes (bounded: flow depth, anchors, aliases; duplicate keys marked),
 * and records every problem with its position for config to report.  The
 * typed values are read out of the tree in yaml_value.c.
 */
#include "common/yaml.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* libyaml's header (this module's own is "common/yaml.h"). */
#include <yaml.h>

#include "common/text.h"
#include "common/util.h"

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

	*d = (struct yaml_doc){.name = name, .json_left = YAML_JSON_MAX_VALUES};
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
