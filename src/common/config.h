/*
 * config: the YAML configuration of pgjobd, loaded into one immutable
 * struct config that the rest of the program borrows.
 *
 * config_load() reads the whole file and reports every error it finds, each
 * as "file:line:column: key.path: message", rather than stopping at the
 * first.  Values inherit defaults -> queue -> handler at load time, so the
 * code that runs a job reads one resolved struct handler_conf.
 */
#ifndef PGJOBD_CONFIG_H
#define PGJOBD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/rate.h"
#include "common/util.h"

/* Fixed default for the first key of pg_try_advisory_lock(lock_class, n). */
#define CONFIG_DEFAULT_LOCK_CLASS 0x70676a62 /* "pgjb" */

enum log_format { LOG_FORMAT_TEXT, LOG_FORMAT_JSON };
enum queue_mode { QUEUE_PARALLEL, QUEUE_SERIAL, QUEUE_PER_KEY };
enum handler_type {
	HANDLER_EXEC,
	HANDLER_SQL,
	HANDLER_HTTP,
	HANDLER_PLUGIN,
	HANDLER_PROCESS,
};

struct backoff {
	int64_t base_ms;
	int64_t max_ms;
};

struct queue_conf {
	char *name;
	int concurrency; /* per worker; default 8 */
	enum queue_mode mode;
	/* Unset (-1 / 0) means "inherit from defaults". */
	int64_t timeout_ms;
	int max_attempts;
	struct backoff backoff;
	/*
	 * Flow control across the cluster (docs/queues.md), published to
	 * pgjob.limits when a worker connects; 0 / false: not set.
	 */
	int global_concurrency;	 /* jobs running at once, every instance */
	int per_key_concurrency; /* the same per limit_key / ordering_key */
	struct rate rate;	 /* starts per period (token bucket) */
	int burst;		 /* the bucket's size; 0: rate.n */
	struct rate rate_per_key;
	int burst_per_key;
	bool fair;	  /* keys take turns */
	bool adaptive;	  /* an http 429/503 with Retry-After throttles it */
	bool defined;	  /* written in the file (not the implicit default) */
	int line, column; /* where it was defined, for messages */
};

/*
 * Whom a command runs as: an exec handler's or a task's `user:` and
 * `group:`, resolved when the config is loaded (docs/configuration.md).
 * Without either, the command runs as pgjobd's own user.
 */
struct run_as {
	char *user;  /* as written, or NULL */
	char *group; /* as written, or NULL */
	bool set;    /* user or group given: switch before exec */
	uid_t uid;   /* (uid_t)-1: keep pgjobd's (group: alone) */
	gid_t gid;
	gid_t *groups; /* supplementary groups, gid among them */
	int ngroups;
	int line, column; /* of the user: (else group:) value */
};

/*
 * Where a value was written, for the checks made after the load against
 * the host (src/handlers/handler_check.c); 0: not written.
 */
struct config_at {
	int line, column;
};

/*
 * An exec handler's `limits:` (docs/handlers.md, "Limits"): setrlimit() in
 * the child between fork and exec.  0: not set (the worker's own limit).
 */
struct exec_limits {
	int64_t cpu_ms;	    /* RLIMIT_CPU; whole seconds */
	int64_t memory;	    /* RLIMIT_AS, bytes of address space */
	int64_t open_files; /* RLIMIT_NOFILE */
	int64_t processes;  /* RLIMIT_NPROC: of the command's real uid */
	int64_t file_size;  /* RLIMIT_FSIZE, bytes */
};

struct handler_conf {
	char *kind; /* the map key under handlers: */
	enum handler_type type;
	char *queue;	    /* resolved: "default" when not given */
	size_t queue_index; /* resolved: its place in config.queues */
	/* Resolved: handler, else queue, else defaults. */
	int64_t timeout_ms;
	int max_attempts;
	struct backoff backoff;
	/* exec */
	struct strlist command; /* argv; command.v[0] is the program */
	struct strlist env;	/* "NAME=value" added to the clean env */
	struct run_as run_as;
	struct exec_limits limits;
	/* sql */
	char *statement;
	/* http */
	char *url;
	struct strlist headers; /* "Name: value" */
	bool tls_verify;	/* default true */
	/* plugin */
	char *library;
	char *symbol;
	char *plugin_config; /* JSON text of the handler's `config:` map, or
				"{}" */
	/* process (docs/handlers.md, "process"); command, env, user, group
	 * and limits as exec's. */
	int copies;		    /* per worker; resolved, at least 1 */
	int concurrency;	    /* jobs a copy holds at once; default 1 */
	int64_t max_jobs;	    /* recycled after that many; 0: never */
	int64_t max_memory;	    /* recycled past this RSS; 0: never */
	int64_t startup_timeout_ms; /* to say hello; default 30s */
	int64_t max_line_bytes;	    /* resolved: max_payload_bytes + 1 MiB */
	int line, column;
	/* The values that handler_check_config() checks: command[0], url,
	 * library and symbol. */
	struct config_at at_program, at_url, at_library, at_symbol;
};

struct schedule_conf {
	char *name;
	char *cron;
	char *kind;
	char *payload;	   /* JSON text; "{}" when not given */
	char *queue;	   /* NULL: the handler's queue */
	char *timezone;	   /* NULL: UTC */
	bool catch_up_all; /* catch_up: all; default latest (false) */
	int line, column;
};

struct task_conf {
	char *name;
	struct strlist command;
	struct run_as run_as; /* as for an exec handler */
	int partitions;	      /* default 1 */
	int line, column;
	struct config_at at_program; /* command[0] */
};

/*
 * One database of a config with databases: (docs/configuration.md,
 * "Several databases"): its own schema pgjob, slots and leases, and its own
 * workers, which run every queue, handler, schedule and task of the file.
 */
struct database_conf {
	char *name;	  /* the map key: letters, digits, _ and - */
	char *conninfo;	  /* required */
	int workers;	  /* default: the top-level workers: */
	int line, column; /* of the name, for messages */
};

/*
 * The web console (web:, `pgjob web`, docs/console.md): where it listens,
 * how long a session lasts, and its users.  No users: an open console,
 * which `pgjob web` allows only on a loopback address.
 */
struct web_user_conf {
	char *name;
	char *password_hash; /* crypt(3) form: "$y$..." (yescrypt) */
	bool operator;	     /* role: operator; false: read-only */
	int line, column;    /* of the entry, for messages */
};

struct web_conf {
	char *listen;		/* "host:port"; NULL: 127.0.0.1:8080 */
	int64_t session_ttl_ms; /* default 12h, sliding */
	bool cookie_secure;	/* Secure on the session cookie (TLS proxy) */
	/* "https://jobs.example.com[:port]": the address a reverse proxy
	 * serves it at; its Host and Origin are then accepted too.  NULL:
	 * none. */
	char *public_url;
	struct web_user_conf *users;
	size_t nusers;
};

struct config {
	char *path;	/* the file it was loaded from */
	char *conninfo; /* database.conninfo; NULL: libpq's PG* defaults */
	int workers;	/* default 2 */
	int max_slots;	/* default 64 */
	int64_t lock_class;
	int64_t lease_ms;	     /* default 30s */
	int64_t shutdown_timeout_ms; /* default 60s */
	int64_t retention_ms;	     /* default 7d */
	int64_t poll_interval_ms;    /* default 1s */
	int64_t max_payload_bytes;   /* default 1 MiB */
	int log_level;		     /* LOG_DEBUG.. from log.h; default info */
	enum log_format log_format;
	char *metrics_listen;		/* "host:port" or NULL */
	int64_t default_timeout_ms;	/* default 5m */
	int default_max_attempts;	/* default 20 */
	struct backoff default_backoff; /* default 30s / 30m */
	struct queue_conf *queues;	/* always has "default" */
	size_t nqueues;
	struct handler_conf *handlers;
	size_t nhandlers;
	struct schedule_conf *schedules;
	size_t nschedules;
	struct task_conf *tasks;
	size_t ntasks;
	/*
	 * The database health guard (health:, docs/operations.md "Database
	 * health"): how often the worker holding the pgjob:health lease reads
	 * it, and the age of the xmin horizon past which it warns.
	 */
	int64_t health_interval_ms;  /* default 10s */
	int64_t health_xmin_warn_ms; /* default 5m */
	/*
	 * databases: (several databases, one pgjobd); ndatabases 0: the
	 * single-database form, conninfo and workers above.  With databases:
	 * conninfo is NULL until a worker's supervisor sets its database's
	 * in the worker's own copy (daemon/supervisor.c).
	 */
	struct database_conf *databases;
	size_t ndatabases;
	struct web_conf web; /* web: */
	/*
	 * tracing: (docs/tracing.md): the OTLP/HTTP endpoint the workers send
	 * the attempts' spans to (NULL: none, the default), the service name
	 * they carry, and how many spans a worker keeps waiting to be sent.
	 */
	char *tracing_endpoint;
	char *tracing_service; /* default "pgjobd" */
	int tracing_buffer;    /* default 2048 */
};

/* One error; message is "file:line:column: key.path: what is wrong". */
struct config_errors {
	char **msg;
	size_t n;
};

/*
 * Loads and validates path.  Returns a new config (caller frees with
 * config_free()) or NULL, in which case errs holds at least one message
 * (caller frees with config_errors_free()).  Never prints.
 */
struct config *config_load(const char *path, struct config_errors *errs);
/* The same for YAML text held in memory; name is used in messages. */
struct config *config_load_string(const char *name, const char *text,
				  size_t len, struct config_errors *errs);
/*
 * As config_load(), for pgjob: the top-level settings and the queues are
 * read and checked, and of each handler only its name, type, queue and
 * timeout (what `pgjob doctor` needs); its other keys, the schedules and
 * the tasks are skipped unread, so that no ${...} reference of theirs is
 * expanded: an operator who can read the file but not every handler's
 * secret can still run pgjob -c FILE.
 */
struct config *config_load_settings(const char *path,
				    struct config_errors *errs);
void config_free(struct config *c);
void config_errors_free(struct config_errors *errs);
/* Appends a message (printf format) to errs. */
void config_errors_add(struct config_errors *errs, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * The check of database.conninfo: whether libpq can parse it (NULL and ""
 * included), 1 yes, 0 no, -1 when it could not be checked (logged).  Only
 * libpq knows its keywords, and config sits below the database layer, so
 * the program sets the check (db_conninfo_valid) before it loads a config;
 * without one, any string is taken.
 */
typedef int config_conninfo_check_fn(const char *conninfo);
void config_set_conninfo_check(config_conninfo_check_fn *check);

/* Lookups; NULL when absent.  The pointers are borrowed from c. */
const struct handler_conf *config_handler(const struct config *c,
					  const char *kind);
const struct queue_conf *config_queue(const struct config *c, const char *name);
const struct database_conf *config_database(const struct config *c,
					    const char *name);

/*
 * Adds to errs, for every exec handler and task with user: or group:, an
 * error "file:line:col: handlers.x.user: ..." when euid is not root (the
 * daemon could not switch to them).  Returns the number added.
 */
size_t config_check_run_as(const struct config *c, uid_t euid,
			   struct config_errors *errs);

const char *config_handler_type_name(enum handler_type t);
const char *config_queue_mode_name(enum queue_mode m);

/* Whether q has a flow-control limit (not a pause: those live only in the
 * database). */
bool config_queue_limited(const struct queue_conf *q);

/*
 * The limits of every queue the file defines, as pgjob.publish_limits()
 * takes them: {"exports": {"global_concurrency": 5, "rate": "10/s"}, ...};
 * a queue without limits maps to {}.  Caller frees.
 */
char *config_limits_json(const struct config *c);

#endif
