/*
 * env: the references in config values, ${NAME} expanded from the
 * environment and ${file:PATH} and ${credential:NAME} from files, and the
 * private copy of the environment that a daemon expands ${NAME} from once
 * the secrets they name have left its own environment.
 */
#ifndef PGJOBD_ENV_H
#define PGJOBD_ENV_H

#include <stdbool.h>
#include <stddef.h>

/* A shell-style variable name, s[0..n): [A-Za-z_][A-Za-z0-9_]*. */
bool env_is_name(const char *s, size_t n);

/* The largest secret ${file:PATH} and ${credential:NAME} read, in bytes. */
#define ENV_SECRET_MAX 65536

/*
 * Expands every reference in s: ${NAME} from the environment,
 * ${file:PATH} from the file at the absolute PATH, ${credential:NAME} from
 * $CREDENTIALS_DIRECTORY/NAME (systemd's LoadCredential=).  A file is read
 * whole, one trailing newline taken off, and refused when it is not a
 * regular file, is writable by group or others, is over ENV_SECRET_MAX
 * bytes or holds a NUL.  "$$" stands for a literal "$".  Returns a new
 * string (caller frees) or NULL with *why set to the message (caller
 * frees): it names the reference, never a value.  After env_private(), the
 * environment read is the private copy.
 */
char *env_expand(const char *s, char **why);

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
