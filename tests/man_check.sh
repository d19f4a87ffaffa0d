#!/usr/bin/env bash
# The man pages of man/ (ctest "man"): lint clean, and in step with the
# programs and the docs, so that they cannot drift:
#   - mandoc -Tlint reports nothing at level warning or above;
#   - every option that "pgjobd --help" lists is in pgjobd(8);
#   - every command that "pgjob --help" lists has its own entry (a line
#     ".It Cm NAME" or ".Cm NAME" after ".It Xo") in pgjob(1), every option
#     of "pgjob NAME --help" is in that entry, and every option of
#     "pgjob --help" is in the page;
#   - every key of docs/configuration.md's tables is an Ic argument in
#     pgjobd.yaml(5), and the page's example config validates.
# Every problem is listed before the test fails.
#
#   tests/man_check.sh SOURCE_DIR BUILD_DIR
#
# mandoc comes with the Debian package "mandoc" (scripts/deps.sh).
set -euo pipefail
src=${1:?usage: man_check.sh SOURCE_DIR BUILD_DIR}
build=${2:?usage: man_check.sh SOURCE_DIR BUILD_DIR}
problems=0
problem() {
	echo "man: $*" >&2
	problems=$((problems + 1))
}

if ! command -v mandoc >/dev/null; then
	echo "man: mandoc is not installed (Debian package \"mandoc\")" >&2
	exit 1
fi
for bin in pgjob pgjobd; do
	[ -x "$build/$bin" ] || { echo "man: $build/$bin is not built" >&2; exit 1; }
done

# The page as a reader sees it: rendered, without the overstrike of bold.
rendered() {
	mandoc -Tascii "$src/man/$1" | sed 's/.\x08//g'
}

# The options (--long and -x) in a --help text, one a line.
options_of() {
	grep -oE '(^|[ ,[(|])--?[a-zA-Z][a-zA-Z-]*' | sed 's/^[ ,[(|]//' | sort -u
}

# word TEXT WORD: WORD occurs in TEXT, not as part of a longer option.
has_word() {
	grep -qE -- "(^|[^[:alnum:]_-])$2([^[:alnum:]_-]|\$)" <<<"$1"
}

for page in pgjob.1 pgjobd.yaml.5 pgjobd.8; do
	if ! out=$(mandoc -Tlint -Wwarning "$src/man/$page" 2>&1) || [ -n "$out" ]; then
		problem "$page: mandoc -Tlint -Wwarning:"$'\n'"$out"
	fi
done

page=$(rendered pgjobd.8)
for opt in $("$build/pgjobd" --help | options_of); do
	has_word "$page" "$opt" || problem "pgjobd --help lists $opt; pgjobd.8 does not"
done

page=$(rendered pgjob.1)
help=$("$build/pgjob" --help)
for opt in $(options_of <<<"$help"); do
	has_word "$page" "$opt" || problem "pgjob --help lists $opt; pgjob.1 does not"
done
commands=$(sed -n '/^commands:/,/^$/p' <<<"$help" | grep -oE '^  [a-z]+' | sort -u)
[ -n "$commands" ] || problem "found no commands in pgjob --help"
for cmd in $commands; do
	awk -v cmd="$cmd" '
		$1 == ".It" && $2 == "Cm" && $3 == cmd { found = 1 }
		prev == ".It Xo" && $1 == ".Cm" && $2 == cmd { found = 1 }
		{ prev = $0 }
		END { exit !found }' "$src/man/pgjob.1" ||
		problem "pgjob --help lists the command $cmd; pgjob.1 has no entry for it"
	# Each option of "pgjob CMD --help" is in CMD's entries of COMMANDS
	# (rendered: from a tag line "     CMD ..." to the next tag line).
	entry=$(sed -n '/^COMMANDS/,/^[A-Z]/p' <<<"$page" | awk -v cmd="$cmd" '
		/^     [^ ]/ { on = ($1 == cmd) }
		on')
	for opt in $("$build/pgjob" "$cmd" --help | sed '1d' | options_of); do
		[ "$opt" = --help ] && continue
		has_word "$entry" "$opt" ||
			problem "pgjob $cmd --help lists $opt; its entry in pgjob.1 does not"
	done
done

# Config keys: the first column of the reference tables of
# configuration.md (those headed "| key |"; the page's other tables list
# checks, value types and reload behaviour).
keys=$(awk '/^\| key \|/ { on = 1; next } !/^\|/ { on = 0 } on' \
	"$src/docs/configuration.md" | cut -d'|' -f2 |
	grep -oE '`[^`]+`' | tr -d '`' | sort -u)
ic=$(awk '/^\./ { on = 0; for (i = 1; i <= NF; i++) {
		if ($i == "Ic" || $i == ".Ic") on = 1; else if (on) print $i } }' \
	"$src/man/pgjobd.yaml.5" | sort -u)
for key in $keys; do
	grep -qxF -- "$key" <<<"$ic" ||
		problem "docs/configuration.md has the key $key; pgjobd.yaml.5 does not (as .Ic $key)"
done

# The example of pgjobd.yaml(5) is a config that validates.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sed -n '/^\.Sh EXAMPLES/,/^\.Sh/p' "$src/man/pgjobd.yaml.5" |
	sed -n '/^\.Bd -literal/,/^\.Ed/p' | sed '1d;$d' >"$tmp/example.yaml"
if [ ! -s "$tmp/example.yaml" ]; then
	problem "pgjobd.yaml.5 has no example config"
elif ! out=$(PARTNER_TOKEN=x "$build/pgjobd" -c "$tmp/example.yaml" --check-config=static 2>&1); then
	problem "the example config of pgjobd.yaml.5 does not validate:"$'\n'"$out"
fi

if [ "$problems" -gt 0 ]; then
	echo "man: $problems problems, listed above" >&2
	exit 1
fi
echo "man: 3 pages lint clean; every option, command and config key is in them"
