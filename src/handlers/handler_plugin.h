/*
 * handler_plugin: loads plugins (include/pgjobd/plugin.h) and runs a job
 * through one (see handler_plugin.c).  Used by handler.c only.
 */
#ifndef PGJOBD_HANDLER_PLUGIN_H
#define PGJOBD_HANDLER_PLUGIN_H

#include "common/job.h"
#include "handlers/handler_result.h"

struct config;

/*
 * pgjobd's plugin directory (docs/handlers.md#plugin), PostgreSQL's
 * $libdir: <the binary's directory>/PGJOBD_PLUGIN_RELDIR when it exists (an
 * installed tree, wherever it was moved), else <the binary's
 * directory>/plugins (the build tree), else the directory compiled in.
 * Static storage, found once.
 */
const char *handler_plugin_dir(void);
/*
 * The file to dlopen() for a handler's library: an absolute path as it is;
 * a relative one ("x.so", "examples/x") in the plugin directory, with ".so"
 * added when the name lacks it and the file without it does not exist; a
 * bare name not found there goes to the dynamic linker's own search.
 * Caller frees.
 */
char *handler_plugin_path(const char *lib);

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
