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
	usr/lib/systemd/system/pgjobd@.service)
	if(NOT EXISTS "${dest}/${f}")
		message(FATAL_ERROR "missing after install: /${f}")
	endif()
endforeach()
file(GLOB_RECURSE all "${dest}/*")
list(FILTER all INCLUDE REGEX "/pgjobd-plugin\\.pc$|/pgjobd/pgjobd_example\\.so$|/pgjobd/pgjobd_worker\\.so$")
list(LENGTH all found)
set(pc 1)
set(plugin 1)
if(NOT found EQUAL 3)
	set(pc "")
endif()
if(NOT pc OR NOT plugin)
	message(FATAL_ERROR "missing after install: pgjobd-plugin.pc, the example plugin or the worker module")
endif()
# The daemon finds its worker module relative to itself (src/daemon/workermod.h),
# and --check-config loads it to check the conninfo: it must find the
# installed one.
file(WRITE "${dest}/check.yaml" "database: { conninfo: \"dbname=x\" }\n")
execute_process(COMMAND "${dest}/usr/bin/pgjobd" -c "${dest}/check.yaml"
	--check-config OUTPUT_VARIABLE out ERROR_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
	message(FATAL_ERROR "the installed pgjobd cannot load its worker module: ${out}")
endif()
file(REMOVE_RECURSE "${dest}")
message(STATUS "install: binaries, worker module, sql/, config, units, header, pkg-config file and plugin in place")
