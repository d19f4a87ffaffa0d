/*
 * config_internal: what the files of the configuration reader
 * (src/common/config*.c) share; nothing outside them includes it.
 */
#ifndef PGJOBD_CONFIG_INTERNAL_H
#define PGJOBD_CONFIG_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "common/config.h"
#include "common/yaml.h"

/*
 * F("key", YF_INT, config, member, .min = 1): a key, its type, its place in
 * struct config and any other settings.  F_ gets an empty last argument so
 * that ISO C's "at least one argument for ..." holds when there are none.
 */
#define F(k, t, tag, ...) F_(k, t, tag, __VA_ARGS__, )
#define F_(k, t, tag, member, ...)                                             \
	{                                                                      \
		.key = k, .type = t, .off = offsetof(struct tag, member),      \
		.size = sizeof(((struct tag *)0)->member), __VA_ARGS__         \
	}
#define NOLIMIT .max = INT64_MAX
#define EXEC	(1u << HANDLER_EXEC)
#define SQL	(1u << HANDLER_SQL)
#define HTTP	(1u << HANDLER_HTTP)
#define PLUGIN	(1u << HANDLER_PLUGIN)
#define PROCESS (1u << HANDLER_PROCESS)

/* config.c: the names of enum handler_type and enum queue_mode, each list
 * ended by NULL; path.key (caller frees). */
extern const char *const config_handler_types[];
extern const char *const config_queue_modes[];
char *config_join(const char *path, const char *key);

/* config_keys.c: the key tables. */
extern const struct yaml_field config_top_fields[];
extern const struct yaml_field config_database_conf_fields[];
extern const struct yaml_field config_queue_fields[];
extern const struct yaml_field config_handler_fields[];
extern const struct yaml_field config_handler_cli_fields[];
extern const struct yaml_field config_schedule_fields[];
extern const struct yaml_field config_task_fields[];

/* config_sections.c: the sections after the top-level keys of top, in the
 * order that lets each check the names it uses: databases, queues,
 * handlers, then schedules and tasks (not for pgjob: cli). */
void config_load_sections(struct yaml_doc *d, struct config *c,
			  const struct yaml_walk *top, bool cli);

/* config_web.c: the web: table, and web.public_url needs web.users. */
extern const struct yaml_field config_web_fields[];
void config_check_web(struct yaml_doc *d, const struct config *c,
		      const struct yaml_walk *top);

/* config_host.c: user: and group: of w, resolved into as (an error at the
 * one that does not exist); a listen address and a connection string
 * checked as they will be used (NULL, or why not). */
void config_resolve_run_as(struct yaml_doc *d, const struct yaml_walk *w,
			   const char *path, struct run_as *as);
const char *config_check_listen(const char *s);
const char *config_check_conninfo(const char *s);

#endif
