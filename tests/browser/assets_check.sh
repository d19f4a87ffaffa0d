#!/usr/bin/env bash
# The console's page (src/web/assets/) keeps to the rules that make hostile
# data harmless and the Content-Security-Policy hold (docs/console.md): no
# markup built from strings in its scripts, no inline script, style or
# event handler in index.html, nothing fetched from another host, and its
# scripts ES modules of this origin: index.html loads the one entry,
# app.js, as a module, and the modules import only "/NAME.js" files that
# exist here, with no circle.  ctest browser.assets; the browser test
# (run.sh) checks the behaviour itself.
set -euo pipefail

dir=${1:?usage: assets_check.sh SOURCE_DIR}/src/web/assets
fail=0
bad() {
	echo "assets: $*" >&2
	fail=1
}
js=("$dir"/*.js)

# Markup from strings, or code from strings.
if grep -nE '\.(inner|outer)HTML|insertAdjacentHTML|document\.write|\beval\(|new Function|set(Timeout|Interval)\(["'\'']|createContextualFragment|DOMParser' \
	"${js[@]}"; then
	bad "a script builds markup or code from a string (use createElement and textContent)"
fi

# index.html: one script, the module /app.js, by src; no style element or
# attribute, no inline event handler, no javascript: URL.
if grep -nE '<script[^>]*>[^<]' "$dir/index.html" ||
	grep -nE '<script(\s[^>]*)?>' "$dir/index.html" |
	grep -vE '^[0-9]+:<script type="module" src="/app.js"></script>$'; then
	bad "index.html: a script that is not <script type=\"module\" src=\"/app.js\">"
fi
if [ "$(grep -c '<script' "$dir/index.html")" -ne 1 ]; then
	bad "index.html: not exactly one script"
fi
if grep -niE '<style|\sstyle=|\son[a-z]+=|javascript:' "$dir/index.html"; then
	bad "index.html: inline style, event handler or javascript: URL"
fi

# Modules: each import (static or dynamic) names "/NAME.js", a file of
# this folder; no import circle (the browser would run a module before
# one it needs).
declare -A deps=()
for f in "${js[@]}"; do
	name=$(basename "$f")
	if grep -nE '\bimport\s*\(|\brequire\(' "$f"; then
		bad "$name: a dynamic import or require (static imports only)"
	fi
	list=""
	while read -r spec; do
		[ -n "$spec" ] || continue
		case $spec in
		/*.js) ;;
		*)
			bad "$name imports \"$spec\": not \"/NAME.js\" of this origin"
			continue
			;;
		esac
		[ -f "$dir$spec" ] || bad "$name imports $spec: no such file in src/web/assets"
		list+=" ${spec#/}"
	done < <(grep -oE "(^import|\}) from '[^']*';$" "$f" |
		sed -E "s/.*'([^']*)';$/\1/")
	deps[$name]=$list
done
# Depth-first from every module: a module met again on the path is a circle.
visit() { # path...
	local n=${*: -1} m
	for m in ${deps[$n]:-}; do
		case " $* " in
		*" $m "*) bad "an import circle: $* $m" ;;
		*) visit "$@" "$m" ;;
		esac
	done
}
for f in "${js[@]}"; do
	visit "$(basename "$f")"
done

# Nothing from elsewhere: no absolute URL that the page would fetch.
if grep -nE '(src|href)="(https?:)?//|@import|url\(\s*["'\'']?(https?:)?//' \
	"$dir/index.html" "$dir/app.css"; then
	bad "an asset is fetched from another host"
fi
if grep -nE 'fetch\(\s*["'\''`](https?:)?//' "${js[@]}"; then
	bad "a script fetches from another host"
fi

[ $fail -eq 0 ] && echo "assets: ok ($(ls "$dir" | tr '\n' ' '))"
exit $fail
