/*
 * handler_check: the checks of a loaded config against this host, as the
 * handlers will meet it at run time (see handler_check.c).  Used by
 * pgjobd's --check-config and by the supervisor's reload.
 */
#ifndef PGJOBD_HANDLER_CHECK_H
#define PGJOBD_HANDLER_CHECK_H

#include <stddef.h>

struct config;
struct config_errors;

/*
 * Adds to errs one "file:line:col: handlers.x.key: message" for every
 * exec handler's or task's program that cannot be run, plugin that cannot
 * be used (loaded in a forked child; the caller runs no plugin code) and
 * http url that libcurl cannot use.  Returns the number added.  The caller
 * must not have a SIGCHLD handler that reaps every child at once inside
 * this call (libev's reaps from its loop, after it).
 */
size_t handler_check_config(const struct config *c, struct config_errors *errs);

#endif
