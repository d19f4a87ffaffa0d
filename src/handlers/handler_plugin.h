/*
 * handler_plugin: loads plugins (include/pgjobd/plugin.h) and runs a job
 * through one (see handler_plugin.c).  Used by handler.c only.
 */
#ifndef PGJOBD_HANDLER_PLUGIN_H
#define PGJOBD_HANDLER_PLUGIN_H

#include "common/job.h"
#include "handlers/handler_result.h"

struct config;

/* Loads every plugin handler of cfg; returns 0, or -1 if one is unusable. */
int handler_plugin_load_all(const struct config *cfg);
void handler_plugin_unload_all(void);
/*
 * Runs job through its plugin, synchronously, under a hard SIGALRM timer of
 * the handler's timeout (the default action kills the worker).  Fills *res
 * (caller owns its strings).
 */
void handler_plugin_run(const struct job *job, int slot,
			struct handler_result *res);

#endif
