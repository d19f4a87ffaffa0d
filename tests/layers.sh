#!/usr/bin/env bash
# The layers of src/ (docs/architecture.md): a file includes only headers of
# its own folder and of the folders below it, <libpq-fe.h> only in src/db/,
# and <ev.h> only in the process and I/O layers.  Prints every include out
# of place and fails if there is one.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

declare -A allowed=(
	[daemon]="daemon worker handlers db common"
	[cli]="cli web db common"
	[web]="web db common"
	[worker]="worker handlers db common"
	[handlers]="handlers common"
	[db]="db common"
	[common]="common"
)
bad=0
for layer in "${!allowed[@]}"; do
	for f in src/"$layer"/*.[ch]; do
		while IFS= read -r inc; do
			dir=${inc%%/*}
			# The public plugin header, include/pgjobd/.
			[ "$dir" = pgjobd ] && [ "$layer" = handlers ] && continue
			case " ${allowed[$layer]} " in
			*" $dir "*) ;;
			*) echo "$f: includes $inc (a $layer file may include: ${allowed[$layer]})"
			   bad=1 ;;
			esac
		done < <(sed -n 's/^#include "\([a-z_]*\/[a-z_]*\.h\)".*/\1/p' "$f")
		if grep -q '^#include <libpq-fe.h>' "$f" && [ "$layer" != db ]; then
			echo "$f: includes <libpq-fe.h> outside src/db"
			bad=1
		fi
		if grep -q '^#include <ev.h>' "$f" && [ "$layer" = common ] || \
		   { grep -q '^#include <ev.h>' "$f" && [ "$layer" = cli ]; }; then
			echo "$f: includes <ev.h> in a layer without a loop"
			bad=1
		fi
		if grep -q '^#include "[a-z_]*\.h"' "$f"; then
			echo "$f: includes a header without its folder"
			bad=1
		fi
	done
done
[ "$bad" = 0 ] && echo "layers: every include points down"
exit "$bad"
