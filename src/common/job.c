/*
 * job: job states by name, and freeing a claimed job.
 */
#include "common/job.h"

#include <stdlib.h>

static const char *const names[] = {
	[JOB_AVAILABLE] = "available", [JOB_RUNNING] = "running",
	[JOB_DONE] = "done",	       [JOB_DEAD] = "dead",
	[JOB_CANCELLED] = "cancelled",
};

const char *
job_state_name(enum job_state s)
{
	return (unsigned)s <= JOB_CANCELLED ? names[s] : "unknown";
}

void
job_clear(struct job *job)
{
	free(job->kind);
	free(job->queue);
	free(job->payload);
	free(job->ordering_key);
	free(job->trace);
	job->kind = job->queue = job->payload = job->ordering_key = NULL;
	job->trace = NULL;
}

void
job_free(struct job *job)
{
	if (!job)
		return;
	job_clear(job);
	free(job);
}
