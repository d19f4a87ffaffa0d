/*
 * config_load: reading a configuration file into a struct config, the entry
 * points of config.h (config_load(), config_load_settings(),
 * config_load_string()).
 *
 * yaml.c parses the file and reads typed values; config_keys.c says which
 * keys exist, config_sections.c reads the named sections.  Nothing stops at
 * the first mistake: every error is recorded with its position
 * (file:line:column), the names that one section uses from another (a
 * handler's queue, a schedule's kind) are checked once that section is read,
 * and the errors come back in document order.
 */
#include "common/config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/config_internal.h"
#include "common/log.h"
#include "common/util.h"
#include "common/yaml.h"

/*
 * Reads the document into c: the top-level keys, then the sections
 * (config_load_sections()), then what holds across them.
 */
static void
load_document(struct yaml_doc *d, struct config *c, bool cli)
{
	struct yaml_walk top = {.t = config_top_fields, .obj = c};
	const struct ynode *workers;

	if (d->root && d->root->type != YNODE_MAP && !yaml_is_null(d->root)) {
		yaml_doc_error(d, d->root, "", "expected a map of settings");
		return;
	}
	yaml_walk_map(d, NULL, d->root, "", &top);
	config_load_sections(d, c, &top, cli);
	config_check_web(d, c, &top);
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
	c->tracing_service = xstrdup("pgjobd");
	c->tracing_buffer = 2048;
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
