#!/usr/bin/env bash
# The console's page (src/web/assets/) keeps to the rules that make hostile
# data harmless and the Content-Security-Policy hold (docs/console.md): no
# markup built from strings in app.js, no inline script, style or event
# handler in index.html, nothing fetched from another host.  ctest
# browser.assets; the browser test (run.sh) checks the behaviour itself.
set -euo pipefail

dir=${1:?usage: assets_check.sh SOURCE_DIR}/src/web/assets
fail=0
bad() {
	echo "assets: $*" >&2
	fail=1
}

# Markup from strings, or code from strings.
if grep -nE '\.(inner|outer)HTML|insertAdjacentHTML|document\.write|\beval\(|new Function|set(Timeout|Interval)\(["'\'']|createContextualFragment|DOMParser' \
	"$dir/app.js"; then
	bad "app.js builds markup or code from a string (use createElement and textContent)"
fi

# index.html: scripts only by src, no style element or attribute, no
# inline event handler, no javascript: URL.
if grep -nE '<script[^>]*>[^<]' "$dir/index.html" ||
	grep -nE '<script(\s[^>]*)?>' "$dir/index.html" | grep -v 'src="/app.js"'; then
	bad "index.html: a script that is not src=\"/app.js\""
fi
if grep -niE '<style|\sstyle=|\son[a-z]+=|javascript:' "$dir/index.html"; then
	bad "index.html: inline style, event handler or javascript: URL"
fi

# Nothing from elsewhere: no absolute URL that the page would fetch.
if grep -nE '(src|href)="(https?:)?//|@import|url\(\s*["'\'']?(https?:)?//' \
	"$dir/index.html" "$dir/app.css"; then
	bad "an asset is fetched from another host"
fi
if grep -nE 'fetch\(\s*["'\''`](https?:)?//' "$dir/app.js"; then
	bad "app.js fetches from another host"
fi

[ $fail -eq 0 ] && echo "assets: ok ($(ls "$dir" | tr '\n' ' '))"
exit $fail
