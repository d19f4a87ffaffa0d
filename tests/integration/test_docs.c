/*
 * Integration: the docs cannot drift.  Every command in the fenced code
 * blocks of README.md and the .md files of docs/ runs, or is in the
 * allow-list below with the reason why it cannot; every YAML block is a
 * config that `pgjobd --check-config` accepts; SQL blocks run.
 *
 * What is read, in each Markdown file, block by block:
 *
 * - ```sh, ```shell, ```bash: every line is a command (a trailing "\" joins
 *   the next line; "# ..." comments are dropped).
 * - any other block (```console, or none): lines that start with "$ " are
 *   commands; the lines after one are its output.  "[exit N]" there is the
 *   exit code it must end with (else 0), and an output line that starts
 *   with "pgjob: " or "pgjobd: " is an error message that must be on its
 *   stderr.  Other output is compared only in a block marked
 *   <!-- output --> (the whole output, stdout then stderr, with every run
 *   of digits made one "0" and every run of blanks one space, since ids,
 *   times, pids and column widths vary), but every schema version number
 *   in it must be the one this build ships, in any block that is not a
 *   fragment: a fragment is an excerpt, whose numbers are not checked.
 * - ```yaml: a whole config, written to a file and checked with
 *   `pgjobd -c FILE --check-config=static` (exit 0: the file; its commands
 *   and plugins are examples, not programs of this host), with each
 *   ${NAME} it uses set in the environment, and each ${file:/PATH} and
 *   ${credential:NAME} a file under the test's folder.
 * - ```sql: must be marked, on the line before the block, either
 *   <!-- run --> (run as it is against the test database, which must
 *   succeed) or <!-- fragment: why it cannot run --> (below).
 *
 * Every block runs, or says why it cannot: a block that is not a YAML
 * config, a <!-- run --> SQL block, a shell or console block with a
 * command that runs here, or a usage block (below) must carry
 * <!-- fragment: why it cannot run -->
 * on the line before it (parameters, a signature, a log line, a unit
 * drop-in, another program's code; the test it is checked by, if any).
 * A fragment is skipped whole, whatever its type; a bare <!-- fragment -->
 * is refused, as is a shell block whose every command is only in the
 * allow-list below: mark that block a fragment instead.
 *
 * A block with no type whose first line is a "pgjob ..." synopsis is a
 * usage block: its command and every --option must be in `pgjob --help`.
 *
 * Every link to a file of this repository (inline or a reference) names a
 * file that exists, and a heading of it when it has "#anchor".
 *
 * Commands whose first word is pgjob, pgjobd or psql run through bash,
 * after the placeholders of the table below are replaced, in an environment
 * where those names are the binaries of this build and libpq's PG*
 * variables name a fresh database that `pgjob migrate` made and
 * tests/fixtures/docs/setup.sql prepared; tests/fixtures/docs/jobs.sql
 * loads the jobs of docs/cli.md's examples before each file.  A pgjobd
 * without --check-config runs until it logs "ready:", then gets SIGTERM and
 * must exit 0.  Every other command must be in the allow-list, and every
 * entry of the allow-list must still be in the docs: a new command cannot
 * slip in unchecked, nor an old entry linger.  The allow-list is for a step
 * that cannot run inside a sequence that otherwise does (the install steps
 * of docs/operations.md); a block that runs nothing is a fragment.
 */
#include "testlib.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "db/migrate.h"

/*
 * The placeholders of the docs, and what stands in for them.  Replacements
 * are shell text: the environment that commands run in has
 *   DB              the test database's conninfo (README.md's "$DB")
 *   PGHOST, PGPORT, PGUSER, PGDATABASE   the same, for bare pgjob and psql
 *   PGTZ=UTC        as docs/cli.md's examples ran
 *   PATH            pgjob and pgjobd of this build first
 */
static const struct {
	const char *doc;
	const char *test;
} placeholders[] = {
	/* The file docs/operations.md installs as /etc/pgjobd/pgjobd.yaml;
	 * it names no database, so libpq's PG* variables apply. */
	{"/etc/pgjobd/pgjobd.yaml", "$PGJOBD_SOURCE/config/example.yaml"},
	{"host=db1 dbname=app user=pgjobd", "$DB"},
	/* docs/workflows.md's example, from the source tree. */
	{"examples/workflows/publish.json",
	 "$PGJOBD_SOURCE/examples/workflows/publish.json"},
	/* docs/cli.md's file of jobs for enqueue --file. */
	{"examples/enqueue.jsonl", "$PGJOBD_SOURCE/examples/enqueue.jsonl"},
	/* A database without schema pgjob (docs/cli.md, exit 78). */
	{"dbname=empty", "dbname=t_docs_empty"},
};

#define ROOT                                                                   \
	"changes the host as root; the units are verified by "                 \
	"test_systemd_units"
#define SYSTEMD "needs systemd as PID 1 and an installed unit"

/*
 * Commands that do not run here, each with the reason: steps of a sequence
 * whose other commands run (a block of nothing else is a fragment).
 */
static const struct {
	const char *command;
	const char *why;
} allowed[] = {
	{"sudo install -m 0640 -o root -g pgjobd "
	 "/usr/share/pgjobd/example.yaml /etc/pgjobd/pgjobd.yaml",
	 ROOT "; the file is config/example.yaml, which the commands here use"},
	{"sudo systemctl daemon-reload", SYSTEMD},
	{"sudo systemctl enable --now pgjobd", SYSTEMD},
	{"systemctl status pgjobd", SYSTEMD},
	{"journalctl -u pgjobd -f", SYSTEMD " (and follows the journal)"},
};
#define NALLOWED (sizeof(allowed) / sizeof(allowed[0]))

/* --- the Markdown ------------------------------------------------------ */

struct block {
	char *file;    /* "docs/cli.md" */
	int line;      /* of the opening fence, from 1 */
	char type[32]; /* the first word of the info string, or "" */
	char mark[16]; /* "run", "fragment", or "" */
	char why[256]; /* a marker's reason, after "WORD:", or "" */
	int nrun;      /* its commands that are not in the allow-list */
	int ncmds;     /* its commands */
	char **lines;  /* the content, without the fence's indentation */
	int *linenos;
	int n;
};

static struct block *blocks;
static int nblocks;
static char *files[64];
/* Each file's text: the parsed lines point into it until teardown. */
static char *texts[64];
static int nfiles;

/*
 * The word of "<!-- WORD -->" or "<!-- WORD: REASON -->" on line into b's
 * mark, the reason (trimmed) into b's why; both "" when line is no marker.
 */
static void
marker_of(const char *line, struct block *b)
{
	b->mark[0] = b->why[0] = '\0';
	line += strspn(line, " ");
	size_t n = strlen(line);
	while (n > 0 && (line[n - 1] == ' ' || line[n - 1] == '\r'))
		n--;
	if (strncmp(line, "<!--", 4) != 0 || n < 7 ||
	    strncmp(line + n - 3, "-->", 3) != 0)
		return;
	const char *end = line + n - 3, *p = line + 4;
	p += strspn(p, " ");
	size_t w = strcspn(p, " :-");
	if (w >= sizeof(b->mark))
		w = sizeof(b->mark) - 1;
	memcpy(b->mark, p, w);
	b->mark[w] = '\0';
	p += w;
	if (p >= end || *p != ':')
		return;
	for (p++; p < end && *p == ' '; p++)
		;
	while (end > p && end[-1] == ' ')
		end--;
	size_t r = (size_t)(end - p);
	if (r >= sizeof(b->why))
		r = sizeof(b->why) - 1;
	memcpy(b->why, p, r);
	b->why[r] = '\0';
}

static void
parse_markdown(const char *rel)
{
	char *text = t_read_file(t_src(rel));
	if (!text)
		fail_msg("cannot read %s", t_src(rel));
	texts[nfiles] = text;
	files[nfiles++] = xstrdup(rel);

	/* Split into lines in place. */
	int nl = 1;
	for (char *p = text; *p; p++)
		nl += *p == '\n';
	char **lines = xcalloc((size_t)nl, sizeof(char *));
	int n = 0;
	for (char *p = text; p;) {
		lines[n++] = p;
		p = strchr(p, '\n');
		if (p)
			*p++ = '\0';
	}

	struct block *b = NULL;
	size_t indent = 0;
	for (int i = 0; i < n; i++) {
		size_t sp = strspn(lines[i], " ");
		const char *l = lines[i] + sp;
		if (strncmp(l, "```", 3) == 0) {
			if (b) {
				b = NULL;
				continue;
			}
			blocks = xrealloc(blocks, (size_t)(nblocks + 1) *
							  sizeof(*blocks));
			b = &blocks[nblocks++];
			memset(b, 0, sizeof(*b));
			b->file = files[nfiles - 1];
			b->line = i + 1;
			l += 3;
			size_t w = strcspn(l, " \r{");
			if (w >= sizeof(b->type))
				w = sizeof(b->type) - 1;
			memcpy(b->type, l, w);
			if (i > 0)
				marker_of(lines[i - 1], b);
			b->lines = xcalloc((size_t)n, sizeof(char *));
			b->linenos = xcalloc((size_t)n, sizeof(int));
			indent = sp;
			continue;
		}
		if (b) {
			b->lines[b->n] = lines[i] + (sp < indent ? sp : indent);
			b->linenos[b->n++] = i + 1;
		}
	}
	if (b)
		fail_msg("%s:%d: the block has no closing fence", rel, b->line);
	free(lines); /* the blocks point into text, which stays */
}

static int
by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

static int
is_markdown(const struct dirent *d)
{
	size_t n = strlen(d->d_name);
	return n > 3 && strcmp(d->d_name + n - 3, ".md") == 0;
}

static void
parse_docs(void)
{
	struct dirent **names;
	parse_markdown("README.md");
	int n = scandir(t_src("docs"), &names, is_markdown, by_name);
	if (n < 0)
		fail_msg("cannot list %s: %s", t_src("docs"), strerror(errno));
	if (n > 60)
		fail_msg("more Markdown files than this test keeps");
	for (int i = 0; i < n; i++) {
		char rel[512];
		snprintf(rel, sizeof(rel), "docs/%s", names[i]->d_name);
		parse_markdown(rel);
		free(names[i]);
	}
	free(names);
}

static int
is_type(const struct block *b, const char *const *types)
{
	for (; *types; types++)
		if (strcmp(b->type, *types) == 0)
			return 1;
	return 0;
}

static const char *const sh_types[] = {"sh", "shell", "bash", NULL};
static const char *const yaml_types[] = {"yaml", "yml", NULL};
static const char *const sql_types[] = {"sql", NULL};

/* --- commands ---------------------------------------------------------- */

struct cmd {
	struct block *block; /* the block it is in */
	const char *file;
	int line;
	char *text; /* comment dropped, blanks outside quotes folded */
	int want;   /* the exit code it must end with */
	char *errors[8];
	int nerrors;
	/* The output the doc shows under it, "[exit N]" left out. */
	const char **shown;
	int *shown_lines;
	int nshown;
};

/*
 * A shell line as the test compares and runs it: without its comment (an
 * unquoted "#" at the start or after a blank), runs of blanks outside
 * quotes made one space, ends trimmed.  A new string.
 */
static char *
shell_line(const char *s)
{
	char *out = xcalloc(strlen(s) + 1, 1), *o = out;
	char quote = 0;
	for (const char *p = s; *p; p++) {
		if (quote) {
			*o++ = *p;
			if (*p == quote)
				quote = 0;
			else if (*p == '\\' && quote == '"' && p[1])
				*o++ = *++p;
			continue;
		}
		if (*p == '#' && (o == out || o[-1] == ' '))
			break;
		if (*p == ' ' || *p == '\t') {
			if (o > out && o[-1] != ' ')
				*o++ = ' ';
			continue;
		}
		if (*p == '\'' || *p == '"')
			quote = *p;
		*o++ = *p;
		if (*p == '\\' && p[1])
			*o++ = *++p;
	}
	while (o > out && o[-1] == ' ')
		o--;
	*o = '\0';
	return out;
}

/* Line i of b and the lines a trailing backslash joins to it; advances *i
 * to the last line used.  A new string. */
static char *
joined(const struct block *b, int *i, const char *first)
{
	struct buf cmd = {0};
	const char *l = first;
	for (;;) {
		size_t n = strlen(l);
		while (n > 0 && (l[n - 1] == ' ' || l[n - 1] == '\r'))
			n--;
		int more = n > 0 && l[n - 1] == '\\' && *i + 1 < b->n;
		buf_append(&cmd, l, more ? n - 1 : n);
		if (!more)
			break;
		buf_append(&cmd, " ", 1);
		l = b->lines[++*i];
	}
	char *s = shell_line(cmd.data ? cmd.data : "");
	buf_free(&cmd);
	return s;
}

static struct cmd *cmds;
static int ncmds;

static struct cmd *
add_cmd(struct block *b, int i, char *text)
{
	cmds = xrealloc(cmds, (size_t)(ncmds + 1) * sizeof(*cmds));
	struct cmd *c = &cmds[ncmds++];
	memset(c, 0, sizeof(*c));
	b->ncmds++;
	c->block = b;
	c->file = b->file;
	c->line = b->linenos[i];
	c->text = text;
	return c;
}

static void
extract_commands(void)
{
	for (int k = 0; k < nblocks; k++) {
		struct block *b = &blocks[k];
		int sh = is_type(b, sh_types);
		struct cmd *c = NULL;
		if (strcmp(b->mark, "fragment") == 0)
			continue; /* test_markers checks its reason */
		for (int i = 0; i < b->n; i++) {
			const char *l = b->lines[i];
			if (sh) {
				const char *t = l + strspn(l, " \t");
				if (*t == '\0' || *t == '#')
					continue;
				add_cmd(b, i, joined(b, &i, t));
				continue;
			}
			if (strncmp(l, "$ ", 2) == 0) {
				int at = i;
				c = add_cmd(b, at, joined(b, &i, l + 2));
				continue;
			}
			if (!c)
				continue;
			/* The output of the command above. */
			int code;
			char end;
			if (sscanf(l, "[exit %d%c", &code, &end) == 2 &&
			    end == ']') {
				c->want = code;
				continue;
			}
			if ((strncmp(l, "pgjob: ", 7) == 0 ||
			     strncmp(l, "pgjobd: ", 8) == 0) &&
			    c->nerrors < 8)
				c->errors[c->nerrors++] = xstrdup(l);
			if (!c->shown) {
				c->shown = xcalloc((size_t)b->n,
						   sizeof(*c->shown));
				c->shown_lines =
					xcalloc((size_t)b->n, sizeof(int));
			}
			c->shown_lines[c->nshown] = b->linenos[i];
			c->shown[c->nshown++] = l;
		}
	}
}

/* --- the test database and environment ---------------------------------- */

static char *ci;
static int nrun, nconfigs, nsql, nallowed, nproblems;

/* Reports a problem and carries on, so that one run lists them all. */
static void problem(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
problem(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("docs: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	nproblems++;
}

static void
check_problems(void)
{
	int n = nproblems;
	nproblems = 0;
	if (n)
		fail_msg("%d problems with the docs, listed above", n);
}

static void
load_sql(const char *fixture)
{
	char rel[256];
	snprintf(rel, sizeof(rel), "tests/fixtures/docs/%s", fixture);
	char *sql = t_read_file(t_src(rel));
	if (!sql)
		fail_msg("cannot read %s", t_src(rel));
	PGconn *c = t_connect(ci);
	t_exec(c, "%s", sql);
	PQfinish(c);
	free(sql);
}

/* The environment of the commands (see the top of the file). */
static void
set_environment(void)
{
	PQconninfoOption *opts = PQconninfoParse(ci, NULL);
	if (!opts)
		fail_msg("cannot parse %s", ci);
	static const char *const keys[][2] = {{"host", "PGHOST"},
					      {"port", "PGPORT"},
					      {"user", "PGUSER"},
					      {"dbname", "PGDATABASE"}};
	for (PQconninfoOption *o = opts; o->keyword; o++)
		for (size_t i = 0; i < 4; i++)
			if (o->val && strcmp(o->keyword, keys[i][0]) == 0)
				setenv(keys[i][1], o->val, 1);
	PQconninfoFree(opts);
	setenv("DB", ci, 1);
	setenv("PGTZ", "UTC", 1);
	unsetenv("PGJOBD_CONFIG");

	char bin[4096];
	snprintf(bin, sizeof(bin), "%s/bin", t_tmpdir());
	if (mkdir(bin, 0755) < 0 && errno != EEXIST)
		fail_msg("mkdir %s: %s", bin, strerror(errno));
	const char *names[] = {"pgjob", "pgjobd"};
	for (size_t i = 0; i < 2; i++) {
		char link[4200];
		snprintf(link, sizeof(link), "%s/%s", bin, names[i]);
		unlink(link);
		if (symlink(t_bin(names[i]), link) < 0)
			fail_msg("symlink %s: %s", link, strerror(errno));
	}
	const char *path = getenv("PATH");
	char *newpath =
		xasprintf("%s:%s", bin, path && *path ? path : "/usr/bin:/bin");
	setenv("PATH", newpath, 1);
	free(newpath);
}

static int
setup(void **state)
{
	t_db_create("t_docs_empty");
	ci = t_db_migrated("t_docs");
	load_sql("setup.sql");
	set_environment();
	parse_docs();
	extract_commands();
	return 0;
}

static int
teardown(void **state)
{
	printf("docs: %d commands run, %d configs checked, %d SQL blocks run, "
	       "%d allowed without running\n",
	       nrun, nconfigs, nsql, nallowed);
	free(ci);
	for (int i = 0; i < nfiles; i++) {
		free(texts[i]);
		free(files[i]);
	}
	return 0;
}

/* --- running ------------------------------------------------------------ */

/* text with every placeholder replaced; a new string. */
static char *
substitute(const char *text)
{
	char *s = xstrdup(text);
	for (size_t i = 0; i < sizeof(placeholders) / sizeof(placeholders[0]);
	     i++) {
		const char *from = placeholders[i].doc,
			   *to = placeholders[i].test;
		char *at;
		size_t from_pos = 0;
		/* Past each replacement: a replacement may contain what it
		 * replaces (a path made absolute). */
		while ((at = strstr(s + from_pos, from)) != NULL) {
			char *t = xasprintf("%.*s%s%s", (int)(at - s), s, to,
					    at + strlen(from));
			from_pos = (size_t)(at - s) + strlen(to);
			free(s);
			s = t;
		}
	}
	return s;
}

static int
first_word_is(const char *text, const char *word)
{
	size_t n = strlen(word);
	return strncmp(text, word, n) == 0 && (text[n] == ' ' || !text[n]);
}

/* Runs a pgjobd that does not exit by itself: until "ready:", then
 * SIGTERM.  Returns its exit code, or -1 (reported) if it never got ready. */
static int
run_daemon(const struct cmd *c, const char *text)
{
	static int seq;
	char name[64];
	snprintf(name, sizeof(name), "docs-daemon-%d", ++seq);
	const char *logpath = t_log(name);
	char *script = xasprintf("exec %s", text);
	const char *argv[] = {"bash", "-c", script, NULL};
	pid_t pid = t_spawn(logpath, NULL, argv);
	free(script);
	int ready = 0;
	for (int i = 0; i < 300 && !ready && t_alive(pid); i++) {
		ready = t_count_in_file(logpath, "ready:") > 0;
		if (!ready)
			t_sleep_ms(50);
	}
	int status = t_stop(pid, SIGTERM, 30);
	if (!ready) {
		char *text_log = t_read_file(logpath);
		problem("%s:%d: %s: never logged \"ready:\" (exit %d):\n%s",
			c->file, c->line, c->text, status,
			text_log ? text_log : "");
		free(text_log);
		return -1;
	}
	return status;
}

/* s as the comparison sees it: each run of digits one "0", each run of
 * blanks one space, no blank at either end.  A new string. */
static char *
masked(const char *s, size_t n)
{
	char *out = xcalloc(n + 1, 1), *o = out;
	for (size_t i = 0; i < n; i++) {
		char ch = s[i];
		if (isdigit((unsigned char)ch)) {
			*o++ = '0';
			while (i + 1 < n && isdigit((unsigned char)s[i + 1]))
				i++;
			continue;
		}
		if (ch == ' ' || ch == '\t') {
			if (o > out && o[-1] != ' ')
				*o++ = ' ';
			continue;
		}
		*o++ = ch;
	}
	while (o > out && o[-1] == ' ')
		o--;
	*o = '\0';
	return out;
}

/* The n-th line (from 0) of text, masked, or NULL past its end. */
static char *
masked_line(const char *text, int n)
{
	const char *p = text;
	for (; n > 0 && p && *p; n--) {
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	if (!p || !*p)
		return NULL;
	return masked(p, strcspn(p, "\n"));
}

/*
 * A command of a block marked <!-- output -->: what the doc shows under it
 * is what it printed (stdout, then stderr), line for line, with numbers
 * and blanks made alike (masked()).
 */
static void
compare_output(const struct cmd *c, const struct t_run *r)
{
	char *all = xasprintf("%s%s", r->out, r->err);
	int i = 0;
	for (;; i++) {
		char *got = masked_line(all, i);
		char *want = i < c->nshown
				     ? masked(c->shown[i], strlen(c->shown[i]))
				     : NULL;
		int same = (!got && !want) ||
			   (got && want && strcmp(got, want) == 0);
		if (!same)
			problem("%s:%d: %s: the doc shows \"%s\", it printed "
				"\"%s\" (numbers and blanks masked)\nits "
				"output was:\n%s",
				c->file,
				i < c->nshown ? c->shown_lines[i] : c->line,
				c->text, want ? want : "(nothing more)",
				got ? got : "(nothing more)", all);
		free(got);
		free(want);
		if (!same || i >= c->nshown)
			break;
	}
	free(all);
}

static void
run_command(const struct cmd *c)
{
	char *text = substitute(c->text);
	if (strstr(text, "/etc/pgjobd/") || strstr(text, "dbname=app")) {
		problem("%s:%d: %s: a placeholder without a test value: add "
			"it to the table in test_docs.c",
			c->file, c->line, c->text);
		free(text);
		return;
	}
	nrun++;
	if (first_word_is(text, "pgjobd") && !strstr(text, "--check-config") &&
	    !strstr(text, "--help")) {
		int status = run_daemon(c, text);
		if (status >= 0 && status != c->want)
			problem("%s:%d: %s: exit %d after SIGTERM, not %d",
				c->file, c->line, c->text, status, c->want);
		free(text);
		return;
	}
	char *script = xasprintf("set -o pipefail; %s", text);
	const char *argv[] = {"bash", "-c", script, NULL};
	struct t_run r;
	t_run(&r, 60, NULL, argv);
	if (r.status != c->want)
		problem("%s:%d: %s: exit %d, the doc says %d\n(ran: %s)\n"
			"stderr: %s",
			c->file, c->line, c->text, r.status, c->want, text,
			r.err);
	for (int i = 0; i < c->nerrors; i++)
		if (!strstr(r.err, c->errors[i]))
			problem("%s:%d: %s: stderr lacks the doc's \"%s\"; "
				"it was: %s",
				c->file, c->line, c->text, c->errors[i], r.err);
	if (strcmp(c->block->mark, "output") == 0)
		compare_output(c, &r);
	t_run_free(&r);
	free(script);
	free(text);
}

/* The index of c in the allow-list, or NALLOWED. */
static size_t
allowed_index(const struct cmd *c)
{
	size_t a;
	for (a = 0; a < NALLOWED; a++)
		if (strcmp(c->text, allowed[a].command) == 0)
			break;
	return a;
}

/* Every command of the docs runs, or is allowed with a reason. */
static void
test_commands(void **state)
{
	int used[NALLOWED] = {0};
	const char *loaded = NULL;
	for (int i = 0; i < ncmds; i++) {
		const struct cmd *c = &cmds[i];
		size_t a = allowed_index(c);
		if (a < NALLOWED) {
			used[a]++;
			nallowed++;
			continue;
		}
		if (!first_word_is(c->text, "pgjob") &&
		    !first_word_is(c->text, "pgjobd") &&
		    !first_word_is(c->text, "psql")) {
			problem("%s:%d: \"%s\" is neither run nor allowed: run "
				"it, or add it to the allow-list of "
				"test_docs.c with the reason",
				c->file, c->line, c->text);
			continue;
		}
		if (loaded != c->file) {
			load_sql("jobs.sql");
			loaded = c->file;
		}
		run_command(c);
	}
	for (size_t a = 0; a < NALLOWED; a++)
		if (!used[a])
			problem("the allow-list's \"%s\" is in no doc: remove "
				"it",
				allowed[a].command);
	check_problems();
}

/*
 * A usage block: no type, its first line a "pgjob ..." or "pgjobd ..."
 * synopsis, no "$ " command in it.  test_usage checks it against --help.
 */
static int
is_usage(const struct block *b)
{
	if (b->type[0] || b->n == 0 || b->ncmds > 0)
		return 0;
	return first_word_is(b->lines[0], "pgjob") ||
	       first_word_is(b->lines[0], "pgjobd");
}

/*
 * Every block runs or is a fragment with its reason, and a marker is one
 * that means something before its block.  What a block runs: a YAML block
 * is checked as a config, a <!-- run --> SQL block runs (test_sql reports
 * an unmarked one), a shell or console block runs its commands that are
 * not in the allow-list, a usage block is checked against --help.
 */
static void
test_markers(void **state)
{
	for (int i = 0; i < ncmds; i++)
		if (allowed_index(&cmds[i]) == NALLOWED)
			cmds[i].block->nrun++;
	for (int k = 0; k < nblocks; k++) {
		const struct block *b = &blocks[k];
		int yaml = is_type(b, yaml_types), sql = is_type(b, sql_types);
		const char *type = b->type[0] ? b->type : "(no type)";
		if (strcmp(b->mark, "fragment") == 0) {
			if (!b->why[0])
				problem("%s:%d: a fragment without its reason: "
					"<!-- fragment: why it cannot run -->",
					b->file, b->line);
			continue;
		}
		if (strcmp(b->mark, "run") == 0 && !sql)
			problem("%s:%d: <!-- run --> means nothing before a "
				"```%s block",
				b->file, b->line, type);
		else if (strcmp(b->mark, "output") == 0 &&
			 (yaml || sql || is_type(b, sh_types) || b->ncmds == 0))
			problem("%s:%d: <!-- output --> means something only "
				"before a block of \"$ \" commands and their "
				"output",
				b->file, b->line);
		else if (b->mark[0] && strcmp(b->mark, "run") != 0 &&
			 strcmp(b->mark, "output") != 0)
			problem("%s:%d: <!-- %s --> is no marker: use <!-- run "
				"-->, <!-- output --> or <!-- fragment: why it "
				"cannot run -->",
				b->file, b->line, b->mark);
		else if (yaml || sql || is_usage(b))
			continue;
		else if (b->ncmds > 0 && b->nrun == 0)
			problem("%s:%d: the ```%s block runs nothing (its "
				"commands are all in the allow-list): mark it "
				"<!-- fragment: why it cannot run --> and take "
				"its commands out of the allow-list",
				b->file, b->line, type);
		else if (b->ncmds == 0)
			problem("%s:%d: the ```%s block has no command to "
				"run: mark it <!-- fragment: why it cannot run "
				"-->",
				b->file, b->line, type);
	}
	check_problems();
}

/*
 * Every schema version that a command's output shows, in a block that is
 * not a fragment, is the one this build ships: such output is what the
 * command prints today (a fragment is an excerpt, not checked).  Prose may
 * name older versions ("since schema version 8").
 */
static void
test_versions(void **state)
{
	static const char *const before[] = {
		"schema version ", "schema version: ",	  "applies up to ",
		"(version ",	   "\"schema_version\":", "\"latest\":",
		"{\"version\":",
	};
	int seen = 0;
	for (int i = 0; i < ncmds; i++) {
		const struct cmd *c = &cmds[i];
		for (int k = 0; k < c->nshown; k++)
			for (size_t b = 0; b < sizeof(before) / sizeof(*before);
			     b++) {
				const char *l = c->shown[k];
				size_t n = strlen(before[b]);
				for (const char *p = l;
				     (p = strstr(p, before[b])) != NULL;
				     p += n) {
					if (!isdigit((unsigned char)p[n]))
						continue;
					seen++;
					int v = atoi(p + n);
					if (v != migrate_latest())
						problem("%s:%d: %s: the output "
							"shows schema version "
							"%d; this build's is "
							"%d",
							c->file,
							c->shown_lines[k],
							c->text, v,
							migrate_latest());
				}
			}
	}
	/* docs/cli.md shows pgjob -V and migrate --status. */
	assert_true(seen >= 2);
	check_problems();
}

/* Writes the secret file at path (and its folders) with "docs-value". */
static void
secret_file(const char *path)
{
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s", path);
	for (char *p = dir + 1; (p = strchr(p, '/')) != NULL; p++) {
		*p = '\0';
		if (mkdir(dir, 0700) < 0 && errno != EEXIST)
			fail_msg("mkdir %s: %s", dir, strerror(errno));
		*p = '/';
	}
	t_write_file(path, "docs-value\n");
	chmod(path, 0600);
}

/*
 * Appends line to text with the secrets it names made available: each
 * ${file:/PATH} now names t_tmpdir()/PATH, written, and each
 * ${credential:NAME} a file of CREDENTIALS_DIRECTORY, t_tmpdir()/credentials.
 */
static void
secret_refs(struct buf *text, const char *line)
{
	const char *p = line, *q;
	while ((q = strstr(p, "${")) != NULL) {
		size_t n = strcspn(q, "}");
		char path[4096];
		buf_append(text, p, (size_t)(q - p));
		if (!strncmp(q, "${file:/", 8) && q[n] == '}') {
			snprintf(path, sizeof(path), "%s%.*s", t_tmpdir(),
				 (int)(n - 7), q + 7);
			secret_file(path);
			buf_appendf(text, "${file:%s}", path);
			p = q + n + 1;
			continue;
		}
		if (!strncmp(q, "${credential:", 13) && q[n] == '}') {
			snprintf(path, sizeof(path), "%s/credentials/%.*s",
				 t_tmpdir(), (int)(n - 13), q + 13);
			secret_file(path);
		}
		buf_append(text, q, 2);
		p = q + 2;
	}
	buf_appendf(text, "%s\n", p);
}

/* Every YAML block that is not marked a fragment is a valid config. */
static void
test_configs(void **state)
{
	for (int k = 0; k < nblocks; k++) {
		const struct block *b = &blocks[k];
		if (!is_type(b, yaml_types) || strcmp(b->mark, "fragment") == 0)
			continue;
		struct buf text = {0};
		for (int i = 0; i < b->n; i++)
			secret_refs(&text, b->lines[i]);
		char path[4096];
		snprintf(path, sizeof(path), "%s/%s-%d.yaml", t_tmpdir(),
			 strrchr(b->file, '/') ? strrchr(b->file, '/') + 1
					       : b->file,
			 b->line);
		t_write_file(path, text.data ? text.data : "");

		/* Each ${NAME} it uses, set. */
		char *env[32];
		int nenv = 0;
		for (const char *p = text.data;
		     p && nenv < 30 && (p = strstr(p, "${")) != NULL; p += 2) {
			size_t n = strspn(p + 2, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
						 "abcdefghijklmnopqrstuvwxyz"
						 "0123456789_");
			if (n > 0 && p[2 + n] == '}')
				env[nenv++] = xasprintf("%.*s=docs-value",
							(int)n, p + 2);
		}
		env[nenv++] = xasprintf("CREDENTIALS_DIRECTORY=%s/credentials",
					t_tmpdir());
		env[nenv] = NULL;

		/* The file alone: its commands and plugins are examples, not
		 * programs of this host. */
		const char *argv[] = {t_bin("pgjobd"), "-c", path,
				      "--check-config=static", NULL};
		struct t_run r;
		t_run(&r, 30, (const char *const *)env, argv);
		nconfigs++;
		if (r.status != 0)
			problem("%s:%d: the config does not validate (exit "
				"%d); mark it <!-- fragment: why --> if it is "
				"not a whole config:\n%s",
				b->file, b->line, r.status, r.err);
		t_run_free(&r);
		for (int i = 0; i < nenv; i++)
			free(env[i]);
		buf_free(&text);
	}
	check_problems();
}

/* SQL blocks marked <!-- run --> run; every other one says why not. */
static void
test_sql(void **state)
{
	const char *loaded = NULL;
	for (int k = 0; k < nblocks; k++) {
		const struct block *b = &blocks[k];
		if (!is_type(b, sql_types))
			continue;
		if (strcmp(b->mark, "fragment") == 0)
			continue;
		if (strcmp(b->mark, "run") != 0) {
			problem("%s:%d: mark the SQL <!-- run --> (the test "
				"runs it) or <!-- fragment: why it cannot run "
				"-->",
				b->file, b->line);
			continue;
		}
		if (loaded != b->file) {
			load_sql("jobs.sql");
			loaded = b->file;
		}
		struct buf sql = {0};
		for (int i = 0; i < b->n; i++)
			buf_appendf(&sql, "%s\n", b->lines[i]);
		PGconn *c = t_connect(ci);
		PGresult *res = PQexec(c, sql.data ? sql.data : "");
		ExecStatusType st = PQresultStatus(res);
		nsql++;
		if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
			problem("%s:%d: the SQL fails: %s", b->file, b->line,
				PQresultErrorMessage(res));
		PQclear(res);
		PQfinish(c);
		buf_free(&sql);
	}
	check_problems();
}

/* Whether help has word as a whole word (not the start of a longer one). */
static int
has_word(const char *help, const char *word)
{
	size_t n = strlen(word);
	for (const char *p = help; (p = strstr(p, word)) != NULL; p++) {
		char after = p[n];
		int before_ok = p == help || !(isalnum((unsigned char)p[-1]) ||
					       p[-1] == '-');
		if (before_ok && !isalnum((unsigned char)after) &&
		    after != '-' && after != '_')
			return 1;
	}
	return 0;
}

/* The stdout of `prog [command] --help`, which must succeed; a new string. */
static char *
help_of(const char *prog, const char *command)
{
	const char *argv[] = {t_bin(prog), command ? command : "--help",
			      command ? "--help" : NULL, NULL};
	struct t_run r;
	t_run(&r, 30, NULL, argv);
	char *out = r.status == 0 ? xstrdup(r.out) : NULL;
	if (!out)
		problem("%s %s --help: exit %d: %s", prog,
			command ? command : "", r.status, r.err);
	t_run_free(&r);
	return out;
}

/*
 * Every usage block names commands and options that the program's --help
 * has: a command (the word after "pgjob" on a line that starts with it)
 * must be in `pgjob --help`, and every --option of the block in the help
 * of the block's first command (`pgjob COMMAND --help`, which has the
 * global options too).  A removed or renamed one fails here.
 */
static void
test_usage(void **state)
{
	const char *prog[2] = {"pgjob", "pgjobd"};
	char *help[2] = {help_of(prog[0], NULL), help_of(prog[1], NULL)};
	if (!help[0] || !help[1])
		fail_msg("no --help to check the usage blocks against");
	for (int k = 0; k < nblocks; k++) {
		const struct block *b = &blocks[k];
		if (!is_usage(b) || strcmp(b->mark, "fragment") == 0)
			continue;
		int d = first_word_is(b->lines[0], "pgjobd");
		/* The block's own command, if its first line names one. */
		char first[64] = "";
		const char *w0 = b->lines[0] + strlen(prog[d]) + 1;
		size_t n0 = strcspn(w0, " ");
		if (!d && n0 > 0 && n0 < sizeof(first) && *w0 != '[' &&
		    *w0 != '-')
			memcpy(first, w0, n0), first[n0] = '\0';
		char *own = first[0] && has_word(help[d], first)
				    ? help_of(prog[d], first)
				    : NULL;
		const char *opts = own ? own : help[d];
		for (int i = 0; i < b->n; i++) {
			const char *l = b->lines[i];
			if (first_word_is(l, prog[d])) {
				char word[64];
				const char *w = l + strlen(prog[d]) + 1;
				size_t n = strcspn(w, " ");
				if (n < sizeof(word) && *w != '[' &&
				    *w != '-') {
					memcpy(word, w, n);
					word[n] = '\0';
					if (!has_word(help[d], word))
						problem("%s:%d: %s has no "
							"command \"%s\" (see "
							"%s --help)",
							b->file, b->linenos[i],
							prog[d], word, prog[d]);
				}
			}
			for (const char *p = l;
			     (p = strstr(p, "--")) != NULL;) {
				char opt[64];
				size_t n = 2 + strspn(p + 2,
						      "abcdefghijklmnopqrstu"
						      "vwxyz-");
				if (n > 2 && n < sizeof(opt)) {
					memcpy(opt, p, n);
					opt[n] = '\0';
					if (!has_word(opts, opt))
						problem("%s:%d: %s%s%s has no "
							"option %s (see its "
							"--help)",
							b->file, b->linenos[i],
							prog[d], own ? " " : "",
							own ? first : "", opt);
				}
				p += n;
			}
		}
		free(own);
	}
	free(help[0]);
	free(help[1]);
	check_problems();
}

/* --- links ------------------------------------------------------------- */

/*
 * The anchor GitHub gives a heading: lower case, without what is neither a
 * letter, a digit, a blank, "-" nor "_" (bytes of UTF-8 sequences kept),
 * blanks made "-".  Into out, of size bytes.
 */
static void
heading_slug(const char *heading, char *out, size_t size)
{
	size_t n = 0;
	for (const unsigned char *p = (const unsigned char *)heading;
	     *p && n + 1 < size; p++) {
		if (*p >= 'A' && *p <= 'Z')
			out[n++] = (char)(*p - 'A' + 'a');
		else if ((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
			 *p == '-' || *p == '_' || *p >= 0x80)
			out[n++] = (char)*p;
		else if (*p == ' ')
			out[n++] = '-';
	}
	out[n] = '\0';
}

/* Whether the Markdown file rel (from the source root) has a heading whose
 * anchor is anchor ("top" always exists). */
static int
has_anchor(const char *rel, const char *anchor)
{
	if (strcmp(anchor, "top") == 0)
		return 1;
	char *text = t_read_file(t_src(rel));
	if (!text)
		return 0;
	int found = 0, fenced = 0;
	char seen[128][128];
	int nseen = 0;
	for (char *l = strtok(text, "\n"); l && !found;
	     l = strtok(NULL, "\n")) {
		const char *t = l + strspn(l, " ");
		if (strncmp(t, "```", 3) == 0)
			fenced = !fenced;
		if (fenced || l[0] != '#')
			continue;
		char slug[128], numbered[160];
		heading_slug(l + strspn(l, "#") +
				     strspn(l + strspn(l, "#"), " "),
			     slug, sizeof(slug));
		/* A repeated heading gets -1, -2... */
		int times = 0;
		for (int i = 0; i < nseen; i++)
			times += strcmp(seen[i], slug) == 0;
		if (nseen < 128)
			snprintf(seen[nseen++], sizeof(seen[0]), "%s", slug);
		if (times)
			snprintf(numbered, sizeof(numbered), "%s-%d", slug,
				 times);
		else
			snprintf(numbered, sizeof(numbered), "%s", slug);
		found = strcmp(numbered, anchor) == 0;
	}
	free(text);
	return found;
}

/* Checks one link target of the file rel: a file of the source tree that
 * exists, and a heading of it when the target names one. */
static void
check_link(const char *rel, int line, const char *target, size_t n)
{
	char t[1024];
	if (n >= sizeof(t) || n == 0)
		return;
	memcpy(t, target, n);
	t[n] = '\0';
	if (strstr(t, "://") || strncmp(t, "mailto:", 7) == 0)
		return;
	char *hash = strchr(t, '#');
	if (hash)
		*hash++ = '\0';
	char path[1200];
	if (!t[0]) {
		snprintf(path, sizeof(path), "%s", rel);
	} else {
		const char *slash = strrchr(rel, '/');
		int dir = slash ? (int)(slash - rel) : 0;
		snprintf(path, sizeof(path), "%.*s%s%s", dir, rel,
			 dir ? "/" : "", t);
	}
	/* "docs/../examples/x" as the source tree has it. */
	char *up;
	while ((up = strstr(path, "/../")) != NULL) {
		char *start = up;
		while (start > path && start[-1] != '/')
			start--;
		memmove(start, up + 4, strlen(up + 4) + 1);
	}
	struct stat st;
	if (stat(t_src(path), &st) < 0) {
		problem("%s:%d: the link to %s names no file of the source "
			"tree (%s)",
			rel, line, target[0] == '#' ? rel : t, path);
		return;
	}
	size_t pl = strlen(path);
	if (hash && *hash && pl > 3 && strcmp(path + pl - 3, ".md") == 0 &&
	    !has_anchor(path, hash))
		problem("%s:%d: the link to %s#%s names no heading of %s", rel,
			line, t, hash, path);
}

/*
 * Every link of the docs to a file of this repository, inline ("](x)") or
 * a reference ("[label]: x"), names a file that exists, and a heading of it
 * when it has "#anchor": a page cannot cite what is not there.
 */
static void
test_links(void **state)
{
	for (int f = 0; f < nfiles; f++) {
		char *text = t_read_file(t_src(files[f]));
		if (!text)
			fail_msg("cannot read %s", files[f]);
		int line = 0, fenced = 0;
		for (char *l = text, *next; l; l = next) {
			next = strchr(l, '\n');
			if (next)
				*next++ = '\0';
			line++;
			const char *t = l + strspn(l, " ");
			if (strncmp(t, "```", 3) == 0)
				fenced = !fenced;
			if (fenced)
				continue;
			if (l[0] == '[' && strstr(l, "]: ")) {
				const char *target = strstr(l, "]: ") + 3;
				check_link(files[f], line, target,
					   strcspn(target, " "));
				continue;
			}
			for (const char *p = l; (p = strstr(p, "](")) != NULL;
			     p += 2)
				check_link(files[f], line, p + 2,
					   strcspn(p + 2, ") "));
		}
		free(text);
	}
	check_problems();
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_markers),
		cmocka_unit_test(test_commands),
		cmocka_unit_test(test_configs),
		cmocka_unit_test(test_sql),
		cmocka_unit_test(test_usage),
		cmocka_unit_test(test_links),
		cmocka_unit_test(test_versions),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
