/*
 * Checks pgjobd.service, pgjobd@.service and pgjob-web.service, as CMake writes
 * them from config/NAME.service.in into the build root (the binary's path from
 * the install prefix, PGJOBD_UNIT_BINDIR), with "systemd-analyze verify", on
 * copies whose ExecStart= and ExecReload= name the binaries of this build
 * (verify wants the binary to exist), and the template as a concrete
 * instance, pgjobd@2.service.  Any line of verify's
 * output that names one of the units fails the test; lines about the host
 * (other units, missing /run/systemd bits in a container) are ignored.  A
 * copy with a bad key proves that the filter would notice.
 *
 * systemd-analyze comes with the Debian package "systemd"; without it the
 * test fails rather than skips, so that a CI image without it is noticed.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"

#ifndef PGJOBD_UNIT_BINDIR
#error "tests/CMakeLists.txt defines PGJOBD_UNIT_BINDIR"
#endif

static char dir[] = "/tmp/pgjobd-units-XXXXXX";
static char analyze[4096];

/*
 * The man pages of Documentation=, linked from man/ into dir/man/manN:
 * verify runs man(1) on each (Debian package "man-db"), with MANPATH set
 * to dir/man, so that a page the units name but the tree lacks fails.
 */
static const char *const pages[][2] = {
	{"man8", "pgjobd.8"},
	{"man5", "pgjobd.yaml.5"},
	{"man1", "pgjob.1"},
};
#define NPAGES (sizeof(pages) / sizeof(pages[0]))

/* Finds name on $PATH; returns 0 with the path in analyze, or -1. */
static int
find_in_path(const char *name)
{
	const char *path = getenv("PATH");
	char *copy = xstrdup(path && *path ? path : "/usr/bin:/bin"), *save;

	for (char *d = strtok_r(copy, ":", &save); d;
	     d = strtok_r(NULL, ":", &save)) {
		snprintf(analyze, sizeof(analyze), "%s/%s", d, name);
		if (access(analyze, X_OK) == 0) {
			free(copy);
			return 0;
		}
	}
	free(copy);
	return -1;
}

static char *
slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	struct buf b = {0};
	char chunk[4096];
	size_t n;

	if (!f)
		fail_msg("cannot read %s", path);
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		buf_append(&b, chunk, n);
	fclose(f);
	return b.data;
}

/* Copies the unit to dir with every PGJOBD_UNIT_BINDIR/ replaced by bindir/
 * (the build's binaries), and extra (may be NULL) appended; returns the
 * unit's text (caller frees). */
static char *
copy_unit(const char *name, const char *bindir, const char *extra)
{
	char src[4096], dst[4096], bin[4096];
	const char *from = PGJOBD_UNIT_BINDIR "/";
	struct buf b = {0};

	snprintf(src, sizeof(src), "%s/%s", getenv("PGJOBD_TEST_BIN"), name);
	snprintf(bin, sizeof(bin), "%s/", bindir);
	char *text = slurp(src), *p = text, *q;
	while ((q = strstr(p, from))) {
		buf_append(&b, p, (size_t)(q - p));
		buf_append(&b, bin, strlen(bin));
		p = q + strlen(from);
	}
	buf_append(&b, p, strlen(p));
	if (extra)
		buf_append(&b, extra, strlen(extra));
	snprintf(dst, sizeof(dst), "%s/%s", dir, name);
	FILE *f = fopen(dst, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(b.data, 1, b.len, f), b.len);
	fclose(f);
	buf_free(&b);
	return text;
}

/*
 * Runs systemd-analyze verify dir/unit; returns the lines of its output
 * (stdout and stderr) that name one of our units, "" if none (caller frees).
 * *status is its exit status.
 */
static char *
verify(const char *unit, int *status)
{
	char path[4096], line[4096];
	struct buf hits = {0};
	int p[2];

	snprintf(path, sizeof(path), "%s/%s", dir, unit);
	assert_int_equal(pipe(p), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(p[1], 1);
		dup2(p[1], 2);
		close(p[0]);
		close(p[1]);
		snprintf(line, sizeof(line), "%s/man", dir);
		setenv("MANPATH", line, 1);
		execl(analyze, analyze, "verify", path, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	FILE *out = fdopen(p[0], "r");
	buf_append(&hits, "", 0);
	while (fgets(line, sizeof(line), out)) {
		fprintf(stderr, "# verify %s: %s", unit, line);
		if (strstr(line, "pgjobd.service") || strstr(line, "pgjobd@") ||
		    strstr(line, "pgjob-web"))
			buf_append(&hits, line, strlen(line));
	}
	fclose(out);
	assert_int_equal(waitpid(pid, status, 0), pid);
	return hits.data;
}

static void
check_clean(const char *unit)
{
	int status;
	char *hits = verify(unit, &status);

	if (*hits)
		fail_msg("systemd-analyze verify %s:\n%s", unit, hits);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail_msg("systemd-analyze verify %s failed (status %d) "
			 "without naming the unit; see its output above",
			 unit, status);
	free(hits);
}

/* Lines every unit must have, as written. */
static void
check_directives(const char *name, const char *text)
{
	const char *want[] = {
		"\nType=notify\n",
		"\nKillMode=mixed\n",
		"\nRestart=on-failure\n",
		"\nRestartPreventExitStatus=78\n",
		"\nWatchdogSec=30\n",
		"\nExecReload=/bin/kill -HUP $MAINPID\n",
		"\nUser=pgjobd\n",
		"\nNoNewPrivileges=yes\n",
		"\nProtectSystem=strict\n",
		"\nCapabilityBoundingSet=\n",
		"\nSystemCallFilter=@system-service\n",
		"\nUMask=0077\n",
		/* man pgjobd, pgjobd.yaml and pgjob (man/). */
		"\nDocumentation=man:pgjobd(8) man:pgjobd.yaml(5) "
		"man:pgjob(1)\n",
		/* The binary under the install prefix, as written. */
		"\nExecStart=" PGJOBD_UNIT_BINDIR "/pgjobd -c /etc/pgjobd/",
		"\nExecReload=" PGJOBD_UNIT_BINDIR "/pgjobd --check-config -c "
		"/etc/pgjobd/",
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(*want); i++)
		if (!strstr(text, want[i]))
			fail_msg("%s lacks the line %s", name, want[i] + 1);
	/* configure_file() left no @VARIABLE@ of the template behind. */
	if (strstr(text, "@CMAKE_"))
		fail_msg("%s has a template variable left: %s", name,
			 strstr(text, "@CMAKE_"));
	/* Above the default shutdown_timeout of 60 s, with room to spare. */
	const char *t = strstr(text, "\nTimeoutStopSec=");
	assert_non_null(t);
	assert_true(atoi(t + strlen("\nTimeoutStopSec=")) > 60);
}

static void
test_units(void **state)
{
	char bin[4096];
	const char *tb = getenv("PGJOBD_TEST_BIN");

	if (find_in_path("systemd-analyze") < 0)
		fail_msg("systemd-analyze is not installed: it comes with the "
			 "Debian package \"systemd\" (add it to "
			 "scripts/deps.sh)");
	assert_non_null(tb);
	assert_non_null(getenv("PGJOBD_SOURCE"));
	snprintf(bin, sizeof(bin), "%s/pgjobd", tb);
	if (access(bin, X_OK) != 0)
		fail_msg("%s is not built yet (build every target first)", bin);

	char *plain = copy_unit("pgjobd.service", tb, NULL);
	char *templ = copy_unit("pgjobd@.service", tb, NULL);
	check_directives("pgjobd.service", plain);
	check_directives("pgjobd@.service", templ);
	assert_non_null(strstr(templ, "-c /etc/pgjobd/%i.yaml\n"));
	assert_non_null(strstr(templ, "EnvironmentFile=-/etc/pgjobd/%i.env\n"));
	assert_non_null(strstr(plain, "-c /etc/pgjobd/pgjobd.yaml\n"));
	assert_non_null(
		strstr(plain, "EnvironmentFile=-/etc/pgjobd/pgjobd.env\n"));
	check_clean("pgjobd.service");
	check_clean("pgjobd@2.service");
	free(plain);
	free(templ);

	/* The web console's unit (docs/console.md). */
	char *web = copy_unit("pgjob-web.service", tb, NULL);
	const char *web_want[] = {
		"\nExecStart=" PGJOBD_UNIT_BINDIR
		"/pgjob -c /etc/pgjobd/pgjobd.yaml web\n",
		"\nUser=pgjobd\n",
		"\nRestartPreventExitStatus=78\n",
		"\nNoNewPrivileges=yes\n",
		"\nProtectSystem=strict\n",
		"\nCapabilityBoundingSet=\n",
		"\nSystemCallFilter=@system-service\n",
	};
	for (size_t i = 0; i < sizeof(web_want) / sizeof(*web_want); i++)
		if (!strstr(web, web_want[i]))
			fail_msg("pgjob-web.service lacks the line %s",
				 web_want[i] + 1);
	check_clean("pgjob-web.service");
	free(web);

	/* The filter notices a problem in either unit. */
	int status;
	free(copy_unit("pgjobd@.service", tb, "[Service]\nNoSuchKey=1\n"));
	char *hits = verify("pgjobd@2.service", &status);
	assert_non_null(strstr(hits, "NoSuchKey"));
	free(hits);
	free(copy_unit("pgjobd.service", tb, "[Service]\nNoSuchKey=1\n"));
	hits = verify("pgjobd.service", &status);
	assert_non_null(strstr(hits, "NoSuchKey"));
	free(hits);
}

static int
setup(void **state)
{
	char path[4096], page[4096];
	const char *src = getenv("PGJOBD_SOURCE");

	if (!mkdtemp(dir) || !src)
		return -1;
	snprintf(path, sizeof(path), "%s/man", dir);
	if (mkdir(path, 0700) < 0)
		return -1;
	for (size_t i = 0; i < NPAGES; i++) {
		snprintf(path, sizeof(path), "%s/man/%s", dir, pages[i][0]);
		if (mkdir(path, 0700) < 0)
			return -1;
		snprintf(path, sizeof(path), "%s/man/%s/%s", dir, pages[i][0],
			 pages[i][1]);
		snprintf(page, sizeof(page), "%s/man/%s", src, pages[i][1]);
		if (symlink(page, path) < 0)
			return -1;
	}
	return 0;
}

static int
teardown(void **state)
{
	char path[4096];
	for (size_t i = 0; i < NPAGES; i++) {
		snprintf(path, sizeof(path), "%s/man/%s/%s", dir, pages[i][0],
			 pages[i][1]);
		unlink(path);
		snprintf(path, sizeof(path), "%s/man/%s", dir, pages[i][0]);
		rmdir(path);
	}
	snprintf(path, sizeof(path), "%s/man", dir);
	rmdir(path);
	snprintf(path, sizeof(path), "%s/pgjobd.service", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/pgjobd@.service", dir);
	unlink(path);
	rmdir(dir);
	return 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_units),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
