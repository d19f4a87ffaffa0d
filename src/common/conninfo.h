/*
 * conninfo: finds the secrets in a libpq connection string without libpq,
 * so that pgjobd's supervisor (which never maps libpq) and pgjob can scrub
 * a password given with -d/--database from their argv: what ps and
 * /proc/PID/cmdline show is the argv memory, read by any local user.
 *
 * The string is read the way libpq reads the dbname of PQconnectdbParams()
 * with expand_dbname: keyword=value pairs (values unquoted, or in single
 * quotes, with backslash escapes), or a postgresql:// or postgres:// URI
 * (the password in user:password@, and ?password=...&sslpassword=...
 * parameters, their names percent-decoded).  Anything else is a database
 * name and holds no secret.
 */
#ifndef PGJOBD_CONNINFO_H
#define PGJOBD_CONNINFO_H

/*
 * Overwrites, in place, the value of every secret option in s (password,
 * sslpassword) with as many '*': "host=db password='a b'" becomes
 * "host=db password=*****".  The length stays (the bytes are where the
 * kernel shows them), and so does every other option, so the argument
 * still reads as what it was.  Returns how many values were scrubbed.
 */
int conninfo_scrub(char *s);

/* 1 when keyword names an option whose value conninfo_scrub() hides. */
int conninfo_secret(const char *keyword);

#endif
