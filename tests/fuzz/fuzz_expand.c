/*
 * fuzz_expand: the references of a config value, env_expand()
 * (src/common/env.c: ${NAME}, ${file:PATH}, ${credential:NAME}, $$), then
 * what the daemon does with a database.conninfo so expanded: scrubs its
 * secrets in place (conninfo_scrub(), src/common/conninfo.c) and writes it
 * to logs redacted (db_conninfo_redacted()).
 *
 * The input is the value, up to a NUL.  The files are those of a folder
 * this program makes under $TMPDIR at its start (and removes at exit):
 * "${file:/D/NAME}" in the input stands for that folder's NAME, and it is
 * CREDENTIALS_DIRECTORY too.  An input naming any other file, or ".." in a
 * file's path, is skipped: nothing outside the folder is read.  Its files
 * are secrets that are well formed, with a CRLF, holding a NUL, empty,
 * over ENV_SECRET_MAX, writable by the group; a folder, a FIFO and a link.
 *
 * Checked: a value or a message, never both; a message never quotes a
 * secret (every secret here holds "S3CRET"); a scrubbed conninfo keeps its
 * length, changes bytes only to '*', and reads, to libpq, as the same
 * options with no secret one read back (a URI's other options may
 * lose bytes to the stars: conninfo.c hides more than the password when
 * it cannot tell where that ends); a redacted one holds no secret's
 * value.
 */
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "common/conninfo.h"
#include "common/env.h"
#include "db/db.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[256];

static void
put(const char *name, const char *text, size_t len, mode_t mode)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || write(fd, text, len) != (ssize_t)len || close(fd) < 0 ||
	    chmod(path, mode) < 0) {
		perror(path);
		abort();
	}
}

static void
cleanup(void)
{
	static const char *const names[] = {"pw",   "crlf",  "conn", "empty",
					    "nul",  "big",   "gw",   "fifo",
					    "link", "sub/x", "sub",  NULL};
	char path[512];
	for (size_t i = 0; names[i]; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		if (unlink(path) < 0)
			rmdir(path);
	}
	rmdir(dir);
}

static void
setup(void)
{
	const char *tmp = getenv("TMPDIR");
	static char big[ENV_SECRET_MAX + 100];
	char path[512];

	snprintf(dir, sizeof(dir), "%s/pgjobd-fuzz-expand.XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir)) {
		perror(dir);
		abort();
	}
	atexit(cleanup);
	put("pw", "S3CRET-file\n", 12, 0600);
	put("crlf", "S3CRET-crlf\r\n", 13, 0400);
	put("conn", "host=db password='S3CRET conn'", 30, 0600);
	put("empty", "", 0, 0600);
	put("nul", "S3CRET\0nul", 10, 0600);
	memset(big, 'S', sizeof(big));
	put("big", big, sizeof(big), 0600);
	put("gw", "S3CRET-gw", 9, 0620);
	snprintf(path, sizeof(path), "%s/fifo", dir);
	if (mkfifo(path, 0600) < 0)
		abort();
	snprintf(path, sizeof(path), "%s/link", dir);
	if (symlink("pw", path) < 0)
		abort();
	snprintf(path, sizeof(path), "%s/sub", dir);
	if (mkdir(path, 0700) < 0)
		abort();
	put("sub/x", "S3CRET-sub", 10, 0600);
	setenv("CREDENTIALS_DIRECTORY", dir, 1);
	setenv("PGJOBD_FUZZ_PW", "S3CRET-env", 1);
	setenv("PGJOBD_FUZZ_HOST", "db.example.com", 1);
	setenv("PGJOBD_FUZZ_CONN", "postgresql://u:S3CRET-uri@h/db", 1);
	setenv("PGJOBD_FUZZ_EMPTY", "", 1);
	/* As the daemon expands: from a private copy, forgetting. */
	env_private();
}

/* The input with "${file:/D/" made the folder's; NULL when it names a
 * file elsewhere. */
static char *
rewrite(const char *in)
{
	static const char mark[] = "${file:/D/";
	size_t n = strlen(in), dl = strlen(dir), count = 0;
	for (const char *p = in; (p = strstr(p, mark)); p++)
		count++;
	char *out = malloc(n + count * dl + 1), *o = out;
	if (!out)
		abort();
	for (const char *p = in; *p;) {
		if (strncmp(p, mark, sizeof(mark) - 1) == 0) {
			o += sprintf(o, "${file:%s/", dir);
			p += sizeof(mark) - 1;
		} else {
			*o++ = *p++;
		}
	}
	*o = '\0';
	/* Every ${file: now names the folder, without "..". */
	for (const char *p = out; (p = strstr(p, "${file:")); p++) {
		const char *path = p + 7, *end = strchr(path, '}');
		size_t plen = end ? (size_t)(end - path) : strlen(path);
		if (strncmp(path, dir, dl) != 0 || path[dl] != '/' ||
		    memmem(path, plen, "..", 2)) {
			free(out);
			return NULL;
		}
	}
	return out;
}

static int
secret(const char *keyword)
{
	return conninfo_secret(keyword);
}

static size_t
count(const char *text, const char *v)
{
	size_t n = 0;
	for (const char *p = text; (p = strstr(p, v)); p++)
		n++;
	return n;
}

/* Whether the redacted red ("keyword=value ..." of the options that are
 * not secret) shows the secret value v of options a: v, unless too short
 * to tell, or within what an option that is not secret writes there, or
 * able to span two of them (a blank in it). */
static int
shows(const char *red, const char *v, const PQconninfoOption *a)
{
	if (strlen(v) < 6 || strchr(v, ' ') || !strstr(red, v))
		return 0;
	for (size_t j = 0; a[j].keyword; j++) {
		if (secret(a[j].keyword) || !a[j].val)
			continue;
		size_t n = strlen(a[j].keyword) + strlen(a[j].val) + 2;
		char *kv = malloc(n);
		if (!kv)
			abort();
		snprintf(kv, n, "%s=%s", a[j].keyword, a[j].val);
		int in = strstr(kv, v) != NULL;
		free(kv);
		if (in)
			return 0;
	}
	return 1;
}

static void
check_conninfo(const char *ci)
{
	char *s = strdup(ci), *err = NULL;
	if (!s)
		abort();
	conninfo_scrub(s);
	/* Stars over a quote: libpq may read the tokens after it
	 * otherwise ("password='x'user=u" becomes one value). */
	int requoted = 0;
	for (size_t i = 0; ci[i] || s[i]; i++) {
		if (!ci[i] || !s[i] || (s[i] != ci[i] && s[i] != '*'))
			abort();
		requoted |= ci[i] == '\'' && s[i] == '*';
	}
	PQconninfoOption *a = PQconninfoParse(ci, &err), *b = NULL;
	PQfreemem(err);
	err = NULL;
	char *red = db_conninfo_redacted(ci);
	int uri = strncmp(ci, "postgresql://", 13) == 0 ||
		  strncmp(ci, "postgres://", 11) == 0;
	/* The scrubbed text may not parse: a URI's when the stars of a
	 * parameter covered the '@' that ended its user name (libpq takes
	 * the user's part to the first '@' even past a '?'), pairs' when
	 * the stars took a quoted value's quotes and the next keyword
	 * followed them without a blank.  Then no secret of it may be in
	 * the scrubbed text. */
	if (a)
		b = PQconninfoParse(s, &err);
	for (size_t i = 0; a && a[i].keyword; i++) {
		const char *va = a[i].val, *vb = b ? b[i].val : NULL;
		if (b && strcmp(a[i].keyword, b[i].keyword) != 0)
			abort();
		if (!secret(a[i].keyword)) {
			/* A URI's may change, or go: a raw '@' in its
			 * password hides all up to the last '@'
			 * (conninfo.c). */
			if (!uri && b && !requoted &&
			    (!va != !vb || (va && strcmp(va, vb) != 0)))
				abort();
			continue;
		}
		if (!va || strspn(va, "*") == strlen(va))
			continue; /* nothing to hide */
		/* Starred, or, where the stars took a value's quotes too
		 * and libpq reads the scrubbed text's tokens otherwise
		 * ("password='x'password=y"), not read back whole (a short
		 * value: not read back as it was). */
		if (b && vb && strspn(vb, "*") != strlen(vb) &&
		    (strcmp(vb, va) == 0 ||
		     (strlen(va) >= 6 && strstr(vb, va))))
			abort();
		/* A scrubbed text libpq cannot read: where the
		 * value is written as libpq reads it (no escapes in it),
		 * one of its places at least is starred; values too short
		 * to tell from the other words are not looked for. */
		size_t n = b || strlen(va) < 6 ? 0 : count(ci, va);
		if ((n && count(s, va) == n) || shows(red, va, a))
			abort();
	}
	PQconninfoFree(a);
	PQconninfoFree(b);
	PQfreemem(err);
	free(red);
	free(s);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!*dir)
		setup();
	char *in = malloc(size + 1);
	if (!in)
		abort();
	memcpy(in, data, size);
	in[size] = '\0';
	char *text = rewrite(in);
	free(in);
	if (!text)
		return 0;
	char *why = (char *)1;
	char *v = env_expand(text, &why);
	if (!v == !why)
		abort(); /* exactly one of them */
	if (why) {
		if (strstr(why, "S3CRET") && !strstr(text, "S3CRET"))
			abort(); /* a message quoted a secret */
		free(why);
	} else {
		check_conninfo(v);
		free(v);
	}
	free(text);
	return 0;
}
