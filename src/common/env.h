/*
 * env: ${NAME} references in config values, expanded from the environment,
 * and the private copy of the environment that a daemon expands them from
 * once the secrets they name have left its own environment.
 */
#ifndef PGJOBD_ENV_H
#define PGJOBD_ENV_H

#include <stdbool.h>
#include <stddef.h>

/* A shell-style variable name, s[0..n): [A-Za-z_][A-Za-z0-9_]*. */
bool env_is_name(const char *s, size_t n);

/*
 * Expands every ${NAME} in s from the environment.  Returns a new string
 * (caller frees) or NULL when a variable is not set or a ${ is not closed;
 * *missing then names it (caller frees).  "$$" stands for a literal "$".
 * After env_private(), the environment read is the private copy.
 */
char *env_expand(const char *s, char **missing);

/*
 * For the daemon, once, before anything changes the environment: ${NAME}
 * expansion reads a private copy of the environment from now on, and each
 * variable it expands is removed from the process's own environment
 * (environ, and the block /proc/PID/environ shows), so that no process
 * started later, and no reader of that file, sees the secrets a config
 * takes from the environment.  A reload still expands them, from the
 * copy.  docs/security.md#process-isolation.
 */
void env_private(void);

#endif
