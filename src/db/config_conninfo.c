/*
 * config_conninfo_valid() for the programs that link libpq (pgjob, the
 * tests): libpq itself parses the conninfo.  The daemon has its own
 * definition in workermod.c (see config.h).
 */
#include "common/config.h"
#include "db/db.h"

int
config_conninfo_valid(const char *conninfo)
{
	return db_conninfo_valid(conninfo);
}
