/*
 * Unit: where a plugin library named in a config is looked for
 * (handler_plugin_dir(), handler_plugin_path()).  The directory is found
 * relative to the running binary, so this test copies itself into scratch
 * trees laid out as an installed tree, a build tree and neither, runs the
 * copy with --print, and reads what it found.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "handlers/handler_plugin.h"

/* The names every tree is asked about, in this order. */
static const char *const names[] = {
	"a",	      /* a.so is there: ".so" added */
	"a.so",	      /* as it is */
	"c",	      /* c is there without a suffix: as it is */
	"examples/b", /* examples/b.so */
	"examples/z", /* not there: in the directory all the same */
	"libz.so.1",  /* a bare name not there: the linker's search */
	"/opt/x.so",  /* absolute: as it is */
	NULL,
};

static void
mkdirs(const char *path)
{
	char *p = xstrdup(path);

	for (char *s = p + 1;; s++) {
		if (*s && *s != '/')
			continue;
		char c = *s;
		*s = '\0';
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			fail_msg("mkdir %s: %s", p, strerror(errno));
		if (!(*s = c))
			break;
	}
	free(p);
}

static void
touch(const char *dir, const char *name)
{
	char *p = xasprintf("%s/%s", dir, name);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	assert_true(fd >= 0);
	close(fd);
	free(p);
}

/* This test's own binary, copied to path (mode 0755). */
static void
copy_self(const char *path)
{
	char buf[65536];
	ssize_t n;
	int in = open("/proc/self/exe", O_RDONLY);
	int out = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0755);

	assert_true(in >= 0 && out >= 0);
	while ((n = read(in, buf, sizeof(buf))) > 0)
		assert_int_equal(write(out, buf, (size_t)n), n);
	close(in);
	close(out);
}

/* Fills plugin dir d with the files the names above find. */
static void
fill(const char *d)
{
	char *ex = xasprintf("%s/examples", d);

	mkdirs(ex);
	touch(d, "a.so");
	touch(d, "c");
	touch(ex, "b.so");
	free(ex);
}

/* Runs bin --print and checks its lines: the directory, then each name. */
static void
expect(const char *bin, const char *dir)
{
	char *cmd = xasprintf("'%s' --print", bin);
	char line[4096], *want[8];
	FILE *p = popen(cmd, "r");

	want[0] = xasprintf("%s/a.so", dir);
	want[1] = xasprintf("%s/a.so", dir);
	want[2] = xasprintf("%s/c", dir);
	want[3] = xasprintf("%s/examples/b.so", dir);
	want[4] = xasprintf("%s/examples/z", dir);
	want[5] = xstrdup("libz.so.1");
	want[6] = xstrdup("/opt/x.so");
	assert_non_null(p);
	assert_non_null(fgets(line, sizeof(line), p));
	line[strcspn(line, "\n")] = '\0';
	assert_string_equal(line, dir);
	for (int i = 0; names[i]; i++) {
		assert_non_null(fgets(line, sizeof(line), p));
		line[strcspn(line, "\n")] = '\0';
		assert_string_equal(line, want[i]);
		free(want[i]);
	}
	assert_int_equal(pclose(p), 0);
	free(cmd);
}

/* The scratch folder, free of links (/tmp may be one): the directory
 * found is. */
static char *root;

/* An installed tree, wherever it is: <bindir>/PGJOBD_PLUGIN_RELDIR. */
static void
test_installed(void **state)
{
	char *bin = xasprintf("%s/inst/usr/bin", root);
	char *dir = xasprintf("%s/%s", bin, PGJOBD_PLUGIN_RELDIR);
	char *exe = xasprintf("%s/pgjobd", bin);
	char *real;

	mkdirs(bin);
	mkdirs(dir);
	fill(dir);
	/* A plugins/ beside it too: the installed layout comes first. */
	char *also = xasprintf("%s/plugins", bin);
	mkdirs(also);
	copy_self(exe);
	real = realpath(dir, NULL);
	expect(exe, real);
	free(real);
	free(also);
	free(exe);
	free(dir);
	free(bin);
}

/* A build tree: plugins/ beside the binary. */
static void
test_build_tree(void **state)
{
	char *bin = xasprintf("%s/build", root);
	char *dir = xasprintf("%s/plugins", bin);
	char *exe = xasprintf("%s/pgjobd", bin);

	mkdirs(dir);
	fill(dir);
	copy_self(exe);
	expect(exe, dir);
	free(exe);
	free(dir);
	free(bin);
}

/* Neither: the directory compiled in. */
static void
test_compiled_in(void **state)
{
	char *bin = xasprintf("%s/alone/x", root);
	char *exe = xasprintf("%s/pgjobd", bin);
	char *cmd = xasprintf("'%s' --print", exe);
	char line[4096];
	FILE *p;

	mkdirs(bin);
	copy_self(exe);
	assert_non_null(p = popen(cmd, "r"));
	assert_non_null(fgets(line, sizeof(line), p));
	line[strcspn(line, "\n")] = '\0';
	assert_string_equal(line, PGJOBD_LIBDIR);
	while (fgets(line, sizeof(line), p))
		;
	assert_int_equal(pclose(p), 0);
	free(cmd);
	free(exe);
	free(bin);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_installed),
		cmocka_unit_test(test_build_tree),
		cmocka_unit_test(test_compiled_in),
	};
	int rc;

	if (argc > 1 && strcmp(argv[1], "--print") == 0) {
		printf("%s\n", handler_plugin_dir());
		for (int i = 0; names[i]; i++) {
			char *p = handler_plugin_path(names[i]);
			printf("%s\n", p);
			free(p);
		}
		return 0;
	}
	char tmpl[] = "/tmp/pgjobd-t-plugindir-XXXXXX";
	if (!mkdtemp(tmpl) || !(root = realpath(tmpl, NULL)))
		return 1;
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	char *rm = xasprintf("rm -rf '%s'", root);
	if (system(rm) != 0)
		rc = 1;
	free(rm);
	free(root);
	return rc;
}
