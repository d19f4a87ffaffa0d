/*
 * text: a strict UTF-8 decoder and the escaping of what a terminal would
 * obey.
 */
#include "common/text.h"

#include <stdio.h>
#include <string.h>

size_t
text_char_n(const char *s, size_t left, uint32_t *cp)
{
	const unsigned char *p = (const unsigned char *)s;
	unsigned char lo = 0x80, hi = 0xbf;
	size_t n;

	if (left == 0 || p[0] == 0)
		return 0;
	if (p[0] < 0x80) {
		*cp = p[0];
		return 1;
	}
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		n = 2;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		n = 3;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		n = 4;
	else
		return 0;
	if (n > left)
		return 0;
	/* No overlong forms, no surrogates, nothing above U+10FFFF. */
	if (p[0] == 0xe0)
		lo = 0xa0;
	else if (p[0] == 0xed)
		hi = 0x9f;
	else if (p[0] == 0xf0)
		lo = 0x90;
	else if (p[0] == 0xf4)
		hi = 0x8f;
	if (p[1] < lo || p[1] > hi)
		return 0;
	/* A NUL is no continuation byte: nothing reads past the end. */
	for (size_t i = 2; i < n; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	*cp = p[0] & (0x7f >> n);
	for (size_t i = 1; i < n; i++)
		*cp = *cp << 6 | (p[i] & 0x3f);
	return n;
}

size_t
text_char(const char *s, uint32_t *cp)
{
	/* A NUL ends s: no continuation byte check reads past it. */
	return text_char_n(s, 4, cp);
}

int
text_is_control(uint32_t cp)
{
	return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f);
}

void
text_safe_append(struct buf *b, const char *s, const char *keep,
		 const char *blank)
{
	while (*s) {
		uint32_t cp;
		size_t n = text_char(s, &cp);
		if (n == 0) {
			buf_appendf(b, "\\x%02x", (unsigned char)*s++);
			continue;
		}
		if (!text_is_control(cp) ||
		    (keep && cp < 0x20 && strchr(keep, (int)cp)))
			buf_append(b, s, n);
		else if (blank && cp < 0x20 && strchr(blank, (int)cp))
			buf_append(b, " ", 1);
		else if (cp < 0x80)
			buf_appendf(b, "\\x%02x", (unsigned)cp);
		else
			buf_appendf(b, "\\u%04x", (unsigned)cp);
		s += n;
	}
}

/* A byte that goes out as it is in a quoted string: printable ASCII but
 * the quote and the backslash. */
static int
plain_byte(unsigned char c)
{
	return c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
}

void
text_escape_append(struct buf *b, const char *s, bool json)
{
	while (*s) {
		/* A run of plain bytes (most of any text) in one append: a
		 * character at a time, the escaping of a batch's errors was
		 * 8 % of a worker's CPU in a drain of failing jobs. */
		const char *run = s;
		while (plain_byte((unsigned char)*s))
			s++;
		if (s > run) {
			buf_append(b, run, (size_t)(s - run));
			continue;
		}
		uint32_t cp;
		size_t n = text_char(s, &cp);
		if (n == 0) {
			if (json)
				buf_append(b, "\\ufffd", 6);
			else
				buf_appendf(b, "\\x%02x", (unsigned char)*s);
			s++;
			continue;
		}
		if (cp == '"' || cp == '\\') {
			buf_append(b, "\\", 1);
			buf_append(b, s, 1);
		} else if (cp == '\n') {
			buf_append(b, "\\n", 2);
		} else if (cp == '\r') {
			buf_append(b, "\\r", 2);
		} else if (cp == '\t') {
			buf_append(b, "\\t", 2);
		} else if (text_is_control(cp)) {
			buf_appendf(b, "\\u%04x", (unsigned)cp);
		} else {
			buf_append(b, s, n);
		}
		s += n;
	}
}

char *
text_safe(const char *s, const char *keep, const char *blank)
{
	struct buf b = {0};

	text_safe_append(&b, s, keep, blank);
	return b.data ? b.data : xstrdup("");
}
