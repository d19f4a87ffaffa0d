/*
 * pgjob web: the web console (src/web/, docs/console.md), in the
 * foreground until SIGINT or SIGTERM; and pgjob web --hash-password, which
 * makes a password hash for web.users.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/config.h"
#include "common/log.h"
#include "common/util.h"
#include "web/auth.h"
#include "web/web.h"

/* The longest password --hash-password takes. */
#define PASSWORD_MAX 1024

/*
 * Reads one line from stdin: the password, without its line end.  On a
 * terminal, asks for it on stderr and does not echo it.  Returns it
 * (caller wipes and frees) or NULL after printing why.
 */
static char *
read_password(void)
{
	struct termios t, quiet;
	int tty = isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &t) == 0;
	char *line = xmalloc(PASSWORD_MAX + 2);

	if (tty) {
		fputs("password: ", stderr);
		quiet = t;
		quiet.c_lflag &= ~(tcflag_t)ECHO;
		tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
	}
	char *got = fgets(line, PASSWORD_MAX + 2, stdin);
	if (tty) {
		tcsetattr(STDIN_FILENO, TCSAFLUSH, &t);
		fputc('\n', stderr);
	}
	size_t n = got ? strlen(line) : 0;
	const char *bad = NULL;
	if (n && line[n - 1] == '\n')
		line[--n] = '\0';
	else if (n > PASSWORD_MAX)
		bad = "a password is at most 1024 bytes";
	if (n && line[n - 1] == '\r')
		line[--n] = '\0';
	if (!bad && n == 0)
		bad = "no password: it is read from stdin, one line";
	if (bad) {
		cli_fail(CLI_EXIT_USAGE, "web: --hash-password: %s", bad);
		explicit_bzero(line, PASSWORD_MAX + 2);
		free(line);
		return NULL;
	}
	return line;
}

static int
hash_password(void)
{
	const char *err;
	char *pw = read_password();

	if (!pw)
		return CLI_EXIT_USAGE;
	char *hash = auth_hash_password(pw, &err);
	explicit_bzero(pw, strlen(pw));
	free(pw);
	if (!hash)
		return cli_fail(CLI_EXIT_FAILED, "web: %s", err);
	printf("%s\n", hash);
	free(hash);
	return 0;
}

int
cli_web_run(struct cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{"listen", required_argument, NULL, 'l'},
		{"hash-password", no_argument, NULL, 'H'},
		{NULL, 0, NULL, 0},
	};
	struct web_conf defaults = {.session_ttl_ms = 12 * 3600 * 1000LL};
	const struct web_conf *conf = cli->cfg ? &cli->cfg->web : &defaults;
	const char *listen_at = NULL;
	int hash = 0, c;

	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
		if (c == 'l')
			listen_at = optarg;
		else if (c == 'H')
			hash = 1;
		else
			return cli_bad_option("web", c, argv);
	}
	if (optind < argc)
		return cli_fail(CLI_EXIT_USAGE,
				"web: unexpected argument \"%s\"",
				argv[optind]);
	if (hash) {
		if (listen_at)
			return cli_fail(CLI_EXIT_USAGE, "web: %s",
					"--hash-password takes no --listen");
		return hash_password();
	}
	if (!listen_at)
		listen_at = conf->listen ? conf->listen : WEB_DEFAULT_LISTEN;

	/* A server's log: its start, logins, errors (at the config's level,
	 * info by default; pgjob's other commands only warn). */
	log_init("web", cli->cfg ? cli->cfg->log_level : LOG_INFO,
		 cli->cfg && cli->cfg->log_format == LOG_FORMAT_JSON);
	struct web_options o = {
		.listen = listen_at,
		.conninfo = cli->database ? cli->database
			    : cli->cfg	  ? cli->cfg->conninfo
					  : NULL,
		.conf = conf,
	};
	return web_run(&o);
}
