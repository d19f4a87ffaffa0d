/*
 * config_sections: the named sections of the configuration, each a map of
 * names to maps: databases:, queues:, handlers:, schedules: and tasks:.
 * Each entry is read by its key table (config_keys.c), checked against the
 * others of its section and the sections read before it (a handler's
 * queue, a schedule's kind), and completed with what it inherits (a
 * handler's timeout, attempts and backoff from its queue, else defaults:).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/config_internal.h"
#include "common/cron.h"
#include "common/env.h"
#include "common/util.h"
#include "common/yaml.h"

/* Checks that the queue: of w (at path) names a queue. */
static void
check_queue(struct yaml_doc *d, const struct config *c,
	    const struct yaml_walk *w, const char *path, const char *queue)
{
	const struct ynode *n = yaml_walked(w, "queue");
	char *qpath;

	if (!queue || !n || config_queue(c, queue))
		return;
	qpath = config_join(path, "queue");
	yaml_doc_error(d, n, qpath, "unknown queue \"%s\"", queue);
	free(qpath);
}

/* A key of w that makes no sense with the others of its queue, at its
 * value. */
static void
limit_error(struct yaml_doc *d, const struct yaml_walk *w, const char *path,
	    const char *key, const char *why)
{
	const struct ynode *n = yaml_walked(w, key);
	char *kpath = config_join(path, key);

	yaml_doc_error(d, n, kpath, "%s", why);
	free(kpath);
}

/* The limits of a queue, together (each alone was checked as read). */
static void
check_limits(struct yaml_doc *d, const struct yaml_walk *w, const char *path,
	     const struct queue_conf *q)
{
	static const char *const keyed[] = {
		"per_key_concurrency", "rate_per_key", "burst_per_key", "fair"};

	if (yaml_walked(w, "burst") && q->rate.n == 0)
		limit_error(d, w, path, "burst",
			    "a burst needs a rate (rate: 10/s)");
	if (yaml_walked(w, "burst_per_key") && q->rate_per_key.n == 0)
		limit_error(d, w, path, "burst_per_key",
			    "burst_per_key needs a rate_per_key");
	if (q->mode != QUEUE_SERIAL)
		return;
	for (size_t i = 0; i < sizeof(keyed) / sizeof(keyed[0]); i++)
		if (yaml_walked(w, keyed[i]) &&
		    (strcmp(keyed[i], "fair") != 0 || q->fair))
			limit_error(d, w, path, keyed[i],
				    "a serial queue runs one job at a time, "
				    "in order: keys cannot take turns in it "
				    "(use mode: parallel or per_key)");
}

static void
load_queue(struct yaml_doc *d, struct config *c, const struct ynode *key,
	   const struct ynode *val, const char *path)
{
	struct queue_conf *q;
	struct yaml_walk w = {.t = config_queue_fields};

	c->queues = xrealloc(c->queues, (c->nqueues + 1) * sizeof(*q));
	w.obj = q = &c->queues[c->nqueues++];
	*q = (struct queue_conf){
		.name = xstrdup(key->text),
		.concurrency = 8,
		.mode = QUEUE_PARALLEL,
		.timeout_ms = -1,
		.backoff = {-1, -1},
		.defined = true,
		.line = key->line,
		.column = key->column,
	};
	yaml_walk_map(d, key, val, path, &w);
	check_limits(d, &w, path, q);
}

/* The handler's type as a bit, read ahead of its other keys; 0: unknown. */
static unsigned
peek_type(const struct ynode *map)
{
	char *why = NULL, *s;
	int t = -1;

	for (size_t i = 0; map->type == YNODE_MAP && i < map->n; i++) {
		const struct ynode *k = map->pairs[i].key;
		const struct ynode *v = map->pairs[i].value;

		if (k->type != YNODE_SCALAR || strcmp(k->text, "type"))
			continue;
		if (v->type == YNODE_SCALAR &&
		    (s = env_expand(v->text, &why))) {
			for (t = HANDLER_PROCESS; t >= 0; t--)
				if (!strcmp(config_handler_types[t], s))
					break;
			free(s);
		}
		free(why); /* reported when type is read */
		break;
	}
	return t < 0 ? 0 : 1u << t;
}

/* Fills in what the handler left out: from its queue, else the defaults. */
static void
resolve_handler(const struct config *c, struct handler_conf *h)
{
	const struct queue_conf none = {.timeout_ms = -1, .backoff = {-1, -1}};
	const struct queue_conf *q = config_queue(c, h->queue);

	if (!q)
		q = &none;
	else
		h->queue_index = (size_t)(q - c->queues);
	if (h->timeout_ms < 0)
		h->timeout_ms = q->timeout_ms >= 0 ? q->timeout_ms
						   : c->default_timeout_ms;
	if (h->max_attempts == 0)
		h->max_attempts = q->max_attempts ? q->max_attempts
						  : c->default_max_attempts;
	if (h->backoff.base_ms < 0)
		h->backoff.base_ms = q->backoff.base_ms >= 0
					     ? q->backoff.base_ms
					     : c->default_backoff.base_ms;
	if (h->backoff.max_ms < 0)
		h->backoff.max_ms = q->backoff.max_ms >= 0
					    ? q->backoff.max_ms
					    : c->default_backoff.max_ms;
	if (h->type != HANDLER_PROCESS)
		return;
	if (h->concurrency <= 0)
		h->concurrency = 1;
	/* Enough places for what the worker claims of the queue at once,
	 * as exec would run: copies x concurrency >= the queue's. */
	if (h->copies <= 0) {
		int want = q->concurrency > 0 ? q->concurrency : 8;
		h->copies = (want + h->concurrency - 1) / h->concurrency;
	}
	if (h->startup_timeout_ms <= 0)
		h->startup_timeout_ms = 30000;
	/* A job line carries the payload, a reply line its result: room
	 * for the largest payload and a megabyte more. */
	if (h->max_line_bytes <= 0)
		h->max_line_bytes = c->max_payload_bytes + 1024 * 1024;
}

/* ms as "24s", "1500ms", "5m"; into buf (at least 32 bytes). */
static const char *
format_duration(int64_t ms, char *buf, size_t len)
{
	static const struct {
		const char *unit;
		int64_t ms;
	} units[] = {
		{"d", 86400000}, {"h", 3600000}, {"m", 60000}, {"s", 1000}};

	for (size_t i = 0; ms > 0 && i < sizeof(units) / sizeof(units[0]); i++)
		if (ms % units[i].ms == 0) {
			snprintf(buf, len, "%lld%s",
				 (long long)(ms / units[i].ms), units[i].unit);
			return buf;
		}
	snprintf(buf, len, "%lldms", (long long)ms);
	return buf;
}

/*
 * A plugin's run() blocks its worker, which renews none of its leases
 * meanwhile, and the worker gives a job up at lease - lease/5 (its deadline
 * margin): a plugin's timeout must end before that.  A timeout the handler
 * sets itself that is longer is an error; an inherited one (queue,
 * defaults) is lowered to it (docs/configuration.md).
 */
static void
check_plugin_timeout(struct yaml_doc *d, const struct config *c,
		     const struct yaml_walk *w, const char *path, bool own,
		     struct handler_conf *h)
{
	int64_t most = c->lease_ms - c->lease_ms / 5;
	const struct ynode *n = yaml_walked(w, "timeout");
	char a[32], b[32], l[32], *tpath;

	if (h->type != HANDLER_PLUGIN || h->timeout_ms <= most)
		return;
	if (!own || !n) {
		h->timeout_ms = most;
		return;
	}
	tpath = config_join(path, "timeout");
	yaml_doc_error(d, n, tpath,
		       "%s is longer than a plugin may block its worker: at "
		       "most %s (the lease, %s, less a fifth)",
		       format_duration(h->timeout_ms, a, sizeof(a)),
		       format_duration(most, b, sizeof(b)),
		       format_duration(c->lease_ms, l, sizeof(l)));
	free(tpath);
}

/* Where n was written; a list's first item (a command's program). */
static struct config_at
first_at(const struct ynode *n)
{
	if (n && n->type == YNODE_LIST && n->n > 0)
		n = n->items[0];
	return n ? (struct config_at){n->line, n->column}
		 : (struct config_at){0, 0};
}

/* A handler, whole (pgjobd) or as pgjob sees it (cli:
 * config_handler_cli_fields). */
static void
load_handler_as(struct yaml_doc *d, struct config *c, const struct ynode *key,
		const struct ynode *val, const char *path, bool cli)
{
	struct handler_conf *h;
	bool own_timeout;
	struct yaml_walk w = {
		.t = cli ? config_handler_cli_fields : config_handler_fields,
		.variants = config_handler_types,
		.variant_of = "handlers",
		.partial = cli,
	};

	c->handlers = xrealloc(c->handlers, (c->nhandlers + 1) * sizeof(*h));
	w.obj = h = &c->handlers[c->nhandlers++];
	*h = (struct handler_conf){
		.kind = xstrdup(key->text),
		.timeout_ms = -1,
		.backoff = {-1, -1},
		.tls_verify = true,
		.line = key->line,
		.column = key->column,
	};
	if (!cli)
		w.variant = peek_type(val);
	yaml_walk_map(d, key, val, path, &w);
	if (!cli)
		config_resolve_run_as(d, &w, path, &h->run_as);
	check_queue(d, c, &w, path, h->queue);
	if (!h->queue)
		h->queue = xstrdup("default");
	if (!h->plugin_config)
		h->plugin_config = xstrdup("{}");
	h->at_program = first_at(yaml_walked(&w, "command"));
	h->at_url = first_at(yaml_walked(&w, "url"));
	h->at_library = first_at(yaml_walked(&w, "library"));
	h->at_symbol = first_at(yaml_walked(&w, "symbol"));
	own_timeout = h->timeout_ms >= 0;
	resolve_handler(c, h);
	if (!cli)
		check_plugin_timeout(d, c, &w, path, own_timeout, h);
}

static void
load_handler(struct yaml_doc *d, struct config *c, const struct ynode *key,
	     const struct ynode *val, const char *path)
{
	load_handler_as(d, c, key, val, path, false);
}

static void
load_handler_cli(struct yaml_doc *d, struct config *c, const struct ynode *key,
		 const struct ynode *val, const char *path)
{
	load_handler_as(d, c, key, val, path, true);
}

/* A schedule's cron: and timezone:, as cron.c will read them. */
static void
check_schedule_time(struct yaml_doc *d, const struct yaml_walk *w,
		    const char *path, const struct schedule_conf *s)
{
	const struct ynode *cron = yaml_walked(w, "cron");
	const struct ynode *tz = yaml_walked(w, "timezone");
	struct cron *parsed;
	char *err, *vpath;

	if (s->cron && cron) {
		if ((parsed = cron_parse(s->cron, &err))) {
			cron_free(parsed);
		} else {
			vpath = config_join(path, "cron");
			yaml_doc_error(d, cron, vpath, "%s", err);
			free(vpath);
			free(err);
		}
	}
	if (s->timezone && tz && !cron_tz_valid(s->timezone)) {
		vpath = config_join(path, "timezone");
		yaml_doc_error(d, tz, vpath, "unknown time zone \"%s\"",
			       s->timezone);
		free(vpath);
	}
}

static void
load_schedule(struct yaml_doc *d, struct config *c, const struct ynode *key,
	      const struct ynode *val, const char *path)
{
	struct schedule_conf *s;
	struct yaml_walk w = {.t = config_schedule_fields};
	const struct ynode *kind;
	char *kpath;

	c->schedules = xrealloc(c->schedules, (c->nschedules + 1) * sizeof(*s));
	w.obj = s = &c->schedules[c->nschedules++];
	*s = (struct schedule_conf){
		.name = xstrdup(key->text),
		.line = key->line,
		.column = key->column,
	};
	yaml_walk_map(d, key, val, path, &w);
	check_schedule_time(d, &w, path, s);
	kind = yaml_walked(&w, "kind");
	if (s->kind && kind && !config_handler(c, s->kind)) {
		kpath = config_join(path, "kind");
		yaml_doc_error(d, kind, kpath, "no handler for kind \"%s\"",
			       s->kind);
		free(kpath);
	}
	check_queue(d, c, &w, path, s->queue);
	if (!s->payload)
		s->payload = xstrdup("{}");
}

static void
load_task(struct yaml_doc *d, struct config *c, const struct ynode *key,
	  const struct ynode *val, const char *path)
{
	struct task_conf *t;
	struct yaml_walk w = {.t = config_task_fields};

	c->tasks = xrealloc(c->tasks, (c->ntasks + 1) * sizeof(*t));
	w.obj = t = &c->tasks[c->ntasks++];
	*t = (struct task_conf){
		.name = xstrdup(key->text),
		.partitions = 1,
		.line = key->line,
		.column = key->column,
	};
	yaml_walk_map(d, key, val, path, &w);
	config_resolve_run_as(d, &w, path, &t->run_as);
	t->at_program = first_at(yaml_walked(&w, "command"));
}

/*
 * A database's name goes into log lines (db=), a label of /metrics and
 * pgjob --database: a short identifier, nothing to escape.
 */
static bool
database_name_ok(const char *s)
{
	size_t n = strlen(s);
	return n >= 1 && n <= 63 &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			 "0123456789_-") == n;
}

static void
load_database(struct yaml_doc *d, struct config *c, const struct ynode *key,
	      const struct ynode *val, const char *path)
{
	struct database_conf *db;
	struct yaml_walk w = {.t = config_database_conf_fields};

	if (!database_name_ok(key->text)) {
		yaml_doc_error(d, key, path,
			       "a database's name is 1 to 63 letters, digits, "
			       "_ and -");
		return;
	}
	c->databases =
		xrealloc(c->databases, (c->ndatabases + 1) * sizeof(*db));
	w.obj = db = &c->databases[c->ndatabases++];
	*db = (struct database_conf){
		.name = xstrdup(key->text),
		.workers = c->workers,
		.line = key->line,
		.column = key->column,
	};
	yaml_walk_map(d, key, val, path, &w);
	const struct ynode *workers = yaml_walked(&w, "workers");
	if (db->workers > c->max_slots) {
		/* Slots are per database: each one's workers need theirs. */
		char *wpath = config_join(path, "workers");
		yaml_doc_error(d, workers ? workers : key, wpath,
			       "must not be more than max_slots (%d)",
			       c->max_slots);
		free(wpath);
	}
}

typedef void load_fn(struct yaml_doc *d, struct config *c,
		     const struct ynode *key, const struct ynode *val,
		     const char *path);

/* Reads one section (queues: and the like): a map of names to maps. */
static void
load_section(struct yaml_doc *d, struct config *c, const struct yaml_walk *top,
	     const char *section, load_fn *load)
{
	const struct ynode *map = yaml_walked(top, section);

	if (!map || !yaml_map_ok(d, map, section))
		return;
	for (size_t i = 0; i < map->n; i++) {
		const struct ynode *k = map->pairs[i].key;
		char *path;

		if (!yaml_entry_ok(d, map, i, section))
			continue;
		if (!*k->text) {
			yaml_doc_error(d, k, section,
				       "names must not be empty");
			continue;
		}
		path = config_join(section, k->text);
		load(d, c, k, map->pairs[i].value, path);
		free(path);
	}
}

/*
 * databases: after the top-level keys (a database's workers default to the
 * top-level workers:), and never beside database:, which it replaces.
 */
static void
load_databases(struct yaml_doc *d, struct config *c,
	       const struct yaml_walk *top)
{
	const struct ynode *map = yaml_walked(top, "databases");

	if (!map)
		return;
	if (yaml_walked(top, "database")) {
		yaml_doc_error(d, map, "databases",
			       "databases: and database: do not go together: "
			       "name the one database under databases:");
		return;
	}
	if (map->type == YNODE_MAP && map->n == 0) {
		yaml_doc_error(d, map, "databases",
			       "names no database: give at least one, or "
			       "use database:");
		return;
	}
	load_section(d, c, top, "databases", load_database);
}

static void
add_default_queue(struct config *c)
{
	struct queue_conf *q;

	if (config_queue(c, "default"))
		return;
	c->queues = xrealloc(c->queues, (c->nqueues + 1) * sizeof(*q));
	q = &c->queues[c->nqueues++];
	*q = (struct queue_conf){
		.name = xstrdup("default"),
		.concurrency = 8,
		.mode = QUEUE_PARALLEL,
		.timeout_ms = -1,
		.backoff = {-1, -1},
	};
}

void
config_load_sections(struct yaml_doc *d, struct config *c,
		     const struct yaml_walk *top, bool cli)
{
	load_databases(d, c, top);
	load_section(d, c, top, "queues", load_queue);
	add_default_queue(c);
	/* pgjob (config_load_settings()) reads a part of each handler
	 * (load_handler_cli()) and no schedule or task; the rest, where the
	 * secrets are, is pgjobd's. */
	load_section(d, c, top, "handlers",
		     cli ? load_handler_cli : load_handler);
	if (!cli) {
		load_section(d, c, top, "schedules", load_schedule);
		load_section(d, c, top, "tasks", load_task);
	}
}
