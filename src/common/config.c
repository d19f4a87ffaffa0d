/*
 * config: the YAML configuration of pgjobd, read into one immutable struct
 * config.
 *
 * yaml.c parses the file and reads typed values; this file says which keys
 * exist.  Each map has a table of its keys, in the manner of Redis's typed
 * config table: a key's type, where its value goes and its limits.  Nothing
 * stops at the first mistake: every error is recorded with its position, the
 * names that one section uses from another (a handler's queue, a schedule's
 * kind) are checked once that section is read, and the errors come back in
 * document order.
 */
#include "common/config.h"

#include <cjson/cJSON.h>
#include <crypt.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cron.h"
#include "common/duration.h"
#include "common/env.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/size.h"
#include "common/util.h"
#include "common/yaml.h"

static const char *const handler_types[] = {
	[HANDLER_EXEC] = "exec",       [HANDLER_SQL] = "sql",
	[HANDLER_HTTP] = "http",       [HANDLER_PLUGIN] = "plugin",
	[HANDLER_PROCESS] = "process", [HANDLER_PROCESS + 1] = NULL,
};
static const char *const queue_modes[] = {
	[QUEUE_PARALLEL] = "parallel",
	[QUEUE_SERIAL] = "serial",
	[QUEUE_PER_KEY] = "per_key",
	[QUEUE_PER_KEY + 1] = NULL,
};
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

static char *
join(const char *path, const char *key)
{
	return xasprintf("%s%s%s", path, *path ? "." : "", key);
}

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
		kpath = join(path, k->text);
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
 * their map (resolve_run_as()). */
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

static bool
all_digits(const char *s)
{
	return *s && strspn(s, "0123456789") == strlen(s);
}

/*
 * The uid, primary gid and name (caller frees) of user s, a name or a
 * number.  Returns 0, or -1 when there is no such user.
 */
static int
find_user(const char *s, uid_t *uid, gid_t *gid, char **name)
{
	struct passwd pw, *r = NULL;
	size_t len = 1024;
	char *buf = NULL;
	int e;

	for (;;) {
		buf = xrealloc(buf, len);
		e = getpwnam_r(s, &pw, buf, len, &r);
		if (e == 0 && !r && all_digits(s))
			e = getpwuid_r((uid_t)strtoul(s, NULL, 10), &pw, buf,
				       len, &r);
		if (e != ERANGE || len >= 1 << 20)
			break;
		len *= 4;
	}
	if (r) {
		*uid = pw.pw_uid;
		*gid = pw.pw_gid;
		*name = xstrdup(pw.pw_name);
	}
	free(buf);
	return r ? 0 : -1;
}

/* The gid of group s, a name or a number: 0, or -1 when there is none. */
static int
find_group(const char *s, gid_t *gid)
{
	struct group gr, *r = NULL;
	size_t len = 1024;
	char *buf = NULL;
	int e;

	for (;;) {
		buf = xrealloc(buf, len);
		e = getgrnam_r(s, &gr, buf, len, &r);
		if (e == 0 && !r && all_digits(s))
			e = getgrgid_r((gid_t)strtoul(s, NULL, 10), &gr, buf,
				       len, &r);
		if (e != ERANGE || len >= 1 << 20)
			break;
		len *= 4;
	}
	if (r)
		*gid = gr.gr_gid;
	free(buf);
	return r ? 0 : -1;
}

/*
 * Looks up the user: and group: that w read into as: the uid, the gid (the
 * group's, else the user's own) and the supplementary groups (the user's,
 * as login would set them; the group alone without a user).  Records an
 * error at the value of one that does not exist.
 */
static void
resolve_run_as(struct yaml_doc *d, const struct yaml_walk *w, const char *path,
	       struct run_as *as)
{
	const struct ynode *un = yaml_walked(w, "user");
	const struct ynode *gn = yaml_walked(w, "group");
	const struct ynode *at = un ? un : gn;
	gid_t user_gid = 0;
	char *name = NULL, *kpath;
	int n = 16;

	if (!as->user && !as->group)
		return;
	if (as->group && find_group(as->group, &as->gid) < 0) {
		kpath = join(path, "group");
		yaml_doc_error(d, gn, kpath, "unknown group \"%s\"", as->group);
		free(kpath);
		return;
	}
	if (as->user && find_user(as->user, &as->uid, &user_gid, &name) < 0) {
		kpath = join(path, "user");
		yaml_doc_error(d, un, kpath, "unknown user \"%s\"", as->user);
		free(kpath);
		return;
	}
	as->set = true;
	as->line = at->line;
	as->column = at->column;
	if (!as->group)
		as->gid = user_gid;
	as->groups = xcalloc((size_t)n, sizeof(gid_t));
	if (!name) {
		as->uid = (uid_t)-1;
		as->groups[0] = as->gid;
		as->ngroups = 1;
		return;
	}
	/* A call with too small an array says how many there are. */
	if (getgrouplist(name, as->gid, as->groups, &n) < 0) {
		as->groups = xrealloc(as->groups, (size_t)n * sizeof(gid_t));
		if (getgrouplist(name, as->gid, as->groups, &n) < 0) {
			as->groups[0] = as->gid;
			n = 1;
		}
	}
	as->ngroups = n;
	free(name);
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

/*
 * web.public_url: scheme, host and at most a port, as a browser sends it in
 * Origin (a trailing "/" allowed).
 */
static const char *
check_public_url(const char *s)
{
	const char *rest = !strncmp(s, "http://", 7)	? s + 7
			   : !strncmp(s, "https://", 8) ? s + 8
							: NULL;
	if (!rest)
		return "must start with http:// or https://";
	size_t n = strcspn(rest, "/?#");
	if (n == 0)
		return "has no host";
	if (rest[n] && strcmp(rest + n, "/") != 0)
		return "must be scheme://host[:port] only, with no path "
		       "(the console is served at the root of it)";
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)rest[i] <= ' ' || rest[i] == '@' ||
		    rest[i] == '\\')
			return "has a character no host name has";
	return NULL;
}

static const char *
check_listen(const char *s)
{
	const char *colon = strrchr(s, ':');
	char *host, *port;

	if (!colon || !is_digit(colon[1]) ||
	    strspn(colon + 1, "0123456789") != strlen(colon + 1))
		return "expected \"host:port\", e.g. \"127.0.0.1:9188\", "
		       "\"[::1]:9188\" or \":9188\"";
	long n = strtol(colon + 1, NULL, 10);
	if (n < 1 || n > 65535)
		return "port must be 1 to 65535";
	/* The parser the metrics server uses: what validates also binds. */
	if (metrics_parse_listen(s, &host, &port) < 0)
		return "expected \"host:port\", e.g. \"127.0.0.1:9188\", "
		       "\"[::1]:9188\" or \":9188\"";
	free(host);
	free(port);
	return NULL;
}

static config_conninfo_check_fn *conninfo_check;

void
config_set_conninfo_check(config_conninfo_check_fn *check)
{
	conninfo_check = check;
}

/* libpq must be able to read it; its own message is not repeated, since it
 * may quote part of a password. */
static const char *
check_conninfo(const char *s)
{
	int valid = conninfo_check ? conninfo_check(s) : 1;
	if (valid > 0)
		return NULL;
	if (valid == 0)
		return "not a valid libpq connection string (keyword=value "
		       "pairs or a postgresql:// URI)";
	return "could not be checked (the log says why)";
}

/* ---- the key tables ---- */

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

static const struct yaml_field backoff_fields[] = {
	F("base", YF_DURATION, backoff, base_ms, NOLIMIT),
	F("max", YF_DURATION, backoff, max_ms, NOLIMIT),
	{0},
};

static const struct yaml_field database_fields[] = {
	F("conninfo", YF_STRING, config, conninfo, .check = check_conninfo),
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
	F("listen", YF_STRING, config, metrics_listen, .check = check_listen),
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

/*
 * web: (pgjob web, docs/console.md).  A user's name reaches log lines and
 * the page: a short identifier.  A password hash must be one that libcrypt
 * checks and that is not of the weak legacy kinds (DES, MD5).
 */
static const char *const web_roles[] = {"read-only", "operator", NULL};

static const char *
check_web_user(const char *s)
{
	size_t n = strlen(s);
	if (n < 1 || n > 64 ||
	    strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
		      "0123456789_.@-") != n)
		return "a user's name is 1 to 64 letters, digits, _ . @ and -";
	return NULL;
}

static const char *
check_password_hash(const char *s)
{
	if (crypt_checksalt(s) != CRYPT_SALT_OK || strncmp(s, "$", 1) != 0 ||
	    strncmp(s, "$1$", 3) == 0)
		return "not a password hash this system's crypt(3) checks "
		       "(or a weak one): make one with `pgjob web "
		       "--hash-password`";
	return NULL;
}

static const struct yaml_field web_user_fields[] = {
	F("name", YF_STRING, web_user_conf, name, .required = true,
	  .check = check_web_user),
	F("password_hash", YF_STRING, web_user_conf, password_hash,
	  .required = true, .check = check_password_hash),
	F("role", YF_CHOICE, web_user_conf, operator, .names = web_roles,
	  .what = "role", .required = true),
	{0},
};

/* web.users: a list of maps, each a user; names unique. */
static void
read_web_users(struct yaml_doc *d, const struct ynode *n, const char *path,
	       void *dst)
{
	struct web_conf *web = dst;

	if (yaml_is_null(n))
		return;
	if (n->type != YNODE_LIST) {
		yaml_doc_error(d, n, path, "expected a list of users");
		return;
	}
	for (size_t i = 0; i < n->n; i++) {
		const struct ynode *item = n->items[i];
		char *ipath = xasprintf("%s[%zu]", path, i);
		struct web_user_conf *u;
		struct yaml_walk w = {.t = web_user_fields};

		if (item->type != YNODE_MAP) {
			yaml_doc_error(d, item, ipath,
				       "expected a map "
				       "(name, password_hash, role)");
			free(ipath);
			continue;
		}
		web->users =
			xrealloc(web->users, (web->nusers + 1) * sizeof(*u));
		w.obj = u = &web->users[web->nusers++];
		*u = (struct web_user_conf){.line = item->line,
					    .column = item->column};
		yaml_walk_map(d, item, item, ipath, &w);
		for (size_t j = 0; u->name && j + 1 < web->nusers; j++) {
			if (!web->users[j].name ||
			    strcmp(web->users[j].name, u->name) != 0)
				continue;
			char *npath = join(ipath, "name");
			yaml_doc_error(d, yaml_walked(&w, "name"), npath,
				       "user \"%s\" is already defined at "
				       "line %d",
				       u->name, web->users[j].line);
			free(npath);
		}
		free(ipath);
	}
}

static const struct yaml_field web_fields[] = {
	F("listen", YF_STRING, config, web.listen, .check = check_listen),
	F("session_ttl", YF_DURATION, config, web.session_ttl_ms,
	  .min = 60 * 1000, .max = 366 * 86400 * 1000LL),
	F("cookie_secure", YF_BOOL, config, web.cookie_secure),
	F("public_url", YF_STRING, config, web.public_url,
	  .check = check_public_url),
	F("users", YF_READ, config, web, .read = read_web_users),
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

static const struct yaml_field top_fields[] = {
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
	{.key = "web", .type = YF_MAP, .sub = web_fields},
	{.key = "queues", .type = YF_LATER},
	{.key = "handlers", .type = YF_LATER},
	{.key = "schedules", .type = YF_LATER},
	{.key = "tasks", .type = YF_LATER},
	{.key = "databases", .type = YF_LATER},
	{0},
};

/* One database of databases: (struct database_conf). */
static const struct yaml_field database_conf_fields[] = {
	F("conninfo", YF_STRING, database_conf, conninfo, .required = true,
	  .check = check_conninfo),
	F("workers", YF_INT, database_conf, workers, .min = 1, .max = INT_MAX),
	{0},
};

static const struct yaml_field queue_fields[] = {
	F("concurrency", YF_INT, queue_conf, concurrency, .min = 1,
	  .max = INT_MAX),
	F("mode", YF_CHOICE, queue_conf, mode, .names = queue_modes,
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

static const struct yaml_field handler_fields[] = {
	F("type", YF_CHOICE, handler_conf, type, .names = handler_types,
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

static const struct yaml_field schedule_fields[] = {
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

static const struct yaml_field task_fields[] = {
	F("command", YF_READ, task_conf, command, .read = read_argv,
	  .required = true),
	F("partitions", YF_INT, task_conf, partitions, .min = 1, .max = 10000),
	F("user", YF_READ, task_conf, run_as, .read = read_user),
	F("group", YF_READ, task_conf, run_as, .read = read_group),
	{0},
};

/* ---- sections: queues, handlers, schedules, tasks ---- */

/* Checks that the queue: of w (at path) names a queue. */
static void
check_queue(struct yaml_doc *d, const struct config *c,
	    const struct yaml_walk *w, const char *path, const char *queue)
{
	const struct ynode *n = yaml_walked(w, "queue");
	char *qpath;

	if (!queue || !n || config_queue(c, queue))
		return;
	qpath = join(path, "queue");
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
	char *kpath = join(path, key);

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

static void
load_queue(struct yaml_doc *d, struct config *c, const struct ynode *key,
	   const struct ynode *val, const char *path)
{
	struct queue_conf *q;
	struct yaml_walk w = {.t = queue_fields};

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
				if (!strcmp(handler_types[t], s))
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
	tpath = join(path, "timeout");
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

/*
 * pgjob's view of a handler (config_load_settings()): its name, type, queue
 * and timeout, which `pgjob doctor` needs; the other keys (commands, urls,
 * headers, env: where the secrets are) are skipped unread.
 */
static const struct yaml_field handler_cli_fields[] = {
	F("type", YF_CHOICE, handler_conf, type, .names = handler_types,
	  .what = "handler type"),
	F("queue", YF_STRING, handler_conf, queue, .check = check_nonempty),
	F("timeout", YF_DURATION, handler_conf, timeout_ms, .min = 1, NOLIMIT),
	{0},
};

/* A handler, whole (pgjobd) or as pgjob sees it (cli: handler_cli_fields). */
static void
load_handler_as(struct yaml_doc *d, struct config *c, const struct ynode *key,
		const struct ynode *val, const char *path, bool cli)
{
	struct handler_conf *h;
	bool own_timeout;
	struct yaml_walk w = {
		.t = cli ? handler_cli_fields : handler_fields,
		.variants = handler_types,
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
		resolve_run_as(d, &w, path, &h->run_as);
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
			vpath = join(path, "cron");
			yaml_doc_error(d, cron, vpath, "%s", err);
			free(vpath);
			free(err);
		}
	}
	if (s->timezone && tz && !cron_tz_valid(s->timezone)) {
		vpath = join(path, "timezone");
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
	struct yaml_walk w = {.t = schedule_fields};
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
		kpath = join(path, "kind");
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
	struct yaml_walk w = {.t = task_fields};

	c->tasks = xrealloc(c->tasks, (c->ntasks + 1) * sizeof(*t));
	w.obj = t = &c->tasks[c->ntasks++];
	*t = (struct task_conf){
		.name = xstrdup(key->text),
		.partitions = 1,
		.line = key->line,
		.column = key->column,
	};
	yaml_walk_map(d, key, val, path, &w);
	resolve_run_as(d, &w, path, &t->run_as);
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
	struct yaml_walk w = {.t = database_conf_fields};

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
		char *wpath = join(path, "workers");
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
		path = join(section, k->text);
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

/*
 * web.public_url without web.users would serve an open console to whoever
 * reaches the reverse proxy: refused, as pgjob web refuses an open console
 * off loopback.
 */
static void
check_web(struct yaml_doc *d, const struct config *c,
	  const struct yaml_walk *top)
{
	const struct ynode *web = yaml_walked(top, "web"), *at = web;

	if (!c->web.public_url || c->web.nusers > 0 || !web ||
	    web->type != YNODE_MAP)
		return;
	for (size_t i = 0; i < web->n; i++)
		if (web->pairs[i].key->text &&
		    strcmp(web->pairs[i].key->text, "public_url") == 0)
			at = web->pairs[i].value;
	yaml_doc_error(d, at, "web.public_url",
		       "needs web.users: a reverse proxy would serve an open "
		       "console (anyone an operator) to everyone who reaches "
		       "it");
}

/*
 * Reads the document into c.  The sections come last, in the order that lets
 * each check the names it uses: queues, handlers, then schedules.
 */
static void
load_document(struct yaml_doc *d, struct config *c, bool cli)
{
	struct yaml_walk top = {.t = top_fields, .obj = c};
	const struct ynode *workers;

	if (d->root && d->root->type != YNODE_MAP && !yaml_is_null(d->root)) {
		yaml_doc_error(d, d->root, "", "expected a map of settings");
		return;
	}
	yaml_walk_map(d, NULL, d->root, "", &top);
	load_databases(d, c, &top);
	load_section(d, c, &top, "queues", load_queue);
	add_default_queue(c);
	/* pgjob (config_load_settings()) reads a part of each handler
	 * (load_handler_cli()) and no schedule or task; the rest, where the
	 * secrets are, is pgjobd's. */
	load_section(d, c, &top, "handlers",
		     cli ? load_handler_cli : load_handler);
	if (!cli) {
		load_section(d, c, &top, "schedules", load_schedule);
		load_section(d, c, &top, "tasks", load_task);
	}
	check_web(d, c, &top);
	workers = yaml_walked(&top, "workers");
	if (workers && c->workers > c->max_slots)
		yaml_doc_error(d, workers, "workers",
			       "must not be more than max_slots (%d)",
			       c->max_slots);
}

/* ---- loading ---- */

static struct config *
config_new(const char *name)
{
	struct config *c = xcalloc(1, sizeof(*c));

	c->path = xstrdup(name);
	c->workers = 2;
	c->max_slots = 64;
	c->lock_class = CONFIG_DEFAULT_LOCK_CLASS;
	c->lease_ms = 30 * 1000;
	c->shutdown_timeout_ms = 60 * 1000;
	c->retention_ms = 7 * 86400 * 1000LL;
	c->poll_interval_ms = 1000;
	c->max_payload_bytes = 1024 * 1024;
	c->log_level = LOG_INFO;
	c->log_format = LOG_FORMAT_TEXT;
	c->default_timeout_ms = 5 * 60 * 1000;
	c->default_max_attempts = 20;
	c->default_backoff.base_ms = 30 * 1000;
	c->default_backoff.max_ms = 30 * 60 * 1000;
	c->health_interval_ms = 10 * 1000;
	c->health_xmin_warn_ms = 5 * 60 * 1000;
	c->web.session_ttl_ms = 12 * 3600 * 1000LL;
	return c;
}

static struct config *
load_text(const char *name, const char *text, size_t len,
	  struct config_errors *errs, bool cli)
{
	struct yaml_doc d;
	struct config *c = config_new(name);
	struct config_errors none;
	size_t n;

	if (!errs)
		errs = &none;
	if (yaml_doc_load(&d, name, text, len) == 0)
		load_document(&d, c, cli);
	n = errs->n = yaml_doc_take_errors(&d, &errs->msg);
	yaml_doc_release(&d);
	if (errs == &none)
		config_errors_free(&none);
	if (n == 0)
		return c;
	config_free(c);
	return NULL;
}

struct config *
config_load_string(const char *name, const char *text, size_t len,
		   struct config_errors *errs)
{
	return load_text(name, text, len, errs, false);
}

static struct config *
load_path(const char *path, struct config_errors *errs, bool cli)
{
	struct buf b = {0};
	char chunk[8192];
	ssize_t n = 0;
	struct config *c = NULL;
	int fd, err;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) >= 0) {
		while ((n = read(fd, chunk, sizeof(chunk))) != 0) {
			if (n < 0 && errno != EINTR)
				break;
			if (n > 0)
				buf_append(&b, chunk, (size_t)n);
		}
	}
	if (fd < 0 || n < 0) {
		err = errno;
		if (errs) {
			errs->n = 1;
			errs->msg = xcalloc(1, sizeof(*errs->msg));
			errs->msg[0] = xasprintf("%s: cannot read: %s", path,
						 strerror(err));
		}
	} else {
		c = load_text(path, b.data ? b.data : "", b.len, errs, cli);
	}
	if (fd >= 0)
		close(fd);
	buf_free(&b);
	return c;
}

struct config *
config_load(const char *path, struct config_errors *errs)
{
	return load_path(path, errs, false);
}

struct config *
config_load_settings(const char *path, struct config_errors *errs)
{
	return load_path(path, errs, true);
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
	free(c->web.listen);
	free(c->web.public_url);
	for (size_t i = 0; i < c->web.nusers; i++) {
		free(c->web.users[i].name);
		free(c->web.users[i].password_hash);
	}
	free(c->web.users);
	free(c);
}

static void
root_needed(const struct config *c, const char *section, const char *name,
	    const struct run_as *as, uid_t euid, struct config_errors *errs)
{
	errs->msg = xrealloc(errs->msg, (errs->n + 1) * sizeof(*errs->msg));
	errs->msg[errs->n++] = xasprintf(
		"%s:%d:%d: %s.%s.%s: pgjobd runs as uid %u, not root: it "
		"cannot run commands as another user or group",
		c->path, as->line, as->column, section, name,
		as->user ? "user" : "group", (unsigned)euid);
}

size_t
config_check_run_as(const struct config *c, uid_t euid,
		    struct config_errors *errs)
{
	size_t before = errs->n;

	if (euid == 0)
		return 0;
	for (size_t i = 0; i < c->nhandlers; i++)
		if (c->handlers[i].run_as.set)
			root_needed(c, "handlers", c->handlers[i].kind,
				    &c->handlers[i].run_as, euid, errs);
	for (size_t i = 0; i < c->ntasks; i++)
		if (c->tasks[i].run_as.set)
			root_needed(c, "tasks", c->tasks[i].name,
				    &c->tasks[i].run_as, euid, errs);
	return errs->n - before;
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
	return (unsigned)t <= HANDLER_PROCESS ? handler_types[t] : "unknown";
}

const char *
config_queue_mode_name(enum queue_mode m)
{
	return (unsigned)m <= QUEUE_PER_KEY ? queue_modes[m] : "unknown";
}
