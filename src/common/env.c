/*
 * env: ${NAME} references expanded from the environment, and the private
 * copy of it that a daemon reads them from.  See env.h.
 */
#include "common/env.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"

extern char **environ;

static bool
env_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* A shell-style variable name: [A-Za-z_][A-Za-z0-9_]*. */
bool
env_is_name(const char *s, size_t n)
{
	if (n == 0 || env_digit(s[0]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(env_digit(s[i]) || s[i] == '_' ||
		      (s[i] >= 'a' && s[i] <= 'z') ||
		      (s[i] >= 'A' && s[i] <= 'Z')))
			return false;
	return true;
}

/*
 * The environment that ${NAME} reads once env_private() has run: a
 * copy of the environment as it was then (owned here for the life of the
 * process; reloads read it), and the strings environ held then, so that
 * only those are cleared in place (a string setenv() made later belongs to
 * the C library).
 */
static char **env_copy;
static char **env_orig;
static size_t env_n;

void
env_private(void)
{
	if (env_copy)
		return;
	while (environ[env_n])
		env_n++;
	env_copy = xcalloc(env_n + 1, sizeof(*env_copy));
	env_orig = xcalloc(env_n + 1, sizeof(*env_orig));
	for (size_t i = 0; i < env_n; i++) {
		env_copy[i] = xstrdup(environ[i]);
		env_orig[i] = environ[i];
	}
}

static bool
env_is(const char *entry, const char *name, size_t len)
{
	return strncmp(entry, name, len) == 0 && entry[len] == '=';
}

/*
 * Removes name from the process's environment.  unsetenv() only takes it
 * out of environ; the kernel shows /proc/PID/environ from the block the
 * process started with, which children inherit too, so the value's bytes
 * are cleared there as well (its name stays, harmless).
 */
static void
env_forget(const char *name)
{
	size_t len = strlen(name);

	for (char **e = environ; *e; e++) {
		if (!env_is(*e, name, len))
			continue;
		for (size_t i = 0; i < env_n; i++)
			if (env_orig[i] == *e)
				memset(*e + len + 1, 0, strlen(*e + len + 1));
	}
	unsetenv(name);
}

static const char *
env_get(const char *name)
{
	size_t len = strlen(name);

	if (!env_copy)
		return getenv(name);
	for (size_t i = 0; i < env_n; i++)
		if (env_is(env_copy[i], name, len))
			return env_copy[i] + len + 1;
	return NULL;
}

char *
env_expand(const char *s, char **missing)
{
	struct buf b = {0};

	*missing = NULL;
	buf_append(&b, "", 0);
	while (*s) {
		const char *end, *v;
		char *name;

		if (s[0] != '$' || (s[1] != '$' && s[1] != '{')) {
			buf_append(&b, s++, 1);
			continue;
		}
		if (s[1] == '$') {
			buf_append(&b, "$", 1);
			s += 2;
			continue;
		}
		end = strchr(s + 2, '}');
		if (!end || !env_is_name(s + 2, (size_t)(end - s - 2))) {
			/* Not a reference: hand back its text, "${..." */
			*missing = end ? xstrndup(s, (size_t)(end - s + 1))
				       : xstrdup(s);
			goto fail;
		}
		name = xstrndup(s + 2, (size_t)(end - s - 2));
		if (!(v = env_get(name))) {
			*missing = name;
			goto fail;
		}
		if (env_copy)
			env_forget(name);
		free(name);
		buf_append(&b, v, strlen(v));
		s = end + 1;
	}
	return b.data;
fail:
	buf_free(&b);
	return NULL;
}
