/*
 * config_web: the web: section, pgjob web's (docs/console.md): its keys,
 * its users (name, password hash, role) and the rule that a console behind
 * a public URL has users.
 */
#include <crypt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/config_internal.h"
#include "common/util.h"
#include "common/yaml.h"

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
			char *npath = config_join(ipath, "name");
			yaml_doc_error(d, yaml_walked(&w, "name"), npath,
				       "user \"%s\" is already defined at "
				       "line %d",
				       u->name, web->users[j].line);
			free(npath);
		}
		free(ipath);
	}
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

const struct yaml_field config_web_fields[] = {
	F("listen", YF_STRING, config, web.listen,
	  .check = config_check_listen),
	F("session_ttl", YF_DURATION, config, web.session_ttl_ms,
	  .min = 60 * 1000, .max = 366 * 86400 * 1000LL),
	F("cookie_secure", YF_BOOL, config, web.cookie_secure),
	F("public_url", YF_STRING, config, web.public_url,
	  .check = check_public_url),
	F("users", YF_READ, config, web, .read = read_web_users),
	{0},
};

/*
 * web.public_url without web.users would serve an open console to whoever
 * reaches the reverse proxy: refused, as pgjob web refuses an open console
 * off loopback.
 */
void
config_check_web(struct yaml_doc *d, const struct config *c,
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
