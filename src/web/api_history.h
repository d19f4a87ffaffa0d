/*
 * api_history: the console's history per queue and kind (the path is in
 * docs/console.md, "The API"); api.c routes to it.
 */
#ifndef PGJOBD_WEB_API_HISTORY_H
#define PGJOBD_WEB_API_HISTORY_H

#include "db/db.h"
#include "web/api.h"

/* history?queue=&kind=&range=1h|24h|7d|30d (rest unused). */
void api_history(struct db_conn *db, const char *rest,
		 const struct web_query *q, struct web_response *out);

#endif
