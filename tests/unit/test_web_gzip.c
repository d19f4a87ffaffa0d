/* Unit tests for web/gzip: which Accept-Encoding values take gzip, and a
 * body that comes back whole through zlib's inflate, within the bound. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "web/gzip.h"

static void
test_accepted(void **state)
{
	static const struct {
		const char *ae;
		bool taken;
	} cases[] = {
		{NULL, false},
		{"", false},
		{"gzip", true},
		{"GZip", true},
		{"x-gzip", true},
		{"gzip, deflate, br", true},
		{"br;q=1.0, gzip;q=0.8, *;q=0.1", true},
		{"deflate,gzip", true},
		{"gzip;q=0", false},
		{"gzip; q=0.000", false},
		{"gzip;q=0.001", true},
		{"identity", false},
		{"br, deflate", false},
		{"*", true},
		{"*;q=0", false},
		{"*, gzip;q=0", false}, /* named, refused: * does not reopen */
		{"gzipped", false},
		{",,, gzip ,", true},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (web_gzip_accepted(cases[i].ae) != cases[i].taken)
			fail_msg("Accept-Encoding: %s", cases[i].ae);
}

static void
test_round_trip(void **state)
{
	size_t len = 200000;
	char *in = malloc(len);
	for (size_t i = 0; i < len; i++)
		in[i] = (char)("{\"id\": 1234, \"state\": \"done\"}"[i % 30]);
	unsigned char *z;
	size_t zlen;
	assert_int_equal(web_gzip(in, len, 6, &z, &zlen), 0);
	assert_true(zlen < len / 10);
	assert_int_equal(z[0], 0x1f); /* gzip's magic */
	assert_int_equal(z[1], 0x8b);

	z_stream s = {0};
	assert_int_equal(inflateInit2(&s, 15 + 16), Z_OK);
	char *back = malloc(len + 1);
	s.next_in = z;
	s.avail_in = (uInt)zlen;
	s.next_out = (Bytef *)back;
	s.avail_out = (uInt)len + 1;
	assert_int_equal(inflate(&s, Z_FINISH), Z_STREAM_END);
	assert_int_equal(s.total_out, len);
	assert_memory_equal(back, in, len);
	inflateEnd(&s);
	free(back);
	free(z);

	/* Past the bound: refused, nothing allocated. */
	z = NULL;
	assert_int_equal(web_gzip(in, WEB_GZIP_MAX + 1, 6, &z, &zlen), -1);
	assert_null(z);
	free(in);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_accepted),
		cmocka_unit_test(test_round_trip),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
