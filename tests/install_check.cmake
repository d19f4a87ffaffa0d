# Installs the build into a scratch DESTDIR and checks that everything a
# packager expects is there.  Run by ctest as "install".
set(dest "${BUILD}/install-check")
file(REMOVE_RECURSE "${dest}")
execute_process(COMMAND ${CMAKE_COMMAND} -E env DESTDIR=${dest}
	${CMAKE_COMMAND} --install "${BUILD}" --prefix /usr
	RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
	message(FATAL_ERROR "cmake --install failed: ${rc}")
endif()
foreach(f usr/bin/pgjobd usr/bin/pgjob usr/include/pgjobd/plugin.h
	usr/share/pgjobd/example.yaml usr/share/pgjobd/sql/001_init.sql
	usr/lib/systemd/system/pgjobd.service
	usr/lib/systemd/system/pgjobd@.service
	usr/share/pgjobd/monitoring/grafana-dashboard.json
	usr/share/pgjobd/monitoring/pgjobd-alerts.yml)
	if(NOT EXISTS "${dest}/${f}")
		message(FATAL_ERROR "missing after install: /${f}")
	endif()
endforeach()
file(GLOB_RECURSE all "${dest}/*")
list(FILTER all INCLUDE REGEX "/pgjobd-plugin\\.pc$|/pgjobd/pgjobd_example\\.so$")
list(LENGTH all found)
if(NOT found EQUAL 2)
	message(FATAL_ERROR "missing after install: pgjobd-plugin.pc or the example plugin")
endif()
# The installed pgjobd is self-contained: it runs from where it was put,
# with nothing but its system libraries beside it.
file(WRITE "${dest}/check.yaml" "database: { conninfo: \"dbname=x\" }\n")
execute_process(COMMAND "${dest}/usr/bin/pgjobd" -c "${dest}/check.yaml"
	--check-config OUTPUT_VARIABLE out ERROR_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
	message(FATAL_ERROR "the installed pgjobd does not run: ${out}")
endif()
file(REMOVE_RECURSE "${dest}")
message(STATUS "install: binaries, sql/, config, units, header, pkg-config file and plugin in place")
