#!/usr/bin/env bash
# The Debian package (ctest "package", label "package"; about a minute):
# builds it from this tree with scripts/package.sh, runs lintian on the
# .debs (no error allowed; warnings and notes are printed), checks the
# layout, unpacks both packages into a throwaway root with dpkg -x (the
# real system is not touched), and runs what was unpacked:
#   - pgjobd --version, and --check-config of the installed example config;
#   - (as root) systemd-sysusers and systemd-tmpfiles on the packaged files,
#     with --root, as the postinst runs them;
#   - a plugin built against the installed header and pkg-config file;
#   - pgjob migrate of a fresh database of the test PostgreSQL (the "pg"
#     fixture), and the installed pgjobd running an exec job and a job of
#     the installed example plugin to "done", then a clean stop (exit 0).
#
#   tests/package_check.sh SOURCE_DIR TESTPG_DIR
#
# Needs debhelper, dpkg-dev, lintian and the build dependencies of
# debian/control (scripts/deps.sh), and psql and jq.
set -euo pipefail
src=${1:?usage: package_check.sh SOURCE_DIR TESTPG_DIR}
testpg=${2:?usage: package_check.sh SOURCE_DIR TESTPG_DIR}
fail() {
	echo "package: $*" >&2
	exit 1
}
for tool in dpkg-buildpackage lintian psql jq pkg-config cc; do
	command -v "$tool" >/dev/null || fail "$tool is not installed (scripts/deps.sh)"
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/pgjobd-package-check.XXXXXX")
daemon=""
cleanup() {
	if [ -n "$daemon" ] && kill -0 "$daemon" 2>/dev/null; then
		kill -KILL "$daemon" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

# --- build -----------------------------------------------------------------
bash "$src/scripts/package.sh" "$tmp/out"
version=$(dpkg-parsechangelog -l "$src/debian/changelog" -S Version)
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
triplet=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
deb="$tmp/out/pgjobd_${version}_${arch}.deb"
dev="$tmp/out/pgjobd-dev_${version}_${arch}.deb"
[ -f "$deb" ] && [ -f "$dev" ] || fail "no $deb or $dev"

# --- lintian ---------------------------------------------------------------
echo "package: lintian $(basename "$deb") $(basename "$dev")"
lrc=0
lintian --fail-on error --display-info --pedantic "$deb" "$dev" >"$tmp/lintian.txt" 2>&1 || lrc=$?
grep -v '^running with root privileges' "$tmp/lintian.txt" || true
[ "$lrc" -eq 0 ] || fail "lintian reports errors, or failed (exit $lrc; above)"

# --- layout ----------------------------------------------------------------
echo "package: files of $(basename "$deb"):"
dpkg-deb -c "$deb" | awk '{ print "  " $NF }'
echo "package: files of $(basename "$dev"):"
dpkg-deb -c "$dev" | awk '{ print "  " $NF }'
files="$(dpkg-deb -c "$deb" | awk '{ print $NF }')
$(dpkg-deb -c "$dev" | awk '{ print $NF }')"
for f in ./usr/bin/pgjobd ./usr/bin/pgjob \
	./lib/systemd/system/pgjobd.service ./lib/systemd/system/pgjobd@.service \
	./lib/systemd/system/pgjob-web.service \
	./usr/lib/sysusers.d/pgjobd.conf ./usr/lib/tmpfiles.d/pgjobd.conf \
	./usr/share/man/man1/pgjob.1.gz ./usr/share/man/man5/pgjobd.yaml.5.gz \
	./usr/share/man/man8/pgjobd.8.gz ./usr/share/pgjobd/example.yaml \
	./usr/share/pgjobd/sql/upgrade/001_init.sql ./usr/share/pgjobd/sql/schema/order.txt ./usr/share/doc/pgjobd/copyright \
	"./usr/lib/$triplet/pgjobd/examples/pgjobd_example.so" \
	./usr/include/pgjobd/plugin.h "./usr/lib/$triplet/pkgconfig/pgjobd-plugin.pc"; do
	grep -qxF -- "$f" <<<"$files" || fail "the packages lack $f"
done
if grep -qx "\./usr/lib/$triplet/pgjobd/[^/]*\.so" <<<"$files"; then
	fail "a library in the production plugin directory: $(grep -x "\./usr/lib/$triplet/pgjobd/[^/]*\.so" <<<"$files")"
fi
# The postinst creates the user, then /etc/pgjobd, and enables nothing.
post=$(dpkg-deb -I "$deb" postinst)
grep -q 'systemd-sysusers .*pgjobd.conf' <<<"$post" || fail "postinst runs no systemd-sysusers"
grep -q 'systemd-tmpfiles .*--create pgjobd.conf' <<<"$post" || fail "postinst runs no systemd-tmpfiles"
# dh_installsystemd --no-enable writes the "debian-installed" form, which
# enables nothing on a first install; and nothing starts the unit.
grep -q "deb-systemd-helper debian-installed 'pgjobd.service'" <<<"$post" ||
	fail "postinst enables pgjobd.service on install"
grep -q "deb-systemd-helper debian-installed 'pgjob-web.service'" <<<"$post" ||
	fail "postinst enables pgjob-web.service on install"
! grep -q 'deb-systemd-invoke' <<<"$post" || fail "postinst starts or restarts pgjobd"
grep -q "^ExecStart=/usr/bin/pgjobd -c /etc/pgjobd/pgjobd.yaml$" \
	<(dpkg-deb --fsys-tarfile "$deb" | tar -xOf - ./lib/systemd/system/pgjobd.service) ||
	fail "pgjobd.service does not start /usr/bin/pgjobd"
grep -q "^ExecStart=/usr/bin/pgjob -c /etc/pgjobd/pgjobd.yaml web$" \
	<(dpkg-deb --fsys-tarfile "$deb" | tar -xOf - ./lib/systemd/system/pgjob-web.service) ||
	fail "pgjob-web.service does not start /usr/bin/pgjob web"

# --- the unpacked programs ---------------------------------------------------
root="$tmp/root"
dpkg -x "$deb" "$root"
dpkg -x "$dev" "$root"
out=$("$root/usr/bin/pgjobd" --version)
echo "package: $out"
[[ "$out" == "pgjobd $version "* ]] || fail "pgjobd --version: $out"
out=$("$root/usr/bin/pgjob" --version)
[[ "$out" == "pgjob $version "* ]] || fail "pgjob --version: $out"
plugins="$root/usr/lib/$triplet/pgjobd/examples"
PGJOBD_PLUGIN_DIR="$plugins" "$root/usr/bin/pgjobd" \
	-c "$root/usr/share/pgjobd/example.yaml" --check-config ||
	fail "the installed example.yaml does not validate"

# What the postinst does, done in the throwaway root: systemd-sysusers
# creates the user and group pgjobd in its /etc/passwd and /etc/group, then
# systemd-tmpfiles creates its /etc/pgjobd, 0750, group pgjobd.  Setting
# that group takes root; without it, this step is left out (and said so).
if [ "$(id -u)" -eq 0 ]; then
	mkdir -p "$root/etc"
	touch "$root/etc/passwd" "$root/etc/group" "$root/etc/shadow" "$root/etc/gshadow"
	systemd-sysusers --root="$root" pgjobd.conf
	systemd-tmpfiles --root="$root" --create pgjobd.conf
	gid=$(awk -F: '$1 == "pgjobd" { print $3 }' "$root/etc/group")
	user=$(awk -F: '$1 == "pgjobd" { print $4 ":" $6 ":" $7 }' "$root/etc/passwd")
	[ -n "$gid" ] && [ "$user" = "$gid:/nonexistent:/usr/sbin/nologin" ] ||
		fail "sysusers.d/pgjobd.conf: user \"$user\", group id \"$gid\""
	[ "$(stat -c '%a %u %g' "$root/etc/pgjobd")" = "750 0 $gid" ] ||
		fail "tmpfiles.d/pgjobd.conf: /etc/pgjobd is $(stat -c '%a %u %g' "$root/etc/pgjobd")"
	echo "package: systemd-sysusers and systemd-tmpfiles made the user pgjobd and /etc/pgjobd"
else
	echo "package: not root: the sysusers.d and tmpfiles.d files are not applied"
fi

# The -dev package: its relocatable pkg-config file names the unpacked
# header, and a plugin builds against it.
inc=$(PKG_CONFIG_PATH="$root/usr/lib/$triplet/pkgconfig" PKG_CONFIG_LIBDIR=/nonexistent \
	pkg-config --variable=includedir pgjobd-plugin)
[ "$(cd "$inc" && pwd)" = "$root/usr/include" ] || fail "pgjobd-plugin.pc: includedir is $inc"
cc -shared -fPIC -o "$tmp/built_plugin.so" "$src/examples/plugin/example.c" \
	$(PKG_CONFIG_PATH="$root/usr/lib/$triplet/pkgconfig" PKG_CONFIG_LIBDIR=/nonexistent \
		pkg-config --cflags pgjobd-plugin) ||
	fail "the example plugin does not build against pgjobd-dev"

# --- a real run --------------------------------------------------------------
server=$(cat "$testpg/conninfo")
psql -X -q -v ON_ERROR_STOP=1 "$server" \
	-c "drop database if exists t_package with (force)" -c "create database t_package"
db="$server dbname=t_package"
pgjob=("$root/usr/bin/pgjob" --database "$db")
"${pgjob[@]}" migrate
hello=$("${pgjob[@]}" enqueue hello '{"n": 1}')
noop=$("${pgjob[@]}" enqueue noop '{}')
cat >"$tmp/pgjobd.yaml" <<YAML
workers: 1
poll_interval: 100ms
handlers:
  hello: { type: exec, command: ["/bin/echo", '{"greeting":"hello"}'] }
  noop: { type: plugin, library: "$plugins/pgjobd_example.so", symbol: pgjobd_example }
YAML
"$root/usr/bin/pgjobd" -c "$tmp/pgjobd.yaml" -d "$db" >"$tmp/pgjobd.log" 2>&1 &
daemon=$!
# Until both jobs have ended (bounded: 600 looks, 0.1 s apart, at most).
for _ in $(seq 600); do
	states=$("${pgjob[@]}" jobs --json | jq -r --argjson a "$hello" --argjson b "$noop" \
		'[.[] | select(.id == $a or .id == $b) | .state] | sort | join(",")')
	case "$states" in
	done,done) break ;;
	*dead* | *cancelled*) break ;;
	esac
	kill -0 "$daemon" 2>/dev/null || break
	sleep 0.1
done
kill -TERM "$daemon" 2>/dev/null || true
rc=0
wait "$daemon" || rc=$?
daemon=""
if [ "$states" != "done,done" ] || [ "$rc" -ne 0 ]; then
	cat "$tmp/pgjobd.log" >&2
	fail "jobs $hello and $noop ended \"$states\" (want done,done); pgjobd exit $rc"
fi
result=$("${pgjob[@]}" show "$hello" --json | jq -c .result)
[ "$result" = '{"greeting":"hello"}' ] || fail "job $hello: result $result"
result=$("${pgjob[@]}" show "$noop" --json | jq -c .result)
[ "$result" = '{"ok":true}' ] || fail "job $noop: result $result"
psql -X -q "$server" -c "drop database t_package with (force)"
echo "package: pgjobd $version built, lintian without errors, installed into" \
	"a throwaway root and ran an exec job and a plugin job to done"
