/*
 * jobctl: the statements of the operator's hand.  See jobctl.h.
 */
#include "db/jobctl.h"

const char jobctl_pause_sql[] = "select pgjob.pause(queue => $1, kind => $2)";
const char jobctl_resume_sql[] = "select pgjob.resume(queue => $1, kind => $2)";
const char jobctl_set_limits_sql[] =
	"select pgjob.set_limits(queue => $1, limits => $2::jsonb)";
const char jobctl_reset_limits_sql[] = "select pgjob.reset_limits(queue => $1)";
