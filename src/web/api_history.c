/*
 * api_history: GET /api/history?queue=&kind=&range= — the history of a
 * queue (and kind; neither: all of them) per step over a range
 * (pgjob.history()), and per queue and kind over the whole range
 * (pgjob.history_summary()): sql/schema/tables/history.sql.
 */
#include "web/api_history.h"

#include <string.h>

#include <cjson/cJSON.h>

#include "web/api_response.h"

/* The ranges and the step of each: about 60 to 170 points a chart. */
static const struct {
	const char *name, *since, *step;
	int step_s;
} ranges[] = {
	{"1h", "1 hour", "1 minute", 60},
	{"24h", "24 hours", "10 minutes", 600},
	{"7d", "7 days", "1 hour", 3600},
	{"30d", "30 days", "6 hours", 21600},
};

void
api_history(struct db_conn *db, const char *rest, const struct web_query *q,
	    struct web_response *out)
{
	(void)rest;
	const char *range = q->get(q->ctx, "range");
	const char *queue = q->get(q->ctx, "queue");
	const char *kind = q->get(q->ctx, "kind");
	size_t r = 0;
	if (range && *range) {
		for (r = 0; r < sizeof(ranges) / sizeof(ranges[0]); r++)
			if (strcmp(range, ranges[r].name) == 0)
				break;
		if (r == sizeof(ranges) / sizeof(ranges[0])) {
			web_response_error(out, 400,
					   "range: 1h, 24h, 7d or 30d");
			return;
		}
	}
	if (queue && !*queue)
		queue = NULL;
	if (kind && !*kind)
		kind = NULL;
	const char *p[] = {queue, kind, ranges[r].since, ranges[r].step};
	struct db_rows *res = api_query(db, out,
					"select * from pgjob.history($1, $2, "
					"$3::interval, $4::interval)",
					4, p);
	if (!res)
		return;
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "range", ranges[r].name);
	cJSON_AddNumberToObject(o, "step_seconds", ranges[r].step_s);
	cJSON_AddItemToObject(o, "series", api_rows_array(res));
	db_rows_free(res);
	const char *s[] = {ranges[r].since, queue};
	res = api_query(db, out,
			"select * from pgjob.history_summary($1::interval, $2)"
			" where $3::text is null or kind = $3",
			3, (const char *const[]){s[0], s[1], kind});
	if (!res) {
		cJSON_Delete(o);
		return;
	}
	cJSON_AddItemToObject(o, "kinds", api_rows_array(res));
	db_rows_free(res);
	web_response_json(out, o);
}
