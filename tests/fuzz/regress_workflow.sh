#!/usr/bin/env bash
# fuzz.workflow.regressions: fuzz_workflow's kept inputs (regressions/ and
# the seed corpus) through the plain runner, against a database of its own
# on the test PostgreSQL (ctest's fixture "pg"), made and migrated here and
# dropped after.
#
#   regress_workflow.sh RUNNER FUZZ_DIR
set -euo pipefail

runner=${1:?usage: regress_workflow.sh RUNNER FUZZ_DIR}
here=${2:?usage: regress_workflow.sh RUNNER FUZZ_DIR}
ci=$(cat "${PGJOBD_TESTPG:?PGJOBD_TESTPG: the test PostgreSQL}/conninfo")
db_name=t_fuzz_workflow
psql "$ci" -qX -v ON_ERROR_STOP=1 -c "drop database if exists $db_name" \
	-c "create database $db_name" >/dev/null
trap 'psql "$ci" -qX -c "drop database if exists $db_name" >/dev/null 2>&1 || true' EXIT
db=${ci/dbname=postgres/dbname=$db_name}
"${PGJOBD_TEST_BIN:?}/pgjob" --database "$db" migrate >/dev/null
PGJOBD_FUZZ_DB=$db "$runner" "$here/regressions/workflow" "$here/corpus/workflow"
