/*
 * rowjson: result rows as JSON, for every program that prints or serves
 * them (pgjob --json, the web console's API).  Every string is valid
 * UTF-8: a byte that is not (a SQL_ASCII database keeps any) becomes
 * U+FFFD, so that one stray byte in a payload or an error written by an
 * application never makes a whole answer unreadable to a strict parser.
 *
 * Timestamps come out as RFC 3339 when the session's DateStyle is ISO
 * (pgjob and the web console set it when they connect).
 */
#ifndef PGJOBD_ROWJSON_H
#define PGJOBD_ROWJSON_H

#include <cjson/cJSON.h>

#include "db/db.h"

/*
 * Column col of row as JSON: numbers and json/jsonb verbatim (exact, as
 * PostgreSQL printed them), booleans, timestamps as RFC 3339 strings, SQL
 * null as null, anything else as a string.  Returns a new item.
 */
cJSON *rowjson_value(const struct db_rows *res, int row, int col);
/* s as a JSON string, made valid UTF-8.  Returns a new item. */
cJSON *rowjson_string(const char *s);
/* The first n bytes of s as a JSON string, cut back to the start of a
 * character, made valid UTF-8.  Returns a new item. */
cJSON *rowjson_string_n(const char *s, size_t n);
/* Adds columns [from, to) of row to obj, named as the columns. */
void rowjson_add_columns(cJSON *obj, const struct db_rows *res, int row,
			 int from, int to);

#endif
