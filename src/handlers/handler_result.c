/*
 * handler_result: how a handler's run ended.  See handler_result.h.
 */
#include "handlers/handler_result.h"

#include <stdlib.h>

void
handler_result_clear(struct handler_result *r)
{
	free(r->result);
	free(r->error);
	r->outcome = OUTCOME_DONE;
	r->result = NULL;
	r->error = NULL;
	r->retry_in_ms = -1;
	r->snooze = false;
	r->throttle_ms = 0;
	r->measured = false;
	r->cpu_ms = -1;
	r->max_rss_kb = -1;
	r->timed_out = 0;
	r->has_status = false;
	r->status = 0;
}
