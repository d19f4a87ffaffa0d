# Installs the build into a scratch DESTDIR and checks that everything a
# packager expects is there, where docs/operations.md#install says.  Run by
# ctest as "install".  (The Debian package's layout, with a multiarch
# libdir, is checked by tests/package_check.sh.)
set(dest "${BUILD}/install-check")
file(REMOVE_RECURSE "${dest}")
execute_process(COMMAND ${CMAKE_COMMAND} -E env DESTDIR=${dest}
	${CMAKE_COMMAND} --install "${BUILD}" --prefix /usr
	RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
	message(FATAL_ERROR "cmake --install failed: ${rc}")
endif()
foreach(f usr/bin/pgjobd usr/bin/pgjob usr/include/pgjobd/plugin.h
	usr/share/pgjobd/example.yaml usr/share/pgjobd/sql/upgrade/001_init.sql usr/share/pgjobd/sql/schema/functions/enqueue.sql
	usr/lib/systemd/system/pgjobd.service
	usr/lib/systemd/system/pgjobd@.service
	usr/lib/systemd/system/pgjob-web.service
	usr/share/pgjobd/monitoring/grafana-dashboard.json
	usr/share/pgjobd/monitoring/pgjobd-alerts.yml
	usr/lib/sysusers.d/pgjobd.conf usr/lib/tmpfiles.d/pgjobd.conf
	usr/share/man/man1/pgjob.1 usr/share/man/man5/pgjobd.yaml.5
	usr/share/man/man8/pgjobd.8)
	if(NOT EXISTS "${dest}/${f}")
		message(FATAL_ERROR "missing after install: /${f}")
	endif()
endforeach()
file(GLOB_RECURSE all "${dest}/*")
list(FILTER all INCLUDE REGEX "/pgjobd-plugin\\.pc$|/pgjobd/examples/pgjobd_example\\.so$")
list(LENGTH all found)
if(NOT found EQUAL 2)
	message(FATAL_ERROR "missing after install: pgjobd-plugin.pc or the example plugin (in LIBDIR/pgjobd/examples)")
endif()
# The example plugin crashes on request: never in the production plugin
# directory itself, where a bare "library: pgjobd_example.so" would find it.
file(GLOB_RECURSE stray "${dest}/*/pgjobd/pgjobd_example.so")
if(stray)
	message(FATAL_ERROR "the example plugin is in the plugin directory: ${stray}")
endif()

# The units start the binary under the prefix the build was configured
# with (BINDIR, CMAKE_INSTALL_FULL_BINDIR: configure_file() writes it then,
# which is why docs/operations.md configures with the prefix it installs to).
foreach(unit pgjobd.service pgjobd@.service)
	file(READ "${dest}/usr/lib/systemd/system/${unit}" text)
	string(FIND "${text}" "\nExecStart=${BINDIR}/pgjobd -c /etc/pgjobd/" at)
	if(at LESS 0)
		message(FATAL_ERROR "${unit}: ExecStart= is not ${BINDIR}/pgjobd")
	endif()
endforeach()
file(READ "${dest}/usr/lib/systemd/system/pgjob-web.service" text)
string(FIND "${text}" "\nExecStart=${BINDIR}/pgjob -c /etc/pgjobd/pgjobd.yaml web\n" at)
if(at LESS 0)
	message(FATAL_ERROR "pgjob-web.service: ExecStart= is not ${BINDIR}/pgjob ... web")
endif()

# The pgjobd user and /etc/pgjobd, as sysusers.d(5) and tmpfiles.d(5) lines.
file(STRINGS "${dest}/usr/lib/sysusers.d/pgjobd.conf" sysusers REGEX "^u ")
if(NOT sysusers MATCHES "^u pgjobd - ")
	message(FATAL_ERROR "sysusers.d/pgjobd.conf does not create the user pgjobd: ${sysusers}")
endif()
file(STRINGS "${dest}/usr/lib/tmpfiles.d/pgjobd.conf" tmpfiles REGEX "^d ")
if(NOT tmpfiles STREQUAL "d /etc/pgjobd 0750 root pgjobd -")
	message(FATAL_ERROR "tmpfiles.d/pgjobd.conf: ${tmpfiles}")
endif()

# pgjobd-plugin.pc is relocatable: from wherever the tree is, it names the
# header beside it.
find_program(PKG_CONFIG pkg-config)
if(PKG_CONFIG)
	execute_process(COMMAND ${CMAKE_COMMAND} -E env
		PKG_CONFIG_PATH=${dest}/usr/lib/pkgconfig PKG_CONFIG_LIBDIR=/nonexistent
		${PKG_CONFIG} --variable=includedir pgjobd-plugin
		OUTPUT_VARIABLE inc OUTPUT_STRIP_TRAILING_WHITESPACE
		RESULT_VARIABLE rc)
	if(NOT rc EQUAL 0 OR NOT EXISTS "${inc}/pgjobd/plugin.h")
		message(FATAL_ERROR "pgjobd-plugin.pc: includedir \"${inc}\" has no pgjobd/plugin.h")
	endif()
endif()

# The installed pgjobd is self-contained: it runs from where it was put,
# with nothing but its system libraries beside it.
file(WRITE "${dest}/check.yaml" "database: { conninfo: \"dbname=x\" }\n")
execute_process(COMMAND "${dest}/usr/bin/pgjobd" -c "${dest}/check.yaml"
	--check-config OUTPUT_VARIABLE out ERROR_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
	message(FATAL_ERROR "the installed pgjobd does not run: ${out}")
endif()
# And it finds its plugins relative to itself (handler_plugin_dir()): the
# installed example.yaml, whose plugin is "examples/pgjobd_example",
# validates from this moved tree with an empty environment.
execute_process(COMMAND env -i "${dest}/usr/bin/pgjobd"
	-c "${dest}/usr/share/pgjobd/example.yaml" --check-config
	OUTPUT_VARIABLE out ERROR_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
	message(FATAL_ERROR "the installed example.yaml does not validate: ${out}")
endif()
file(REMOVE_RECURSE "${dest}")
message(STATUS "install: binaries, sql/, config, units, sysusers.d, tmpfiles.d, man pages, header, relocatable pkg-config file and example plugin in place")
