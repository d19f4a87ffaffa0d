/*
 * pgjobd: the daemon.
 *
 *   pgjobd -c FILE [-w N] [-d CONNINFO] [--check-config[=static]]
 *
 * Exit codes: 0 after a clean stop (or a valid config with --check-config),
 * 2 for a usage error, 78 (EX_CONFIG) for a config that does not validate
 * or a schema this binary cannot work with.
 */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "common/config.h"
#include "common/env.h"
#include "common/conninfo.h"
#include "common/failpoint.h"
#include "common/log.h"
#include "db/db.h"
#include "db/migrate.h"
#include "daemon/supervisor.h"
#include "handlers/handler_check.h"
#include "common/util.h"

static void
usage(FILE *f)
{
	fputs("usage: pgjobd -c FILE [-w N] [-d CONNINFO] "
	      "[--check-config[=static]]\n"
	      "  -c, --config FILE   the YAML config (or PGJOBD_CONFIG)\n"
	      "  -d, --database CONNINFO\n"
	      "                      use this instead of database.conninfo\n"
	      "  -w, --workers N     run N workers instead of `workers:`\n"
	      "      --check-config  validate the config and exit (0 or 78):\n"
	      "                      the file, then its commands, plugins "
	      "and urls\n"
	      "                      on this host; =static: the file "
	      "alone\n"
	      "  -V, --version       print the version\n"
	      "      --list-failpoints\n"
	      "                      print the failpoints "
	      "(PGJOBD_FAILPOINTS)\n",
	      f);
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"config", required_argument, NULL, 'c'},
		{"workers", required_argument, NULL, 'w'},
		{"database", required_argument, NULL, 'd'},
		{"check-config", optional_argument, NULL, 'C'},
		{"list-failpoints", no_argument, NULL, 'F'},
		{"version", no_argument, NULL, 'V'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *path = getenv("PGJOBD_CONFIG");
	char *database = NULL;
	int workers = 0, check = 0, c;
	bool host_check = false; /* --check-config without =static */
	char *end;

	/*
	 * Process isolation (docs/security.md#process-isolation).  Not
	 * dumpable: no core dumps, no ptrace and a root-owned /proc/PID, for
	 * this process and the workers it forks, so that a handler running
	 * as the same user cannot read their memory or environment (execve()
	 * makes each handler dumpable again, for itself).  And the variables
	 * the config takes from the environment are read from a private copy
	 * and removed from the environment.
	 */
	prctl(PR_SET_DUMPABLE, 0);
	env_private();

	log_init("pgjobd", LOG_INFO, 0);
	while ((c = getopt_long(argc, argv, "c:w:d:Vh", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			path = optarg;
			break;
		case 'w':
			workers = (int)strtol(optarg, &end, 10);
			if (*end || workers < 1 || workers > 1024) {
				fprintf(stderr,
					"pgjobd: bad -w \"%s\" (1 to "
					"1024 workers)\n",
					optarg);
				return 2;
			}
			break;
		case 'd':
			/* Only the last -d counts: hide the ones before. */
			conninfo_scrub(database);
			database = optarg;
			break;
		case 'C':
			if (optarg && strcmp(optarg, "static") != 0) {
				fprintf(stderr,
					"pgjobd: bad --check-config=%s "
					"(only =static)\n",
					optarg);
				return 2;
			}
			check = 1;
			host_check = !optarg;
			break;
		case 'F':
			for (int i = 1; i < FP_COUNT; i++)
				printf("%s\t%s\n", failpoint_name(i),
				       failpoint_effect(i));
			return 0;
		case 'V':
			printf("pgjobd %s (schema version %d)\n",
			       PGJOBD_VERSION, migrate_latest());
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc || !path || !*path) {
		if (optind < argc)
			fprintf(stderr, "pgjobd: unexpected argument \"%s\"\n",
				argv[optind]);
		else
			fputs("pgjobd: no config: use -c FILE\n", stderr);
		usage(stderr);
		return 2;
	}

	/*
	 * ps shows argv to every local user, for the supervisor and every
	 * worker forked from it: keep a copy of -d and overwrite its secrets
	 * in argv before anything else runs (docs/security.md).
	 */
	char *conninfo = xstrdup(database);
	conninfo_scrub(database);

	int rc = 0;
	struct config_errors errs = {0};
	config_set_conninfo_check(db_conninfo_valid);
	struct config *cfg = config_load(path, &errs);
	/* The deep check: what the file names must exist on this host. */
	if (cfg && host_check && handler_check_config(cfg, &errs) > 0) {
		config_free(cfg);
		cfg = NULL;
	}
	if (!cfg) {
		for (size_t i = 0; i < errs.n; i++)
			fprintf(stderr, "%s\n", errs.msg[i]);
		config_errors_free(&errs);
		rc = EXIT_CONFIG;
	} else if (check) {
		printf("%s: ok\n", path);
		config_free(cfg);
	} else if (config_check_run_as(cfg, geteuid(), &errs) > 0) {
		/* user: and group: need root, which only the start can
		 * tell. */
		for (size_t i = 0; i < errs.n; i++)
			fprintf(stderr, "%s\n", errs.msg[i]);
		config_errors_free(&errs);
		config_free(cfg);
		rc = EXIT_CONFIG;
	} else {
		failpoint_init();
		rc = supervisor_run(path, cfg, workers, conninfo);
	}
	free(conninfo);
	return rc;
}
