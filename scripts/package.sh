#!/usr/bin/env bash
# Builds the Debian packages of pgjobd (debian/) from this tree.
#
#   scripts/package.sh OUTDIR
#
# OUTDIR gets pgjobd_VERSION_ARCH.deb, pgjobd-dev_VERSION_ARCH.deb and the
# .buildinfo and .changes files.  dpkg-buildpackage writes its results
# into the parent of the tree it builds, and builds inside it, so the tree
# is copied first into a temporary directory: the files git knows (with
# their uncommitted changes) and the new ones it does not ignore, or, out
# of a git checkout, everything but build directories.  The source tree
# stays as it was.  The build runs with PGJOBD_JOBS jobs (default 2), the
# tests off (debian/rules).  Needs: debhelper, dpkg-dev and the build
# dependencies of debian/control (scripts/deps.sh installs them all).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:?usage: scripts/package.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
case "$out/" in
"$root"/*) echo "package.sh: OUTDIR must be outside the source tree" >&2; exit 2 ;;
esac

version=$(dpkg-parsechangelog -l "$root/debian/changelog" -S Version)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pgjobd-package.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
tree="$tmp/pgjobd-$version"
mkdir "$tree"
if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	# One tar reads every name (xargs would split a long list into
	# several archives); a file deleted but not yet committed is skipped
	# with tar's warning.
	git -C "$root" ls-files -z --cached --others --exclude-standard |
		(cd "$root" && tar -cf - --no-recursion --ignore-failed-read --null -T -) |
		tar -xf - -C "$tree"
else
	tar -C "$root" --exclude='./build*' -cf - . | tar -xf - -C "$tree"
fi

echo "package.sh: building pgjobd $version in $tree"
(cd "$tree" && DEB_BUILD_OPTIONS="nocheck parallel=${PGJOBD_JOBS:-2}" \
	dpkg-buildpackage -b -us -uc >"$tmp/build.log" 2>&1) || {
	tail -n 60 "$tmp/build.log" >&2
	echo "package.sh: dpkg-buildpackage failed (the end of its log is above)" >&2
	exit 1
}
shopt -s nullglob
files=("$tmp"/*.deb "$tmp"/*.buildinfo "$tmp"/*.changes)
[ ${#files[@]} -gt 0 ] || { echo "package.sh: no .deb was built" >&2; exit 1; }
mv "${files[@]}" "$out/"
for f in "${files[@]}"; do echo "$out/$(basename "$f")"; done
