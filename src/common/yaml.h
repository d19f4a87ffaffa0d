/*
 * yaml: the YAML reader behind config, and the only user of libyaml.
 *
 * yaml_doc_load() (yaml.c) parses a whole document into a tree of ynodes
 * that owes nothing to libyaml, and the getters below (yaml_value.c) read
 * typed values out of it.  Each getter that finds a problem records it on
 * the doc, with the node's position, as "file:line:column: key.path:
 * message", and returns failure; the caller just moves on, so that one
 * pass reports every error in a file.
 *
 * String values have their references expanded when they are read
 * (env_expand(): ${NAME} from the environment, ${file:PATH} and
 * ${credential:NAME} from files); keys never are.
 *
 * libyaml's shared library exports yaml_free(), yaml_malloc(), yaml_strdup()
 * and more: a function of ours with one of those names would replace
 * libyaml's own, so every name here has a second word that libyaml does not
 * use.
 */
#ifndef PGJOBD_YAML_H
#define PGJOBD_YAML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/util.h"

enum ynode_type { YNODE_SCALAR, YNODE_LIST, YNODE_MAP };

struct ypair {
	struct ynode *key;
	struct ynode *value;
	bool dup; /* an earlier pair of the map has the same string key */
};

/*
 * One node.  Aliases (*name) point at the node of their anchor, so a node
 * may be reached more than once, and even from inside itself.
 */
struct ynode {
	enum ynode_type type;
	int line, column; /* 1-based */
	/* YNODE_SCALAR: the text as written, before ${NAME} expansion. */
	char *text;
	size_t len; /* bytes; more than strlen(text) if it holds a NUL */
	bool plain; /* unquoted: may be read as a number, boolean or null */
	struct ynode **items; /* YNODE_LIST */
	struct ypair *pairs;  /* YNODE_MAP */
	size_t n;	      /* items or pairs; 0 for a scalar */
};

/* Aliases can make a small file stand for a huge tree: the values that
 * yaml_json() converts in one document are capped. */
#define YAML_JSON_MAX_VALUES 100000

struct yaml_error;

struct yaml_doc {
	const char *name;    /* the file name in messages; borrowed */
	struct ynode *root;  /* NULL: an empty document, or none read */
	struct ynode *nodes; /* every node, owned */
	size_t nnodes;
	struct yaml_error *errs;
	size_t nerrs, caperrs;
	size_t json_left; /* values yaml_json() may still convert */
	/* Key comparisons of the duplicate-key check, for tests: it sorts
	 * each map's keys once, O(n log n), rather than compare each key with
	 * every earlier one. */
	size_t key_compares;
};

/*
 * Parses text into d (release with yaml_doc_release()), in time linear in
 * len.  Returns 0, or -1 after recording a syntax error, or a limit passed
 * (flow collections nested more than 64 deep, more than 1000 anchors or
 * 10000 aliases), as "file:line:column: syntax: problem".
 */
int yaml_doc_load(struct yaml_doc *d, const char *name, const char *text,
		  size_t len);
void yaml_doc_release(struct yaml_doc *d);

/* Records an error at node at (NULL: line 1); path "" is left out. */
void yaml_doc_error(struct yaml_doc *d, const struct ynode *at,
		    const char *path, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/*
 * Hands the recorded errors over in document order: returns their number
 * and sets *msgs to a new array (caller frees it and each message), or NULL
 * when there are none.
 */
size_t yaml_doc_take_errors(struct yaml_doc *d, char ***msgs);

/* An empty value, "~" or "null": a key given without a value. */
bool yaml_is_null(const struct ynode *n);
/*
 * Whether n (which may be NULL) can be read as a map: a map, or null for
 * an empty one.  Records "expected a map" otherwise.
 */
bool yaml_map_ok(struct yaml_doc *d, const struct ynode *n, const char *path);
/*
 * Whether entry i of map can be used: its key must be a string that no
 * earlier entry has used.  Records why not, at the key.
 */
bool yaml_entry_ok(struct yaml_doc *d, const struct ynode *map, size_t i,
		   const char *path);

/*
 * Getters.  The char * ones return a new string (caller frees) or NULL; the
 * int ones return 0, or -1 with *out unchanged.  Either way, a failure has
 * been recorded.
 */
/* Scalar n with its references expanded; n must be a scalar. */
char *yaml_scalar(struct yaml_doc *d, const struct ynode *n, const char *path);
/* Any scalar but null ("expected a string"). */
char *yaml_string(struct yaml_doc *d, const struct ynode *n, const char *path);
/* An unquoted decimal integer in min..max. */
int yaml_int(struct yaml_doc *d, const struct ynode *n, const char *path,
	     int64_t min, int64_t max, int64_t *out);
/* A duration (duration_parse()) in min..max, in milliseconds. */
int yaml_duration(struct yaml_doc *d, const struct ynode *n, const char *path,
		  int64_t min, int64_t max, int64_t *out);
/* Unquoted true or false (also True, TRUE, yes, Yes, YES and so on). */
int yaml_bool(struct yaml_doc *d, const struct ynode *n, const char *path,
	      bool *out);
/*
 * One of names (NULL-terminated): *out is its index.  what names the value
 * in messages: unknown queue mode "x" (use parallel, serial or per_key).
 */
int yaml_choice(struct yaml_doc *d, const struct ynode *n, const char *path,
		const char *const *names, const char *what, int *out);
/* A non-empty list of strings, appended to *out (free with the config). */
int yaml_strings(struct yaml_doc *d, const struct ynode *n, const char *path,
		 struct strlist *out);
/*
 * Map n as compact JSON text (caller frees).  Unquoted scalars that read as
 * JSON numbers, true, false or null become those; everything else strings.
 */
char *yaml_json(struct yaml_doc *d, const struct ynode *n, const char *path);

/*
 * Reading a map by a table of its keys, in the manner of Redis's typed
 * config table.  Each field names a key, how to read its value and where
 * the value goes: off and size place it in the object being filled.
 */
enum yaml_ftype {
	YF_STRING,   /* char *, checked by check when given */
	YF_INT,	     /* int or int64_t (by size), min..max */
	YF_DURATION, /* int64_t milliseconds, min..max */
	YF_BOOL,     /* bool */
	YF_CHOICE,   /* int, enum or bool (by size): the index in names */
	YF_JSON,     /* char *: a map as JSON text; NULL when null */
	YF_MAP,	     /* a nested map, read by sub into the object at off */
	YF_READ,     /* read by the field's own read() */
	YF_LATER,    /* noted only, for the caller to read */
};

struct yaml_field {
	const char *key;
	enum yaml_ftype type;
	size_t off, size;
	int64_t min, max;
	const char *const *names; /* YF_CHOICE */
	const char *what;	  /* YF_CHOICE: "queue mode" in messages */
	const struct yaml_field *sub;
	/* YF_STRING: why s will not do, or NULL. */
	const char *(*check)(const char *s);
	void (*read)(struct yaml_doc *d, const struct ynode *n,
		     const char *path, void *dst);
	/* The variants of the map it belongs to (1 << variant); 0: all. */
	unsigned only;
	bool required; /* for the variants in only, or always */
};

#define YAML_MAX_FIELDS 24

struct yaml_walk {
	const struct yaml_field *t; /* ends with a NULL key */
	void *obj;
	/*
	 * For maps whose keys depend on a variant (a handler's type): 1 << the
	 * variant, or 0 when unknown, and the variants' names for messages,
	 * "command is only for exec handlers".
	 */
	unsigned variant;
	const char *const *variants;
	const char *variant_of;
	/*
	 * Partial: keys not in t are skipped unread (not expanded, not
	 * checked), and no key is required.  pgjob reads a handler so (its
	 * type, queue and timeout), never the secrets the rest may hold.
	 */
	bool partial;
	/* Filled in: the key and value node of each field found. */
	const struct ynode *key[YAML_MAX_FIELDS];
	const struct ynode *val[YAML_MAX_FIELDS];
};

/*
 * Reads map (NULL or null: empty) into w->obj by the table w->t, recording
 * unknown keys, keys of another variant and bad values; then a missing
 * required key, at at (the key that holds the map) with path.
 */
void yaml_walk_map(struct yaml_doc *d, const struct ynode *at,
		   const struct ynode *map, const char *path,
		   struct yaml_walk *w);
/* The value node that yaml_walk_map() found for key, or NULL. */
const struct ynode *yaml_walked(const struct yaml_walk *w, const char *key);

#endif
