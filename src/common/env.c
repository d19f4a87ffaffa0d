/*
 * env: ${NAME} references expanded from the environment, and the private
 * copy of it that a daemon reads them from; ${file:PATH} and
 * ${credential:NAME} read from files, at every load.  See env.h.
 */
#include "common/env.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/*
 * A secret read from a file: the whole content, one trailing newline
 * ("\n" or "\r\n") taken off.  Refused when the file is not a regular file,
 * is owned by another user than root or pgjobd's own, or is writable by its
 * group or by others (whoever can write it can choose the secret, or a
 * password that leaks to them), is over ENV_SECRET_MAX
 * bytes or holds a NUL.  ref is the reference as written, for messages;
 * they never quote the content.  Returns the value (caller frees) or NULL
 * with *why set (caller frees).
 */
static char *
read_secret(const char *path, const char *ref, char **why)
{
	char buf[ENV_SECRET_MAX + 1];
	size_t len = 0;
	ssize_t n = 1;
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);

	*why = NULL;
	if (fd < 0 || fstat(fd, &st) < 0) {
		*why = xasprintf("%s: cannot read: %s", ref, strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		*why = xasprintf("%s: not a regular file", ref);
		goto out;
	}
	if (st.st_uid != 0 && st.st_uid != geteuid()) {
		*why = xasprintf(
			"%s: owned by uid %u, neither root nor pgjobd's "
			"user: chown the file",
			ref, (unsigned)st.st_uid);
		goto out;
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		*why = xasprintf("%s: writable by group or others: chmod go-w "
				 "the file",
				 ref);
		goto out;
	}
	while (len < sizeof(buf) && n != 0) {
		n = read(fd, buf + len, sizeof(buf) - len);
		if (n < 0 && errno != EINTR) {
			*why = xasprintf("%s: cannot read: %s", ref,
					 strerror(errno));
			goto out;
		}
		if (n > 0)
			len += (size_t)n;
	}
	if (len > ENV_SECRET_MAX)
		*why = xasprintf("%s: larger than %d bytes", ref,
				 ENV_SECRET_MAX);
	else if (memchr(buf, '\0', len))
		*why = xasprintf("%s: contains a NUL character", ref);
out:
	if (fd >= 0)
		close(fd);
	if (*why) {
		explicit_bzero(buf, sizeof(buf));
		return NULL;
	}
	if (len && buf[len - 1] == '\n')
		len--;
	if (len && buf[len - 1] == '\r')
		len--;
	char *v = xstrndup(buf, len);
	explicit_bzero(buf, sizeof(buf));
	return v;
}

/* A systemd credential's name: a file name inside the directory. */
static bool
is_credential(const char *s)
{
	if (!*s || !strcmp(s, ".") || !strcmp(s, ".."))
		return false;
	for (; *s; s++)
		if (!(env_digit(*s) || strchr("_-.@", *s) ||
		      (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z')))
			return false;
	return true;
}

/*
 * The value of one reference, inner = what is between "${" and "}"; ref is
 * the whole reference.  Returns it (caller frees) or NULL with *why set.
 */
static char *
lookup(const char *inner, const char *ref, char **why)
{
	const char *v, *dir;

	if (!strncmp(inner, "file:", 5)) {
		if (inner[5] != '/') {
			*why = xasprintf("%s: the path must be absolute", ref);
			return NULL;
		}
		return read_secret(inner + 5, ref, why);
	}
	if (!strncmp(inner, "credential:", 11)) {
		if (!is_credential(inner + 11)) {
			*why = xasprintf("%s: bad credential name (letters, "
					 "digits, \"_-.@\")",
					 ref);
			return NULL;
		}
		if (!(dir = env_get("CREDENTIALS_DIRECTORY")) || !*dir) {
			*why = xasprintf("%s: CREDENTIALS_DIRECTORY is not set "
					 "(LoadCredential= in the unit)",
					 ref);
			return NULL;
		}
		char *path = xasprintf("%s/%s", dir, inner + 11);
		char *s = read_secret(path, ref, why);
		free(path);
		return s;
	}
	if (!env_is_name(inner, strlen(inner))) {
		*why = xasprintf("bad variable reference \"%s\" (use ${NAME}, "
				 "${file:PATH}, ${credential:NAME}, or $$ for "
				 "a literal $)",
				 ref);
		return NULL;
	}
	if (!(v = env_get(inner))) {
		*why = xasprintf("environment variable \"%s\" is not set",
				 inner);
		return NULL;
	}
	if (env_copy)
		env_forget(inner);
	return xstrdup(v);
}

char *
env_expand(const char *s, char **why)
{
	struct buf b = {0};

	*why = NULL;
	buf_append(&b, "", 0);
	while (*s) {
		const char *end;
		char *inner, *ref, *v;

		if (s[0] != '$' || (s[1] != '$' && s[1] != '{')) {
			buf_append(&b, s++, 1);
			continue;
		}
		if (s[1] == '$') {
			buf_append(&b, "$", 1);
			s += 2;
			continue;
		}
		if (!(end = strchr(s + 2, '}'))) {
			*why = xasprintf("bad variable reference \"%s\" (use "
					 "${NAME}, ${file:PATH}, "
					 "${credential:NAME}, or $$ for a "
					 "literal $)",
					 s);
			goto fail;
		}
		inner = xstrndup(s + 2, (size_t)(end - s - 2));
		ref = xstrndup(s, (size_t)(end - s + 1));
		v = lookup(inner, ref, why);
		free(inner);
		free(ref);
		if (!v)
			goto fail;
		buf_append(&b, v, strlen(v));
		explicit_bzero(v, strlen(v));
		free(v);
		s = end + 1;
	}
	return b.data;
fail:
	buf_free(&b);
	return NULL;
}
