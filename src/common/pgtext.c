/*
 * pgtext: text as PostgreSQL will store it: a text column (valid UTF-8,
 * no NUL) and a jsonb value.  See pgtext.h.
 */
#include "common/pgtext.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "common/text.h"
#include "common/util.h"

/* Length of the valid UTF-8 sequence at p, or 0 (NUL counts as invalid). */
static size_t
utf8_len(const unsigned char *p, size_t left)
{
	uint32_t cp;
	return text_char_n((const char *)p, left, &cp);
}

void
pgtext_sanitize(char *s, size_t len)
{
	unsigned char *p = (unsigned char *)s;
	size_t i = 0;

	while (i < len) {
		size_t n = utf8_len(p + i, len - i);
		if (n == 0) {
			p[i] = '?';
			n = 1;
		}
		i += n;
	}
}

/*
 * JSON as PostgreSQL's jsonb input reads it (RFC 8259, and numeric's
 * limits), without recursion: a result is up to 1 MiB, so it may nest half
 * a million deep.  Each helper takes p at the start of its token and
 * returns the first byte after it, or NULL when the text is not JSON.
 *
 * Every rule below was checked against PostgreSQL 15 with
 * `select $1::jsonb` on a UTF8 database: raw U+0000-U+001F in a string
 * (tab, newline...) and \u0000 are refused, as are lone surrogate escapes
 * ("\ud800", "\udc00", "\ud800\u0041"); DEL and escaped control
 * characters ("\u0001") are accepted; whitespace is space, tab, LF and CR
 * only (not VT, FF, NBSP or a BOM); numbers follow the grammar strictly
 * (no "01", "1.", ".5", "+1", "1e") and must fit numeric: 1e999, -0 and
 * 0e1000000 are accepted, 1e131072, 1e-16384 and 1.5e-16383 are not.
 * What is not checked: nesting beyond PostgreSQL's max_stack_depth (some
 * ten thousand levels by default), which depends on the server.
 */
static const unsigned char *
json_ws(const unsigned char *p, const unsigned char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

/* The value of the four hex digits at p, or -1. */
static long
json_hex4(const unsigned char *p, const unsigned char *end)
{
	long v = 0;

	if (end - p < 4)
		return -1;
	for (int i = 0; i < 4; i++) {
		int c = p[i];
		int d = c >= '0' && c <= '9'   ? c - '0'
			: c >= 'a' && c <= 'f' ? c - 'a' + 10
			: c >= 'A' && c <= 'F' ? c - 'A' + 10
					       : -1;
		if (d < 0)
			return -1;
		v = v * 16 + d;
	}
	return v;
}

/* A string; p is at its opening quote. */
static const unsigned char *
json_string(const unsigned char *p, const unsigned char *end)
{
	if (p == end || *p++ != '"')
		return NULL;
	while (p < end) {
		unsigned char c = *p;
		long u;

		if (c == '"')
			return p + 1;
		if (c < 0x20)
			return NULL; /* raw control characters: escape them */
		if (c >= 0x80) {
			size_t n = utf8_len(p, (size_t)(end - p));
			if (n == 0)
				return NULL;
			p += n;
			continue;
		}
		if (c != '\\') {
			p++;
			continue;
		}
		if (++p == end)
			return NULL;
		if (*p && strchr("\"\\/bfnrt", *p)) {
			p++;
			continue;
		}
		if (*p != 'u' || (u = json_hex4(p + 1, end)) < 0)
			return NULL;
		p += 5;
		if (u == 0 || (u >= 0xdc00 && u <= 0xdfff))
			return NULL; /* jsonb: no \u0000, no lone low half */
		if (u >= 0xd800 && u <= 0xdbff) {
			/* A high half must be followed by a low one. */
			if (end - p < 6 || p[0] != '\\' || p[1] != 'u')
				return NULL;
			u = json_hex4(p + 2, end);
			if (u < 0xdc00 || u > 0xdfff)
				return NULL;
			p += 6;
		}
	}
	return NULL;
}

/* Digits at p: sets *n to how many (saturated), returns the end. */
static const unsigned char *
json_digits(const unsigned char *p, const unsigned char *end, int64_t *n)
{
	*n = 0;
	while (p < end && *p >= '0' && *p <= '9') {
		if (*n < INT64_MAX / 2)
			(*n)++;
		p++;
	}
	return p;
}

/*
 * A number, which jsonb stores as numeric: the exponent must be below
 * INT_MAX / 2 in size, the display scale (digits after the point, less
 * the exponent) at most 16383, and a value other than zero must have its
 * first significant digit at most at 10^131071.
 */
static const unsigned char *
json_number(const unsigned char *p, const unsigned char *end)
{
	int64_t int_digits = 1, frac_digits = 0, exp = 0, lead = 0;
	bool nonzero;

	if (p < end && *p == '-')
		p++;
	if (p == end || *p < '0' || *p > '9')
		return NULL;
	/* lead: the power of ten of the first significant digit. */
	nonzero = *p != '0';
	if (nonzero)
		p = json_digits(p, end, &int_digits);
	else
		p++; /* "0", never "01" */
	lead = int_digits - 1;
	if (p < end && *p == '.') {
		const unsigned char *frac = ++p;
		p = json_digits(p, end, &frac_digits);
		if (frac_digits == 0)
			return NULL;
		for (const unsigned char *q = frac; q < p && !nonzero; q++)
			if (*q != '0') {
				nonzero = true;
				lead = -(int64_t)(q - frac) - 1;
			}
	}
	if (p < end && (*p == 'e' || *p == 'E')) {
		bool neg = false;

		p++;
		if (p < end && (*p == '+' || *p == '-'))
			neg = *p++ == '-';
		if (p == end || *p < '0' || *p > '9')
			return NULL;
		for (; p < end && *p >= '0' && *p <= '9'; p++)
			if (exp < INT32_MAX) /* saturates: refused below */
				exp = exp * 10 + (*p - '0');
		if (neg)
			exp = -exp;
	}
	if (exp >= INT32_MAX / 2 || exp <= -(INT32_MAX / 2))
		return NULL;
	if (frac_digits - exp > 16383)
		return NULL;
	if (nonzero && lead + exp > 131071)
		return NULL;
	return p;
}

static const unsigned char *
json_literal(const unsigned char *p, const unsigned char *end)
{
	static const char *const words[] = {"true", "false", "null"};

	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
		size_t n = strlen(words[i]);
		if ((size_t)(end - p) >= n && memcmp(p, words[i], n) == 0)
			return p + n;
	}
	return NULL;
}

/* An object's key and its colon; p is where the key should start. */
static const unsigned char *
json_key(const unsigned char *p, const unsigned char *end)
{
	p = json_string(json_ws(p, end), end);
	if (p)
		p = json_ws(p, end);
	return p && p < end && *p == ':' ? p + 1 : NULL;
}

int
pgtext_is_jsonb(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s, *end = p + len;
	struct buf open = {0}; /* the containers around p: '{' or '[' */
	int ok = 0;

	for (;;) {
		/* A value, or the start of a container. */
		p = json_ws(p, end);
		if (p == end)
			goto out;
		if (*p == '{' || *p == '[') {
			char c = (char)*p;
			p = json_ws(p + 1, end);
			if (p < end && *p == (c == '{' ? '}' : ']')) {
				p++;
			} else {
				buf_append(&open, &c, 1);
				if (c == '{' && !(p = json_key(p, end)))
					goto out;
				continue;
			}
		} else if (*p == '"') {
			p = json_string(p, end);
		} else if (*p == '-' || (*p >= '0' && *p <= '9')) {
			p = json_number(p, end);
		} else {
			p = json_literal(p, end);
		}
		if (!p)
			goto out;
		/* After a value: close containers, then a comma or the end. */
		for (p = json_ws(p, end); open.len > 0 && p < end;
		     p = json_ws(p + 1, end)) {
			char top = open.data[open.len - 1];
			if (*p != (top == '{' ? '}' : ']'))
				break;
			open.len--;
		}
		if (open.len == 0) {
			ok = p == end;
			goto out;
		}
		if (p == end || *p != ',')
			goto out;
		p++;
		if (open.data[open.len - 1] == '{' && !(p = json_key(p, end)))
			goto out;
	}
out:
	buf_free(&open);
	return ok;
}
