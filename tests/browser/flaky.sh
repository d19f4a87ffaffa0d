#!/bin/sh
# tests/browser: the exec handler of kind "flaky".  It fails until the
# marker file named by $1 exists, and its error is hostile on purpose: an
# escape sequence, markup and bytes that are not UTF-8 reach the job's
# attempt errors, and the console must show them as text.
cat >/dev/null
if [ -e "$1" ]; then
	echo '{"ok": true}'
	exit 0
fi
printf 'marker %s is missing: failing on purpose \033[31m<script>alert(1)</script> <img src=x onerror=alert(1)> \377\376\n' "$1" >&2
exit 3
