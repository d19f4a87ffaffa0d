/*
 * fuzz_config: the config loader on arbitrary bytes.
 *
 * The input is handed to config_load_string() exactly as it came, without a
 * terminating NUL, so a read past its end is caught by AddressSanitizer.
 * Whatever it returns is freed, so a leak on any error path shows too.
 * Built as a libFuzzer target with -DPGJOBD_FUZZ=ON (clang), and into the
 * plain regression driver (fuzz_main.c) for ctest.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct config_errors errs = {0};
	/* An exact-size copy: no NUL after the text, and no slack. */
	char *text = malloc(size ? size : 1);

	if (!text)
		return 0;
	if (size)
		memcpy(text, data, size);
	struct config *c = config_load_string("fuzz.yaml", text, size, &errs);
	/* Either a config and no errors, or no config and some. */
	if ((c != NULL) == (errs.n != 0))
		abort();
	for (size_t i = 0; i < errs.n; i++)
		if (!errs.msg[i] || strncmp(errs.msg[i], "fuzz.yaml:", 10))
			abort();
	if (c) {
		/* The lookups the daemon does on a loaded config. */
		for (size_t i = 0; i < c->nhandlers; i++)
			if (config_handler(c, c->handlers[i].kind) == NULL ||
			    config_queue(c, c->handlers[i].queue) == NULL)
				abort();
	}
	config_free(c);
	config_errors_free(&errs);
	free(text);
	return 0;
}
