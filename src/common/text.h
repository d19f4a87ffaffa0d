/*
 * text: UTF-8 and text that reaches a terminal.  A job's kind, payload or
 * error, a config key, a log line: any of them may hold bytes that a
 * terminal obeys (ESC[2J clears the screen, ESC]52 writes the clipboard,
 * a bare CR overwrites the line) or that are not text at all.  pgjob's
 * output, config errors and log lines pass through here, so that such
 * bytes show as visible escapes instead of acting.
 */
#ifndef PGJOBD_TEXT_H
#define PGJOBD_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/util.h"

/*
 * The character at s: its length in bytes (1 to 4), with *cp set to its
 * code point; or 0 when s does not start a valid UTF-8 character (a NUL,
 * a stray or missing continuation byte, an overlong form, a surrogate,
 * anything past U+10FFFF).
 */
size_t text_char(const char *s, uint32_t *cp);
/* The same for the character at s with at most left bytes to read (s need
 * not end in a NUL; a NUL byte is not a valid character either). */
size_t text_char_n(const char *s, size_t left, uint32_t *cp);

/* 1 for a control character a terminal acts on: C0, DEL or C1. */
int text_is_control(uint32_t cp);

/*
 * Appends s to b fit for a terminal: printable UTF-8 as it is; the
 * characters of keep as they are and those of blank as a space (each a
 * string of C0 controls, such as "\n\t"; NULL for none); every other
 * control character and every byte that is not valid UTF-8 as a visible
 * escape, \x1b for a byte and \u009b for a C1 control.  The result is
 * valid UTF-8.
 */
void text_safe_append(struct buf *b, const char *s, const char *keep,
		      const char *blank);
/* The same as a new string; caller frees. */
char *text_safe(const char *s, const char *keep, const char *blank);

/*
 * Appends s as the inside of a quoted string (no quotes) of a logfmt line
 * or (json) of JSON: " and \ escaped, newline, return and tab as \n \r
 * \t, every other control character (C0, DEL, C1) as \u00XX, so that no
 * line carries what a terminal would act on, and a byte that is not UTF-8
 * as \xXX, or in JSON (which has no byte escape) as U+FFFD: valid JSON
 * whatever s holds.  The log's lines and the OTLP exporter's requests.
 */
void text_escape_append(struct buf *b, const char *s, bool json);

#endif
