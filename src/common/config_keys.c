/*
 * config_keys: the schema of the configuration file, the keys of each map in
 * a table (in the manner of Redis's typed config table: a key's type, where
 * its value goes and its limits), and the readers and checks of the values
 * that are more than a string, a number or a duration (a command, env:,
 * headers:, a rate, a size, a plugin's library).  A new key goes in its
 * table here, and in docs/configuration.md.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/config_internal.h"
#include "common/duration.h"
#include "common/env.h"
#include "common/log.h"
#include "common/rate.h"
#include "common/size.h"
#include "common/util.h"
#include "common/yaml.h"

/* Read here, not with log_level_parse(), so that config stays pure. */
static const char *const log_levels[] = {
	[LOG_DEBUG] = "debug", [LOG_INFO] = "info",    [LOG_WARN] = "warn",
	[LOG_ERROR] = "error", [LOG_ERROR + 1] = NULL,
};
static const char *const log_formats[] = {
	[LOG_FORMAT_TEXT] = "text",
	[LOG_FORMAT_JSON] = "json",
	[LOG_FORMAT_JSON + 1] = NULL,
};
static const char *const catch_ups[] = {"latest", "all", NULL};

static bool
is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* ---- values that config reads itself ---- */

/*
 * A command: a list of strings.  The program is an absolute path or a bare
 * name that the exec handler looks up in its fixed PATH; a relative path
 * would depend on the daemon's working directory.
 */
static void
read_argv(struct yaml_doc *d, const struct ynode *n, const char *path,
	  void *dst)
{
	struct strlist *argv = dst;
	const char *prog;
	char *ipath;

	if (yaml_strings(d, n, path, argv) < 0)
		return;
	prog = argv->v[0];
	if (*prog == '/' || (*prog && !strchr(prog, '/')))
		return;
	ipath = xasprintf("%s[0]", path);
	if (!*prog)
		yaml_doc_error(d, n->items[0], ipath, "must not be empty");
	else
		yaml_doc_error(d, n->items[0], ipath,
			       "relative path \"%s\": use an absolute path "
			       "or a bare program name",
			       prog);
	free(ipath);
}

static bool
is_header_name(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!strchr("!#$%&'*+-.^_`|~", *s) && !is_digit(*s) &&
		    !((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z')))
			return false;
	return true;
}

/* env: or headers:, a map, as "NAME=value" or "Name: value" strings. */
static void
read_pairs(struct yaml_doc *d, const struct ynode *n, const char *path,
	   bool env, struct strlist *dst)
{
	if (!yaml_map_ok(d, n, path))
		return;
	for (size_t i = 0; i < n->n; i++) {
		const struct ynode *k = n->pairs[i].key, *v = n->pairs[i].value;
		char *kpath, *s;

		if (!yaml_entry_ok(d, n, i, path))
			continue;
		kpath = config_join(path, k->text);
		if (env && !env_is_name(k->text, k->len))
			yaml_doc_error(d, k, kpath, "bad variable name \"%s\"",
				       k->text);
		else if (!env && !is_header_name(k->text))
			yaml_doc_error(d, k, kpath, "bad header name \"%s\"",
				       k->text);
		else if ((s = yaml_string(d, v, kpath))) {
			if (!env && strpbrk(s, "\r\n"))
				yaml_doc_error(d, v, kpath,
					       "must not contain a line break");
			strlist_add(dst, xasprintf(env ? "%s=%s" : "%s: %s",
						   k->text, s));
			free(s);
		}
		free(kpath);
	}
}

/* env: a map of names to values, or a list of "NAME=value" strings. */
static void
read_env(struct yaml_doc *d, const struct ynode *n, const char *path, void *dst)
{
	struct strlist *env = dst;
	char *ipath, *s;

	if (n->type != YNODE_LIST) {
		read_pairs(d, n, path, true, env);
		return;
	}
	for (size_t i = 0; i < n->n; i++) {
		ipath = xasprintf("%s[%zu]", path, i);
		if ((s = yaml_string(d, n->items[i], ipath)) &&
		    (!strchr(s, '=') ||
		     !env_is_name(s, (size_t)(strchr(s, '=') - s)))) {
			yaml_doc_error(d, n->items[i], ipath,
				       "expected \"NAME=value\"");
			free(s);
		} else if (s) {
			strlist_add(env, s);
		}
		free(ipath);
	}
}

static void
read_headers(struct yaml_doc *d, const struct ynode *n, const char *path,
	     void *dst)
{
	read_pairs(d, n, path, false, dst);
}

/* user: and group: are read as strings here, and resolved with the rest of
 * their map (config_resolve_run_as()). */
static void
read_user(struct yaml_doc *d, const struct ynode *n, const char *path,
	  void *dst)
{
	struct run_as *as = dst;

	free(as->user);
	as->user = yaml_string(d, n, path);
}

static void
read_group(struct yaml_doc *d, const struct ynode *n, const char *path,
	   void *dst)
{
	struct run_as *as = dst;

	free(as->group);
	as->group = yaml_string(d, n, path);
}

/* rate: and rate_per_key:, "COUNT/PERIOD" (rate.h). */
static void
read_rate(struct yaml_doc *d, const struct ynode *n, const char *path,
	  void *dst)
{
	struct rate *r = dst;
	const char *why;
	char *s = yaml_string(d, n, path);

	if (s && rate_parse(s, r, &why) < 0)
		yaml_doc_error(d, n, path, "rate \"%s\": %s", s, why);
	free(s);
}

/* limits.memory and limits.file_size: a size (size.h), at least 1 byte. */
static void
read_size(struct yaml_doc *d, const struct ynode *n, const char *path,
	  void *dst)
{
	const char *why = NULL;
	char *s = yaml_string(d, n, path);
	int64_t bytes;

	if (s && size_parse(s, &bytes, &why) < 0)
		yaml_doc_error(d, n, path, "size \"%s\": %s", s, why);
	else if (s && bytes == 0)
		yaml_doc_error(d, n, path,
			       "must be at least 1 byte (leave it out for no "
			       "limit)");
	else if (s)
		*(int64_t *)dst = bytes;
	free(s);
}

/* limits.cpu: a duration in whole seconds, RLIMIT_CPU's unit. */
static void
read_cpu(struct yaml_doc *d, const struct ynode *n, const char *path, void *dst)
{
	int64_t ms;

	if (yaml_duration(d, n, path, 1000, DURATION_MAX_MS, &ms) < 0)
		return;
	if (ms % 1000)
		yaml_doc_error(d, n, path,
			       "CPU time is limited in whole seconds "
			       "(RLIMIT_CPU): 1s, 90s, 5m");
	else
		*(int64_t *)dst = ms;
}

static const char *
check_nonempty(const char *s)
{
	return *s ? NULL : "must not be empty";
}

/*
 * A plugin's library: a relative name is looked for inside the plugin
 * directory (handler_plugin_path()), and a ".." would leave it; an absolute
 * path has no need of one.
 */
static const char *
check_library(const char *s)
{
	if (!*s)
		return "must not be empty";
	for (const char *c = s; *c;) {
		size_t len = strcspn(c, "/");
		if (len == 2 && c[0] == '.' && c[1] == '.')
			return "must not have a \"..\" component (a name is "
			       "looked for inside the plugin directory; give "
			       "an absolute path to load another)";
		c += len + (c[len] == '/');
	}
	return NULL;
}

static const char *
check_url(const char *s)
{
	if (strncmp(s, "http://", 7) && strncmp(s, "https://", 8))
		return "must start with http:// or https://";
	return NULL;
}

/* ---- the key tables (F() and its kin: config_internal.h) ---- */

static const struct yaml_field backoff_fields[] = {
	F("base", YF_DURATION, backoff, base_ms, NOLIMIT),
	F("max", YF_DURATION, backoff, max_ms, NOLIMIT),
	{0},
};

static const struct yaml_field database_fields[] = {
	F("conninfo", YF_STRING, config, conninfo,
	  .check = config_check_conninfo),
	{0},
};

static const struct yaml_field log_fields[] = {
	F("level", YF_CHOICE, config, log_level, .names = log_levels,
	  .what = "log level"),
	F("format", YF_CHOICE, config, log_format, .names = log_formats,
	  .what = "log format"),
	{0},
};

static const struct yaml_field metrics_fields[] = {
	F("listen", YF_STRING, config, metrics_listen,
	  .check = config_check_listen),
	{0},
};

static const char *
check_otlp_endpoint(const char *s)
{
	return strncmp(s, "http://", 7) == 0 || strncmp(s, "https://", 8) == 0
		       ? NULL
		       : "not an http:// or https:// URL";
}

/* Spans sent over OTLP/HTTP (docs/tracing.md, "Exporting spans"). */
static const struct yaml_field tracing_fields[] = {
	F("otlp_endpoint", YF_STRING, config, tracing_endpoint,
	  .check = check_otlp_endpoint),
	F("service_name", YF_STRING, config, tracing_service),
	F("buffer", YF_INT, config, tracing_buffer, .min = 1, .max = 1000000),
	{0},
};

/* The database health guard (docs/operations.md, "Database health"). */
static const struct yaml_field health_fields[] = {
	F("interval", YF_DURATION, config, health_interval_ms, .min = 1000,
	  NOLIMIT),
	F("xmin_warn", YF_DURATION, config, health_xmin_warn_ms, .min = 1000,
	  NOLIMIT),
	{0},
};

static const struct yaml_field defaults_fields[] = {
	F("timeout", YF_DURATION, config, default_timeout_ms, .min = 1,
	  NOLIMIT),
	F("max_attempts", YF_INT, config, default_max_attempts, .min = 1,
	  .max = INT_MAX),
	F("backoff", YF_MAP, config, default_backoff, .sub = backoff_fields),
	{0},
};

const struct yaml_field config_top_fields[] = {
	{.key = "database", .type = YF_MAP, .sub = database_fields},
	F("workers", YF_INT, config, workers, .min = 1, .max = INT_MAX),
	F("max_slots", YF_INT, config, max_slots, .min = 1, .max = 100000),
	F("lock_class", YF_INT, config, lock_class, .min = INT32_MIN,
	  .max = INT32_MAX),
	F("lease", YF_DURATION, config, lease_ms, .min = 1000, NOLIMIT),
	F("shutdown_timeout", YF_DURATION, config, shutdown_timeout_ms,
	  NOLIMIT),
	F("retention", YF_DURATION, config, retention_ms, NOLIMIT),
	F("poll_interval", YF_DURATION, config, poll_interval_ms, .min = 10,
	  NOLIMIT),
	F("max_payload_bytes", YF_INT, config, max_payload_bytes, .min = 1,
	  .max = 1 << 30),
	{.key = "log", .type = YF_MAP, .sub = log_fields},
	{.key = "metrics", .type = YF_MAP, .sub = metrics_fields},
	{.key = "defaults", .type = YF_MAP, .sub = defaults_fields},
	{.key = "health", .type = YF_MAP, .sub = health_fields},
	{.key = "web", .type = YF_MAP, .sub = config_web_fields},
	{.key = "tracing", .type = YF_MAP, .sub = tracing_fields},
	{.key = "queues", .type = YF_LATER},
	{.key = "handlers", .type = YF_LATER},
	{.key = "schedules", .type = YF_LATER},
	{.key = "tasks", .type = YF_LATER},
	{.key = "databases", .type = YF_LATER},
	{0},
};

/* One database of databases: (struct database_conf). */
const struct yaml_field config_database_conf_fields[] = {
	F("conninfo", YF_STRING, database_conf, conninfo, .required = true,
	  .check = config_check_conninfo),
	F("workers", YF_INT, database_conf, workers, .min = 1, .max = INT_MAX),
	{0},
};

const struct yaml_field config_queue_fields[] = {
	F("concurrency", YF_INT, queue_conf, concurrency, .min = 1,
	  .max = INT_MAX),
	F("mode", YF_CHOICE, queue_conf, mode, .names = config_queue_modes,
	  .what = "queue mode"),
	F("timeout", YF_DURATION, queue_conf, timeout_ms, .min = 1, NOLIMIT),
	F("max_attempts", YF_INT, queue_conf, max_attempts, .min = 1,
	  .max = INT_MAX),
	F("backoff", YF_MAP, queue_conf, backoff, .sub = backoff_fields),
	F("global_concurrency", YF_INT, queue_conf, global_concurrency,
	  .min = 1, .max = 1000000000),
	F("per_key_concurrency", YF_INT, queue_conf, per_key_concurrency,
	  .min = 1, .max = 1000000000),
	F("rate", YF_READ, queue_conf, rate, .read = read_rate),
	F("burst", YF_INT, queue_conf, burst, .min = 1, .max = 1000000000),
	F("rate_per_key", YF_READ, queue_conf, rate_per_key, .read = read_rate),
	F("burst_per_key", YF_INT, queue_conf, burst_per_key, .min = 1,
	  .max = 1000000000),
	F("fair", YF_BOOL, queue_conf, fair),
	F("adaptive", YF_BOOL, queue_conf, adaptive),
	{0},
};

/* An exec handler's limits: (struct exec_limits). */
static const struct yaml_field limits_fields[] = {
	F("cpu", YF_READ, exec_limits, cpu_ms, .read = read_cpu),
	F("memory", YF_READ, exec_limits, memory, .read = read_size),
	F("open_files", YF_INT, exec_limits, open_files, .min = 1,
	  .max = INT_MAX),
	F("processes", YF_INT, exec_limits, processes, .min = 1,
	  .max = INT_MAX),
	F("file_size", YF_READ, exec_limits, file_size, .read = read_size),
	{0},
};

const struct yaml_field config_handler_fields[] = {
	F("type", YF_CHOICE, handler_conf, type, .names = config_handler_types,
	  .what = "handler type", .required = true),
	F("queue", YF_STRING, handler_conf, queue, .check = check_nonempty),
	F("timeout", YF_DURATION, handler_conf, timeout_ms, .min = 1, NOLIMIT),
	F("max_attempts", YF_INT, handler_conf, max_attempts, .min = 1,
	  .max = INT_MAX),
	F("backoff", YF_MAP, handler_conf, backoff, .sub = backoff_fields),
	F("command", YF_READ, handler_conf, command, .read = read_argv,
	  .only = EXEC | PROCESS, .required = true),
	F("env", YF_READ, handler_conf, env, .read = read_env,
	  .only = EXEC | PROCESS),
	F("user", YF_READ, handler_conf, run_as, .read = read_user,
	  .only = EXEC | PROCESS),
	F("group", YF_READ, handler_conf, run_as, .read = read_group,
	  .only = EXEC | PROCESS),
	/* Only programs of their own: the other types run inside their
	 * worker, whose limits would bound every job of the worker at
	 * once. */
	F("limits", YF_MAP, handler_conf, limits, .sub = limits_fields,
	  .only = EXEC | PROCESS),
	F("copies", YF_INT, handler_conf, copies, .min = 1, .max = 1000,
	  .only = PROCESS),
	F("concurrency", YF_INT, handler_conf, concurrency, .min = 1,
	  .max = 10000, .only = PROCESS),
	F("max_jobs", YF_INT, handler_conf, max_jobs, .min = 1, NOLIMIT,
	  .only = PROCESS),
	F("max_memory", YF_READ, handler_conf, max_memory, .read = read_size,
	  .only = PROCESS),
	F("startup_timeout", YF_DURATION, handler_conf, startup_timeout_ms,
	  .min = 1, NOLIMIT, .only = PROCESS),
	F("max_line_bytes", YF_INT, handler_conf, max_line_bytes, .min = 1024,
	  .max = 1LL << 31, .only = PROCESS),
	F("statement", YF_STRING, handler_conf, statement, .only = SQL,
	  .required = true, .check = check_nonempty),
	F("url", YF_STRING, handler_conf, url, .only = HTTP, .required = true,
	  .check = check_url),
	F("headers", YF_READ, handler_conf, headers, .read = read_headers,
	  .only = HTTP),
	F("tls_verify", YF_BOOL, handler_conf, tls_verify, .only = HTTP),
	F("library", YF_STRING, handler_conf, library, .only = PLUGIN,
	  .required = true, .check = check_library),
	F("symbol", YF_STRING, handler_conf, symbol, .only = PLUGIN,
	  .required = true, .check = check_nonempty),
	F("config", YF_JSON, handler_conf, plugin_config, .only = PLUGIN),
	{0},
};

const struct yaml_field config_schedule_fields[] = {
	F("cron", YF_STRING, schedule_conf, cron, .required = true,
	  .check = check_nonempty),
	F("kind", YF_STRING, schedule_conf, kind, .required = true),
	F("payload", YF_JSON, schedule_conf, payload),
	F("queue", YF_STRING, schedule_conf, queue),
	F("timezone", YF_STRING, schedule_conf, timezone,
	  .check = check_nonempty),
	F("catch_up", YF_CHOICE, schedule_conf, catch_up_all,
	  .names = catch_ups, .what = "catch_up"),
	{0},
};

const struct yaml_field config_task_fields[] = {
	F("command", YF_READ, task_conf, command, .read = read_argv,
	  .required = true),
	F("partitions", YF_INT, task_conf, partitions, .min = 1, .max = 10000),
	F("user", YF_READ, task_conf, run_as, .read = read_user),
	F("group", YF_READ, task_conf, run_as, .read = read_group),
	{0},
};

/*
 * pgjob's view of a handler (config_load_settings()): its name, type, queue
 * and timeout, which `pgjob doctor` needs; the other keys (commands, urls,
 * headers, env: where the secrets are) are skipped unread.
 */
const struct yaml_field config_handler_cli_fields[] = {
	F("type", YF_CHOICE, handler_conf, type, .names = config_handler_types,
	  .what = "handler type"),
	F("queue", YF_STRING, handler_conf, queue, .check = check_nonempty),
	F("timeout", YF_DURATION, handler_conf, timeout_ms, .min = 1, NOLIMIT),
	{0},
};
