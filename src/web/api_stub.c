/*
 * TEMPORARY, h-srv only: answers 404 for every /api/ path until h-api's
 * api.c is merged.  Never merge this file into main: h-srv deletes it when
 * it merges h-api.
 */
#include <stdlib.h>
#include <string.h>

#include "web/api.h"

/* The api.h helpers: api.c will have them. */
void
web_response_error(struct web_response *out, int status, const char *msg)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "error", msg);
	web_response_json(out, o);
	out->status = status;
}

void
web_response_json(struct web_response *out, cJSON *item)
{
	free(out->body);
	out->status = 200;
	out->content_type = "application/json";
	out->body = cJSON_PrintUnformatted(item);
	if (!out->body)
		abort();
	out->len = strlen(out->body);
	cJSON_Delete(item);
}

int
web_api_get(struct db_conn *db, const char *path, const struct web_query *q,
	    struct web_response *out)
{
	web_response_error(out, 404, "no such API path (api.c not merged)");
	return 0;
}

int
web_api_post(struct db_conn *db, const struct web_user *u, const char *path,
	     const cJSON *body, struct web_response *out)
{
	web_response_error(out, 404, "no such API path (api.c not merged)");
	return 0;
}
