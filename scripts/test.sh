#!/usr/bin/env bash
# The test command: installs what is missing, builds with warnings as errors,
# and runs every test through ctest.  ctest itself starts a throwaway
# PostgreSQL (the "pg" fixture, scripts/testpg.sh) and removes it at the end.
# Extra arguments go to ctest (for example -L unit, or -R config).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${PGJOBD_BUILD_DIR:-$root/build}

bash "$root/scripts/deps.sh"
cmake -S "$root" -B "$build" -DPGJOBD_WERROR=ON >/dev/null
cmake --build "$build" -j"$(nproc)"
# Should ctest be killed half-way, the fixture's cleanup never runs.
trap 'bash "$root/scripts/testpg.sh" stop "$build/testpg" >/dev/null 2>&1 || true' EXIT
cd "$build"
ctest --output-on-failure --timeout 600 "$@"
