/*
 * conninfo: scrubbing secrets from a connection string in place.  The
 * parsing follows libpq's conninfo_parse() and conninfo_uri_parse_options()
 * (fe-connect.c) closely enough to find the same value spans; a string
 * libpq would refuse is scrubbed as far as it reads.
 */
#include "common/conninfo.h"

#include <string.h>

/*
 * The options libpq marks secret (dispchar "*").  test_db.c checks this
 * list against the libpq it links, so a libpq that adds one fails a test
 * rather than leaks it.
 */
static const char *const secrets[] = {"password", "sslpassword",
				      "oauth_client_secret", NULL};

int
conninfo_secret(const char *keyword)
{
	for (int i = 0; secrets[i]; i++)
		if (strcmp(keyword, secrets[i]) == 0)
			return 1;
	return 0;
}

/* libpq's isspace() in the C locale. */
static int
blank(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' ||
	       c == '\r';
}

static void
stars(char *from, const char *to)
{
	while (from < to)
		*from++ = '*';
}

/* keyword=value pairs. */
static int
scrub_pairs(char *s)
{
	int n = 0;

	for (char *p = s; *p;) {
		if (blank(*p)) {
			p++;
			continue;
		}
		const char *key = p;
		while (*p && *p != '=' && !blank(*p))
			p++;
		size_t keylen = (size_t)(p - key);
		while (blank(*p))
			p++;
		if (*p != '=')
			return n; /* libpq refuses the rest */
		p++;
		while (blank(*p))
			p++;
		char *val = p;
		if (*p == '\'') {
			for (p++; *p && *p != '\''; p++)
				if (*p == '\\' && p[1])
					p++;
			if (*p)
				p++; /* the closing quote */
		} else {
			for (; *p && !blank(*p); p++)
				if (*p == '\\' && p[1])
					p++;
		}
		char name[32];
		if (keylen < sizeof(name)) {
			memcpy(name, key, keylen);
			name[keylen] = '\0';
			if (conninfo_secret(name)) {
				stars(val, p);
				n++;
			}
		}
	}
	return n;
}

static int
hex(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * A URI parameter's name, percent-decoded as libpq decodes it, into name;
 * 0, or -1 when it is too long to be a secret's or badly encoded.
 */
static int
decode(const char *from, const char *to, char *name, size_t size)
{
	size_t n = 0;

	while (from < to) {
		char c = *from++;
		if (c == '%') {
			if (to - from < 2 || hex(from[0]) < 0 ||
			    hex(from[1]) < 0)
				return -1;
			c = (char)(hex(from[0]) * 16 + hex(from[1]));
			from += 2;
		}
		if (n + 1 >= size)
			return -1;
		name[n++] = c;
	}
	name[n] = '\0';
	return 0;
}

/* A URI after its scheme://. */
static int
scrub_uri(char *s)
{
	int n = 0;
	char *p = s;

	/*
	 * libpq takes userinfo up to the first '@' before any '/'; a password
	 * with a raw '@' in it (which libpq misreads) is hidden whole: up to
	 * the last '@'.
	 */
	char *at = NULL;
	for (; *p && *p != '/'; p++)
		if (*p == '@')
			at = p;
	char *colon = at ? memchr(s, ':', (size_t)(at - s)) : NULL;
	if (colon) {
		stars(colon + 1, at);
		n++;
	}
	/*
	 * Parameters: libpq's query starts at a '?' past the userinfo and
	 * splits at '&'.  Here a name may start after any '?' or '&' outside
	 * the password just hidden, which finds libpq's names and perhaps
	 * more; a secret's value runs to the next '&', as libpq's does.  The
	 * value of any other name is searched for a '?' or '&' too: what
	 * looks like one may be in libpq's user name ("u?x=@db?password=s"),
	 * with libpq's query after it.
	 */
	p = strchr(s, '?');
	while (p && *p) {
		char *key = ++p, name[32];
		while (*p && *p != '=' && *p != '&' && *p != '?')
			p++;
		if (*p != '=')
			continue;
		char *eq = p;
		if (decode(key, eq, name, sizeof(name)) == 0 &&
		    conninfo_secret(name)) {
			p += strcspn(p, "&");
			stars(eq + 1, p);
			n++;
		} else {
			p += strcspn(p, "&?");
		}
	}
	return n;
}

int
conninfo_scrub(char *s)
{
	static const char *const schemes[] = {"postgresql://", "postgres://"};

	if (!s)
		return 0;
	for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++)
		if (strncmp(s, schemes[i], strlen(schemes[i])) == 0)
			return scrub_uri(s + strlen(schemes[i]));
	if (!strchr(s, '='))
		return 0; /* a database name */
	return scrub_pairs(s);
}
