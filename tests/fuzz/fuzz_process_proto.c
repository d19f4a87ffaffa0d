/*
 * fuzz_process_proto: handler_process_proto_parse() on arbitrary lines, as
 * a process handler's program may write them (docs/handlers.md, "The
 * protocol").  The input is the line itself, NULs and all.  Exactly one of
 * a message and a reason comes back; a result is JSON that jsonb takes;
 * a reason and an error are text PostgreSQL stores (no NUL before their
 * end, valid UTF-8 as far as jsonb sees it when quoted).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/pgtext.h"
#include "handlers/handler_process_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* s as a JSON string must be what jsonb accepts: valid UTF-8, no NUL. */
static void
check_text(const char *s)
{
	cJSON *j = cJSON_CreateString(s);
	char *t = j ? cJSON_PrintUnformatted(j) : NULL;
	if (t && !pgtext_is_jsonb(t, strlen(t)))
		abort();
	free(t);
	cJSON_Delete(j);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct proto_msg m;
	char *why = (char *)1;
	int rc = handler_process_proto_parse((const char *)data, size, "k", &m,
					     &why);

	if ((rc == 0) != (why == NULL))
		abort(); /* exactly one of them */
	if (rc < 0) {
		check_text(why);
		free(why);
		return 0;
	}
	if (m.result && !pgtext_is_jsonb(m.result, strlen(m.result)))
		abort();
	if (m.error)
		check_text(m.error);
	if (m.type != PROTO_HELLO && m.id < 1)
		abort();
	handler_process_proto_free(&m);
	return 0;
}
