/*
 * pooler: is a worker's connection a session of its own?  See pooler.h.
 *
 * How, and why this way.  Two facts, each checked against PgBouncer 1.18
 * (scripts/testbouncer.sh, tests/integration/test_pooler.c):
 *
 * 1. A pooler is there at all when the process id in the connection's
 *    cancel key (BackendKeyData, PQbackendPID()) is not the server
 *    process's own (pg_backend_pid()).  PostgreSQL sends its pid; a
 *    pooler that speaks the protocol sends a key of its own, since it must
 *    route a cancel request to whichever server connection the client
 *    holds at that moment (PgBouncer: random bytes, in every pool mode;
 *    RDS Proxy sends none, and libpq then reports 0).  A direct
 *    connection, or a plain TCP forwarder, passes the server's key on:
 *    never flagged.
 *
 * 2. Whether the pool shares server sessions is seen by using it as
 *    another client would: a probe connection asks for its server's pid
 *    while ours sits idle, in turns with ours asking for its own.  In a
 *    session pool our server connection is ours until we close: the probe
 *    can never get it, and ours never changes.  In a transaction or
 *    statement pool our server connection goes back to the pool at each
 *    transaction's end; PgBouncer hands out the server connection released
 *    last first (server_round_robin = 0, the default), so the probe gets
 *    ours, and with server_round_robin = 1 ours moves to another server
 *    connection at the next turn.  With a single server connection the
 *    probe necessarily gets ours.  In a busy pool other clients take and
 *    release server connections in between, and one turn can miss: ours
 *    came back to us and the probe got another.  Each turn is another
 *    chance (either sign suffices), so there are TURNS of them; with
 *    eight workers starting at once through one transaction pool (the
 *    probes of each the others' traffic), 2 of 440 worker starts missed,
 *    never all of one start's: the first worker that refuses stops them
 *    all.  A pool without other clients' traffic never misses.
 *
 * Job queues that need a session (GoodJob, queue_classic, OCA queue_job)
 * document the limit; none that we found checks for it.
 *
 * What was ruled out: session state read back in the next transaction
 * (an advisory lock in pg_locks, a SET) survives in a transaction pool
 * that has one server connection and no other client, which is exactly
 * how a test or a quiet night looks; inet_server_port() differs from the
 * port we dialled behind any TCP forwarder and is null over a Unix
 * socket; SHOW pool_mode exists only on PgBouncer's admin console, which
 * needs admin rights and a database name of its own; PgBouncer 1.18 sends
 * ParameterStatus values that are PostgreSQL's, in either mode.
 *
 * A pooler that kept our session is reported too (POOLER_SESSION): it is
 * right today, and a warning in the log names the trap should the pool be
 * switched to transaction mode.  A probe that cannot get a server
 * connection and its answers within PROBE_MS in all (a session pool whose
 * connections are all taken, max_client_conn reached) proves nothing
 * either way: POOLER_UNKNOWN, which a worker takes as it takes
 * POOLER_SESSION (a warning, and it starts).
 */
#include "db/pooler.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "db/internal.h"

/* How long the probe may take in all: its connection and every answer. */
#define PROBE_MS 5000
/* Turns of (ours, the probe's) pids after the first of ours. */
#define TURNS 10

#define FIX                                                                    \
	"pgjobd workers need a session of their own (the slot's advisory "     \
	"lock, LISTEN): point database.conninfo at PostgreSQL directly or at " \
	"a session-mode pool; pgjob enqueue and pgjob.enqueue() may keep "     \
	"using this one"

/* The server process's pid on a synchronous connection, or -1 (*err). */
static long long
server_pid(PGconn *conn, char **err)
{
	PGresult *res = PQexec(conn, "select pg_backend_pid()");
	long long pid = -1;
	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1)
		pid = atoll(PQgetvalue(res, 0, 0));
	else
		*err = db_error_text(conn, res);
	PQclear(res);
	return pid;
}

/* Waits until conn's socket is ready for reading (or writing); 0, or -1
 * once deadline (util_now_ms()) has passed. */
static int
wait_socket(PGconn *conn, int for_write, int64_t deadline)
{
	struct pollfd p = {.fd = PQsocket(conn),
			   .events = for_write ? POLLOUT : POLLIN};
	for (;;) {
		int64_t left = deadline - util_now_ms();
		if (left <= 0 || p.fd < 0)
			return -1;
		int n = poll(&p, 1, (int)left);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -1;
	}
}

/*
 * Opens the probe: ours' parameters (user, database, password, TLS...)
 * with its host and port pinned to the ones it reached, so that a host
 * list cannot send the probe to another pooler.  NULL with *err set.
 */
static PGconn *
probe_connect(PGconn *ours, int64_t deadline, char **err)
{
	PQconninfoOption *opts = PQconninfo(ours);
	size_t n = 0;
	for (PQconninfoOption *o = opts; o && o->keyword; o++)
		n++;
	const char **keys = xcalloc(n + 4, sizeof(char *));
	const char **vals = xcalloc(n + 4, sizeof(char *));
	size_t k = 0;
	for (PQconninfoOption *o = opts; o && o->keyword; o++) {
		if (!o->val || !strcmp(o->keyword, "host") ||
		    !strcmp(o->keyword, "hostaddr") ||
		    !strcmp(o->keyword, "port"))
			continue;
		keys[k] = o->keyword;
		vals[k++] = o->val;
	}
	keys[k] = "host";
	vals[k++] = PQhost(ours);
	keys[k] = "port";
	vals[k++] = PQport(ours);
	const char *addr = PQhostaddr(ours);
	if (addr && *addr) {
		keys[k] = "hostaddr";
		vals[k++] = addr;
	}
	PGconn *probe = PQconnectStartParams(keys, vals, 0);
	free(keys);
	free(vals);
	PQconninfoFree(opts);
	PostgresPollingStatusType st = PGRES_POLLING_WRITING;
	while (probe && st != PGRES_POLLING_OK && st != PGRES_POLLING_FAILED) {
		if (wait_socket(probe, st == PGRES_POLLING_WRITING, deadline)) {
			*err = xasprintf("no connection within %d ms",
					 PROBE_MS);
			PQfinish(probe);
			return NULL;
		}
		st = PQconnectPoll(probe);
	}
	if (probe && st == PGRES_POLLING_OK)
		return probe;
	*err = db_error_text(probe, NULL);
	PQfinish(probe);
	return NULL;
}

/* The probe's server pid, waiting until deadline; -1 with *err set. */
static long long
probe_pid(PGconn *probe, int64_t deadline, char **err)
{
	if (!PQsendQuery(probe, "select pg_backend_pid()")) {
		*err = db_error_text(probe, NULL);
		return -1;
	}
	while (PQisBusy(probe)) {
		if (wait_socket(probe, 0, deadline)) {
			*err = xasprintf("no answer within %d ms of its "
					 "start (no server connection free in "
					 "the pool?)",
					 PROBE_MS);
			return -1;
		}
		if (!PQconsumeInput(probe)) {
			*err = db_error_text(probe, NULL);
			return -1;
		}
	}
	long long pid = -1;
	PGresult *res;
	while ((res = PQgetResult(probe))) {
		if (PQresultStatus(res) == PGRES_TUPLES_OK &&
		    PQntuples(res) == 1)
			pid = atoll(PQgetvalue(res, 0, 0));
		else if (!*err)
			*err = db_error_text(probe, res);
		PQclear(res);
	}
	if (pid < 0 && !*err)
		*err = xstrdup("no answer");
	return pid;
}

/*
 * The turns of fact 2 (top of file), all within one PROBE_MS.  Returns
 * POOLER_SHARED, POOLER_SESSION or POOLER_UNKNOWN (the probe failed) with
 * *msg set, or POOLER_ERROR (*msg set) when one of ours' own statements
 * failed.
 */
static enum pooler
probe_turns(PGconn *ours, long long first, char **msg)
{
	char *err = NULL;
	int64_t deadline = util_now_ms() + PROBE_MS;
	PGconn *probe = probe_connect(ours, deadline, &err);
	enum pooler found = POOLER_SESSION;
	for (int i = 0; probe && i < TURNS; i++) {
		long long theirs = probe_pid(probe, deadline, &err);
		if (theirs < 0)
			break;
		long long again = server_pid(ours, &err);
		if (again < 0) {
			*msg = xasprintf("checking for a connection pooler: %s",
					 err);
			found = POOLER_ERROR;
			break;
		}
		if (theirs == first || again != first) {
			char *why =
				theirs == first
					? xasprintf("server process %lld, this "
						    "connection's, served "
						    "another client",
						    first)
					: xasprintf(
						  "this connection's "
						  "transactions ran in server "
						  "process %lld, then in %lld",
						  first, again);
			*msg = xasprintf("database.conninfo leads to a "
					 "connection pool that shares server "
					 "sessions between clients (pgbouncer "
					 "pool_mode=transaction or "
					 "statement): %s; " FIX,
					 why);
			free(why);
			found = POOLER_SHARED;
			break;
		}
	}
	if (found == POOLER_SESSION && err)
		found = POOLER_UNKNOWN;
	if (found == POOLER_SESSION || found == POOLER_UNKNOWN)
		*msg = err ? xasprintf(
				     "database.conninfo leads to a connection "
				     "pooler (the connection's cancel key is "
				     "not the server's), whose pool mode could "
				     "not be checked: the probe connection "
				     "failed: %s; in transaction or statement "
				     "mode it would take the worker's slot "
				     "lock and LISTEN away",
				     err)
			   : xstrdup("database.conninfo leads to a connection "
				     "pooler (the connection's cancel key is "
				     "not the server's) that kept this "
				     "connection's server session, as a "
				     "session-mode pool does; in transaction "
				     "or statement mode it would take the "
				     "worker's slot lock and LISTEN away");
	free(err);
	PQfinish(probe);
	return found;
}

enum pooler
pooler_check(struct db_conn *c, char **msg)
{
	PGconn *ours = db_pgconn(c);
	char *err = NULL;

	*msg = NULL;
	long long first = server_pid(ours, &err);
	if (first < 0) {
		*msg = xasprintf("checking for a connection pooler: %s", err);
		free(err);
		return POOLER_ERROR;
	}
	if (first == (long long)PQbackendPID(ours))
		return POOLER_DIRECT;
	return probe_turns(ours, first, msg);
}
