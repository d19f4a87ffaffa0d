/*
 * config_host: what the configuration is checked against on this host: the
 * users and groups that commands run as (looked up as the file is read),
 * whether pgjobd may switch to them (config_check_run_as()), listen
 * addresses as the metrics server will bind them, and connection strings
 * as libpq will read them (through config_set_conninfo_check(), since
 * common does not link libpq).
 */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/config.h"
#include "common/config_internal.h"
#include "common/metrics.h"
#include "common/util.h"
#include "common/yaml.h"

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
void
config_resolve_run_as(struct yaml_doc *d, const struct yaml_walk *w,
		      const char *path, struct run_as *as)
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
		kpath = config_join(path, "group");
		yaml_doc_error(d, gn, kpath, "unknown group \"%s\"", as->group);
		free(kpath);
		return;
	}
	if (as->user && find_user(as->user, &as->uid, &user_gid, &name) < 0) {
		kpath = config_join(path, "user");
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

const char *
config_check_listen(const char *s)
{
	const char *colon = strrchr(s, ':');
	char *host, *port;

	if (!colon || !colon[1] ||
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
const char *
config_check_conninfo(const char *s)
{
	int valid = conninfo_check ? conninfo_check(s) : 1;
	if (valid > 0)
		return NULL;
	if (valid == 0)
		return "not a valid libpq connection string (keyword=value "
		       "pairs or a postgresql:// URI)";
	return "could not be checked (the log says why)";
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
