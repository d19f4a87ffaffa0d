/*
 * cli_top: `pgjob top [--interval 1s] [--once]`, a view that refreshes
 * every interval, like top(1): per kind, the jobs done (and gone dead) in
 * the last interval, from finished_at, and what runs and waits; then the
 * queues as `pgjob status` shows them.
 *
 * --once prints one frame without clearing the screen, for scripts and
 * tests; when stdout is not a terminal, the frames follow one another,
 * without escape codes (a log of them).  Otherwise SIGINT, SIGTERM or q on a
 * terminal ends it with exit 0. The signal handler only sets a flag and writes
 * to a pipe that the wait watches (so a signal is never lost between a check
 * and the wait), and puts the terminal back at once: a second signal then ends
 * the process the default way even if a query hangs.
 *
 * --json writes each frame as one JSON object on one line (JSON Lines: with
 * --once, one line), never an escape code.
 */
#include "cli/cli.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "common/util.h"
#include "common/duration.h"

#define TOP_MIN_INTERVAL_MS 100

/* Column numbers of KINDS_SQL. */
enum { K_KIND, K_DONE, K_DEAD, K_RUNNING, K_DUE };

/* $1: the interval in milliseconds.  Kinds with nothing due, running or
 * finished in the interval are left out. */
static const char KINDS_SQL[] =
	"select kind,"
	"  coalesce(sum(n) filter (where state = 'done'), 0)::bigint as done,"
	"  coalesce(sum(n) filter (where state = 'dead'), 0)::bigint as dead,"
	"  coalesce(sum(n) filter (where state = 'running'), 0)::bigint as "
	"running,"
	"  coalesce(sum(n) filter (where state = 'available'), 0)::bigint as "
	"due"
	" from (select kind, state, 1::bigint as n from pgjob.jobs"
	/* One arm, one partial index (schema 27): the unfinished
	 * jobs (jobs_claim_idx), the finished ones (jobs_finished_idx). */
	"  where (finished_at is null and coalesce(parents_left, 0) = 0"
	"    and (state = 'running' or run_at <= now()))"
	"   or (finished_at > now() - $1::bigint * interval '1 millisecond'"
	"    and state in ('done', 'dead'))"
	/* Plain jobs done: sql/upgrade/019_jobs_done.sql. */
	"  union all select kind, 'done', n from pgjob.done_since("
	"   now() - $1::bigint * interval '1 millisecond')) x"
	" group by kind order by kind";

/* The state that the signal handler shares with the loop. */
static volatile sig_atomic_t top_stop;
static int top_pipe[2] = {-1, -1};
static int top_tty;		   /* 1 while the terminal is in raw mode */
static struct termios top_termios; /* the terminal as we found it */

static void
restore_terminal(void)
{
	if (!top_tty)
		return;
	tcsetattr(0, TCSANOW, &top_termios);
	top_tty = 0;
}

static void
on_signal(int sig)
{
	int saved = errno;
	top_stop = 1;
	restore_terminal(); /* tcsetattr() is async-signal-safe */
	(void)!write(top_pipe[1], "", 1);
	errno = saved;
}

/* Keys without Enter and without echo, when stdin is a terminal. */
static void
raw_terminal(void)
{
	struct termios t;
	if (!isatty(0) || tcgetattr(0, &top_termios) < 0)
		return;
	t = top_termios;
	t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
	t.c_cc[VMIN] = 1;
	t.c_cc[VTIME] = 0;
	if (tcsetattr(0, TCSANOW, &t) == 0)
		top_tty = 1;
}

static int
setup_signals(void)
{
	struct sigaction sa;

	if (pipe2(top_pipe, O_NONBLOCK | O_CLOEXEC) < 0)
		return -1;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESETHAND; /* a second signal: the default action */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	return 0;
}

static void
print_kinds(const struct db_rows *res, int64_t interval_ms, FILE *f)
{
	static const char *const head[] = {"KIND", "DONE",    "DONE/S",
					   "DEAD", "RUNNING", "DUE"};
	struct cli_table t;

	if (db_rows_count(res) == 0) {
		fputs("kinds\n  nothing ran, runs or is due\n", f);
		return;
	}
	fputs("kinds\n", f);
	cli_table_init(&t, 6, head, "lrrrrr");
	for (int i = 0; i < db_rows_count(res); i++) {
		char rate[32];
		double done = strtod(db_rows_text(res, i, K_DONE), NULL);
		snprintf(rate, sizeof(rate), "%.1f",
			 done * 1000.0 / (double)interval_ms);
		const char *row[] = {db_rows_text(res, i, K_KIND),
				     db_rows_text(res, i, K_DONE),
				     rate,
				     db_rows_text(res, i, K_DEAD),
				     db_rows_text(res, i, K_RUNNING),
				     db_rows_text(res, i, K_DUE)};
		cli_table_add(&t, row);
	}
	cli_table_print(&t, f, "  ");
}

/*
 * A frame as JSON: {"time": ..., "interval_ms": 1000, "kinds": [{"kind",
 * "done", "done_per_s", "dead", "running", "due"}], "queues": [as status
 * --json]}.
 */
static void
print_json(const struct db_rows *now, const struct db_rows *kinds,
	   const struct db_rows *queues, int64_t interval_ms)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddItemToObject(o, "time", cli_json_value(now, 0, 0));
	cJSON_AddNumberToObject(o, "interval_ms", (double)interval_ms);
	cJSON *arr = cJSON_AddArrayToObject(o, "kinds");
	for (int i = 0; i < db_rows_count(kinds); i++) {
		cJSON *k = cJSON_CreateObject();
		cli_json_add_columns(k, kinds, i, K_KIND, K_DEAD);
		double done = strtod(db_rows_text(kinds, i, K_DONE), NULL);
		cJSON_AddNumberToObject(k, "done_per_s",
					done * 1000.0 / (double)interval_ms);
		cli_json_add_columns(k, kinds, i, K_DEAD, K_DUE + 1);
		cJSON_AddItemToArray(arr, k);
	}
	cJSON_AddItemToObject(o, "queues", cli_status_queues_json(queues));
	cli_json_print(o);
}

/*
 * One frame; clear: start from an empty screen; json: as one line of JSON.
 * 0, or -1 on error.
 */
static int
frame(struct db_conn *conn, int64_t interval_ms, const char *interval,
      int clear, int json)
{
	char ms[24], when[64];
	snprintf(ms, sizeof(ms), "%" PRId64, interval_ms);
	const char *p[] = {ms};
	struct db_rows *now = cli_exec(conn, "top", "select now()", 0, NULL);
	struct db_rows *kinds =
		now ? cli_exec(conn, "top", KINDS_SQL, 1, p) : NULL;
	struct db_rows *queues = kinds ? cli_status_queues(conn, 0) : NULL;
	if (queues && json) {
		print_json(now, kinds, queues, interval_ms);
		fflush(stdout);
	} else if (queues) {
		/* Home, then clear: the frame replaces the last one. */
		if (clear)
			fputs("\033[H\033[2J", stdout);
		printf("pgjob top  %s  interval %s%s\n\n",
		       cli_format_time(db_rows_text(now, 0, 0), when,
				       sizeof(when)),
		       interval, clear ? "  (q quits)" : "");
		print_kinds(kinds, interval_ms, stdout);
		fputc('\n', stdout);
		cli_status_print_queues(queues, stdout);
		fflush(stdout);
	}
	db_rows_free(now);
	db_rows_free(kinds);
	db_rows_free(queues);
	return queues ? 0 : -1;
}

/*
 * Waits up to ms for a signal or a key.  Returns 1 to stop, 0 to draw the
 * next frame.
 */
static int
wait_key(int64_t ms, int *stdin_open)
{
	struct pollfd fds[2] = {{top_pipe[0], POLLIN, 0},
				{*stdin_open ? 0 : -1, POLLIN, 0}};
	int64_t until = util_now_ms() + ms;

	while (!top_stop) {
		int64_t left = until - util_now_ms();
		if (left <= 0)
			return 0;
		int n = poll(fds, 2, (int)left);
		if (n < 0 && errno != EINTR)
			return 1;
		if (n <= 0 || !fds[1].revents)
			continue;
		char c;
		ssize_t r = read(0, &c, 1);
		if (r <= 0) {
			/* stdin is closed or not readable: only signals. */
			*stdin_open = 0;
			fds[1].fd = -1;
		} else if (c == 'q' || c == 'Q') {
			return 1;
		} else {
			return 0; /* any other key: refresh now */
		}
	}
	return 1;
}

static int
loop(struct db_conn *conn, int64_t interval_ms, const char *interval, int json)
{
	int stdin_open = 1, rc = 0;

	if (setup_signals() < 0)
		return cli_fail(CLI_EXIT_FAILED, "top: pipe: %s",
				strerror(errno));
	/* Into a pipe or a file, or as JSON: frames one after another, no
	 * escape codes. */
	int tty = !json && isatty(1);
	raw_terminal();
	if (tty)
		fputs("\033[?25l", stdout); /* hide the cursor */
	for (int n = 0; !top_stop; n++) {
		if (!tty && !json && n > 0)
			fputc('\n', stdout);
		if (frame(conn, interval_ms, interval, tty, json) < 0) {
			rc = CLI_EXIT_FAILED;
			break;
		}
		if (wait_key(interval_ms, &stdin_open))
			break;
	}
	if (tty)
		fputs("\033[?25h", stdout);
	fflush(stdout);
	restore_terminal();
	close(top_pipe[0]);
	close(top_pipe[1]);
	return rc;
}

static int
parse(int argc, char **argv, int64_t *ms, const char **text, int *once,
      int *json)
{
	static const struct option opts[] = {
		{"interval", required_argument, NULL, 'i'},
		{"once", no_argument, NULL, 'o'},
		{"json", no_argument, NULL, 'j'},
		{NULL, 0, NULL, 0},
	};
	const char *why;
	int c;

	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
		if (c == 'o' || c == 'j') {
			*(c == 'o' ? once : json) = 1;
			continue;
		}
		if (c != 'i')
			return cli_bad_option("top", c, argv);
		if (duration_parse(optarg, ms, &why) < 0)
			why = why ? why : "bad duration";
		else if (*ms < TOP_MIN_INTERVAL_MS || *ms > 86400 * 1000)
			why = "from 100ms to 1d";
		else
			why = NULL;
		if (why)
			return cli_fail(CLI_EXIT_USAGE,
					"top: bad --interval \"%s\" (%s)",
					optarg, why);
		*text = optarg;
	}
	if (optind < argc)
		return cli_fail(CLI_EXIT_USAGE,
				"top: unexpected argument \"%s\"",
				argv[optind]);
	return 0;
}

int
cli_top_run(struct cli *cli, int argc, char **argv)
{
	int64_t ms = 1000;
	const char *text = "1s";
	struct db_conn *conn;
	int once = 0, json = 0, rc;

	if ((rc = parse(argc, argv, &ms, &text, &once, &json)) != 0)
		return rc;
	if ((rc = cli_open(cli, &conn)) != 0)
		return rc;
	if (once)
		rc = frame(conn, ms, text, 0, json) < 0 ? CLI_EXIT_FAILED : 0;
	else
		rc = loop(conn, ms, text, json);
	db_close(conn);
	return rc;
}
