/*
 * fuzz_main: runs a fuzz target's LLVMFuzzerTestOneInput() over files,
 * without libFuzzer, so that every input kept in tests/fuzz/regressions/
 * (and the seed corpus) is a plain ctest test in every build.
 *
 *   fuzz_config_regress PATH...   each PATH a file, or a directory whose
 *                                 files (not recursively, dot files
 *                                 skipped) are run in name order
 *
 * Exits 0 after running them all, 1 if a path cannot be read or no input
 * was found at all; a crash is the target's own (abort, sanitizer report).
 * An input that runs longer than 10 s (PGJOBD_FUZZ_TIMEOUT seconds) aborts
 * too, as libFuzzer's -timeout would: a hang is a bug as much as a crash.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int ran;
static const char *current;
static unsigned timeout_s = 10;

static void
on_alarm(int sig)
{
	static const char msg[] = "timeout: an input ran too long: ";
	(void)sig;
	/* Only async-signal-safe calls here. */
	(void)!write(2, msg, sizeof(msg) - 1);
	(void)!write(2, current, strlen(current));
	(void)!write(2, "\n", 1);
	abort();
}

static int
run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	size_t cap = 4096, len = 0, n;
	uint8_t *data = malloc(cap);
	if (!data)
		abort();
	while ((n = fread(data + len, 1, cap - len, f)) > 0) {
		len += n;
		if (len == cap) {
			cap *= 2;
			if (!(data = realloc(data, cap)))
				abort();
		}
	}
	int err = ferror(f);
	fclose(f);
	if (err) {
		fprintf(stderr, "%s: read error\n", path);
		free(data);
		return -1;
	}
	/* Exact size, as libFuzzer hands it over. */
	uint8_t *exact = malloc(len ? len : 1);
	if (!exact)
		abort();
	memcpy(exact, data, len);
	free(data);
	fprintf(stderr, "%s (%zu bytes)\n", path, len);
	current = path;
	alarm(timeout_s);
	LLVMFuzzerTestOneInput(exact, len);
	alarm(0);
	free(exact);
	ran++;
	return 0;
}

static int
name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int
run_dir(const char *path)
{
	DIR *d = opendir(path);
	if (!d) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	char **names = NULL;
	size_t n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		if (!(names = realloc(names, (n + 1) * sizeof(*names))) ||
		    !(names[n] = strdup(e->d_name)))
			abort();
		n++;
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof(*names), name_cmp);
	int rc = 0;
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(path) + strlen(names[i]) + 2;
		char *full = malloc(len);
		struct stat st;
		if (!full)
			abort();
		snprintf(full, len, "%s/%s", path, names[i]);
		if (stat(full, &st) == 0 && S_ISREG(st.st_mode) &&
		    run_file(full) < 0)
			rc = -1;
		free(full);
		free(names[i]);
	}
	free(names);
	return rc;
}

int
main(int argc, char **argv)
{
	int rc = 0;
	const char *t = getenv("PGJOBD_FUZZ_TIMEOUT");
	if (t && atoi(t) > 0)
		timeout_s = (unsigned)atoi(t);
	signal(SIGALRM, on_alarm);
	for (int i = 1; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) < 0) {
			fprintf(stderr, "%s: %s\n", argv[i], strerror(errno));
			rc = 1;
		} else if (S_ISDIR(st.st_mode) ? run_dir(argv[i]) < 0
					       : run_file(argv[i]) < 0) {
			rc = 1;
		}
	}
	if (ran == 0) {
		fprintf(stderr, "no input found\n");
		rc = 1;
	}
	printf("%d inputs run, none crashed\n", ran);
	return rc;
}
