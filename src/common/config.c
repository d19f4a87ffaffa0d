/*
 * config: the YAML configuration of pgjobd, one immutable struct config
 * (config.h): its lookups, its names, its limits as JSON, its errors and
 * its release.
 *
 * The reading is in the files beside this one: config_load.c (the entry
 * points and the document), config_keys.c (the key tables: which keys
 * exist), config_sections.c (queues, handlers, schedules, tasks,
 * databases), config_web.c (web:) and config_host.c (users, groups, listen
 * addresses and connection strings checked on this host).
 */
#include "common/config.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config_internal.h"
#include "common/util.h"

const char *const config_handler_types[] = {
	[HANDLER_EXEC] = "exec",       [HANDLER_SQL] = "sql",
	[HANDLER_HTTP] = "http",       [HANDLER_PLUGIN] = "plugin",
	[HANDLER_PROCESS] = "process", [HANDLER_PROCESS + 1] = NULL,
};
const char *const config_queue_modes[] = {
	[QUEUE_PARALLEL] = "parallel",
	[QUEUE_SERIAL] = "serial",
	[QUEUE_PER_KEY] = "per_key",
	[QUEUE_PER_KEY + 1] = NULL,
};

char *
config_join(const char *path, const char *key)
{
	return xasprintf("%s%s%s", path, *path ? "." : "", key);
}

bool
config_queue_limited(const struct queue_conf *q)
{
	return q->global_concurrency > 0 || q->per_key_concurrency > 0 ||
	       q->rate.n > 0 || q->rate_per_key.n > 0 || q->fair;
}

char *
config_limits_json(const struct config *c)
{
	cJSON *all = cJSON_CreateObject();
	char buf[RATE_LEN];

	for (size_t i = 0; i < c->nqueues; i++) {
		const struct queue_conf *q = &c->queues[i];
		if (!q->defined)
			continue;
		cJSON *o = cJSON_AddObjectToObject(all, q->name);
		if (q->global_concurrency)
			cJSON_AddNumberToObject(o, "global_concurrency",
						q->global_concurrency);
		if (q->per_key_concurrency)
			cJSON_AddNumberToObject(o, "per_key_concurrency",
						q->per_key_concurrency);
		if (q->rate.n)
			cJSON_AddStringToObject(
				o, "rate",
				rate_format(&q->rate, buf, sizeof(buf)));
		if (q->burst)
			cJSON_AddNumberToObject(o, "burst", q->burst);
		if (q->rate_per_key.n)
			cJSON_AddStringToObject(o, "rate_per_key",
						rate_format(&q->rate_per_key,
							    buf, sizeof(buf)));
		if (q->burst_per_key)
			cJSON_AddNumberToObject(o, "burst_per_key",
						q->burst_per_key);
		if (q->fair)
			cJSON_AddTrueToObject(o, "fair");
	}
	char *s = cJSON_PrintUnformatted(all);
	cJSON_Delete(all);
	if (!s)
		abort(); /* out of memory, as xmalloc() */
	char *out = xstrdup(s);
	cJSON_free(s);
	return out;
}

void
config_errors_add(struct config_errors *errs, const char *fmt, ...)
{
	va_list ap;
	char *m;

	va_start(ap, fmt);
	m = xvasprintf(fmt, ap);
	va_end(ap);
	errs->msg = xrealloc(errs->msg, (errs->n + 1) * sizeof(*errs->msg));
	errs->msg[errs->n++] = m;
}

static void
run_as_free(struct run_as *as)
{
	free(as->user);
	free(as->group);
	free(as->groups);
}

const struct database_conf *
config_database(const struct config *c, const char *name)
{
	for (size_t i = 0; name && i < c->ndatabases; i++)
		if (!strcmp(c->databases[i].name, name))
			return &c->databases[i];
	return NULL;
}

void
config_free(struct config *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->nqueues; i++)
		free(c->queues[i].name);
	for (size_t i = 0; i < c->nhandlers; i++) {
		struct handler_conf *h = &c->handlers[i];

		free(h->kind);
		free(h->queue);
		strlist_free(&h->command);
		strlist_free(&h->env);
		run_as_free(&h->run_as);
		free(h->statement);
		free(h->url);
		strlist_free(&h->headers);
		free(h->library);
		free(h->symbol);
		free(h->plugin_config);
	}
	for (size_t i = 0; i < c->nschedules; i++) {
		struct schedule_conf *s = &c->schedules[i];

		free(s->name);
		free(s->cron);
		free(s->kind);
		free(s->payload);
		free(s->queue);
		free(s->timezone);
	}
	for (size_t i = 0; i < c->ntasks; i++) {
		free(c->tasks[i].name);
		strlist_free(&c->tasks[i].command);
		run_as_free(&c->tasks[i].run_as);
	}
	for (size_t i = 0; i < c->ndatabases; i++) {
		free(c->databases[i].name);
		free(c->databases[i].conninfo);
	}
	free(c->databases);
	free(c->queues);
	free(c->handlers);
	free(c->schedules);
	free(c->tasks);
	free(c->path);
	free(c->conninfo);
	free(c->metrics_listen);
	free(c->tracing_endpoint);
	free(c->tracing_service);
	free(c->web.listen);
	free(c->web.public_url);
	for (size_t i = 0; i < c->web.nusers; i++) {
		free(c->web.users[i].name);
		free(c->web.users[i].password_hash);
	}
	free(c->web.users);
	free(c);
}

void
config_errors_free(struct config_errors *errs)
{
	if (!errs)
		return;
	for (size_t i = 0; i < errs->n; i++)
		free(errs->msg[i]);
	free(errs->msg);
	errs->msg = NULL;
	errs->n = 0;
}

const struct handler_conf *
config_handler(const struct config *c, const char *kind)
{
	for (size_t i = 0; kind && i < c->nhandlers; i++)
		if (!strcmp(c->handlers[i].kind, kind))
			return &c->handlers[i];
	return NULL;
}

const struct queue_conf *
config_queue(const struct config *c, const char *name)
{
	for (size_t i = 0; name && i < c->nqueues; i++)
		if (!strcmp(c->queues[i].name, name))
			return &c->queues[i];
	return NULL;
}

const char *
config_handler_type_name(enum handler_type t)
{
	return (unsigned)t <= HANDLER_PROCESS ? config_handler_types[t]
					      : "unknown";
}

const char *
config_queue_mode_name(enum queue_mode m)
{
	return (unsigned)m <= QUEUE_PER_KEY ? config_queue_modes[m] : "unknown";
}
