/*
 * rowjson: result rows as JSON.  See rowjson.h.
 */
#include "db/rowjson.h"

#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "common/util.h"

/* 1 when s is a JSON number (PostgreSQL also prints NaN and Infinity). */
static int
json_number(const char *s)
{
	if (*s == '-')
		s++;
	return isdigit((unsigned char)*s);
}

/*
 * "2024-05-01 12:00:05.5+00" (DateStyle ISO) as RFC 3339:
 * "2024-05-01T12:00:05.5+00:00".  infinity and BC dates stay as they are.
 */
static cJSON *
json_time(const char *v, int with_zone)
{
	size_t n = strlen(v);
	if (n < 19 || v[10] != ' ' || strstr(v, " BC"))
		return cJSON_CreateString(v);
	char *s = xmalloc(n + 4);
	memcpy(s, v, n + 1);
	s[10] = 'T';
	/* An offset of whole hours prints as "+02": RFC 3339 wants "+02:00". */
	if (with_zone && n >= 22 && (s[n - 3] == '+' || s[n - 3] == '-'))
		memcpy(s + n, ":00", 4);
	cJSON *item = cJSON_CreateString(s);
	free(s);
	return item;
}

/*
 * v with every byte that does not start a valid UTF-8 character replaced
 * by U+FFFD; NULL when v is valid already (the usual case).  JSON text is
 * UTF-8 (RFC 8259), and a database in SQL_ASCII returns any bytes: passed
 * through, one 0xff would make the whole output unreadable to a strict
 * parser.  Outside strings JSON is ASCII, so this keeps raw JSON valid too.
 * Caller frees.
 */
static char *
json_utf8(const char *v)
{
	struct buf b = {0};
	const char *p = v, *done = v;
	uint32_t cp;

	while (*p) {
		size_t n = text_char(p, &cp);
		if (n) {
			p += n;
			continue;
		}
		buf_append(&b, done, (size_t)(p - done));
		buf_append(&b, "\xef\xbf\xbd", 3);
		done = ++p;
	}
	if (done == v)
		return NULL;
	buf_append(&b, done, strlen(done));
	return b.data;
}

cJSON *
rowjson_string(const char *v)
{
	char *fixed = json_utf8(v);
	cJSON *item = cJSON_CreateString(fixed ? fixed : v);
	free(fixed);
	return item;
}

cJSON *
rowjson_string_n(const char *v, size_t n)
{
	size_t len = strlen(v);
	if (len <= n)
		return rowjson_string(v);
	/* Back to the first byte of the character that n cuts. */
	while (n > 0 && ((unsigned char)v[n] & 0xc0) == 0x80)
		n--;
	char *cut = xstrndup(v, n);
	cJSON *item = rowjson_string(cut);
	free(cut);
	return item;
}

/* Raw JSON from the database (json, jsonb, numbers), valid UTF-8. */
static cJSON *
json_raw(const char *v)
{
	char *fixed = json_utf8(v);
	cJSON *item = cJSON_CreateRaw(fixed ? fixed : v);
	free(fixed);
	return item;
}

cJSON *
rowjson_value(const struct db_rows *res, int row, int col)
{
	if (db_rows_value(res, row, col) == NULL)
		return cJSON_CreateNull();
	const char *v = db_rows_text(res, row, col);
	switch (db_rows_type(res, col)) {
	case DB_TYPE_BOOL:
		return cJSON_CreateBool(v[0] == 't');
	case DB_TYPE_NUMBER:
		return json_number(v) ? cJSON_CreateRaw(v) : cJSON_CreateNull();
	case DB_TYPE_JSON:
		return json_raw(v);
	case DB_TYPE_TIMESTAMPTZ:
		return json_time(v, 1);
	case DB_TYPE_TIMESTAMP:
		return json_time(v, 0);
	default:
		return rowjson_string(v);
	}
}

void
rowjson_add_columns(cJSON *obj, const struct db_rows *res, int row, int from,
		    int to)
{
	for (int c = from; c < to; c++)
		cJSON_AddItemToObject(obj, db_rows_name(res, c),
				      rowjson_value(res, row, c));
}
