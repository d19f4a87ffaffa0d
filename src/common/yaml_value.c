/*
 * yaml_value: reads typed values out of a parsed document's tree (yaml.c):
 * scalars with their references expanded, integers, durations, booleans,
 * choices, lists of strings, maps as JSON, and maps read by a table of
 * keys (yaml_walk_map()).  Every problem is recorded on the doc with the
 * node's position; nothing here touches libyaml.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/duration.h"
#include "common/env.h"
#include "common/util.h"
#include "common/yaml.h"

#define DURATION_HINT  "(use 500ms, 30s, 5m, 2h, 7d)"
#define JSON_MAX_DEPTH 64

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
			       YAML_JSON_MAX_VALUES);
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
