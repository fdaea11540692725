#!/bin/sh
# layers.sh - checks that no file in src/ includes a header of a higher layer.
#
# Usage: layers.sh LAYER=mod,mod,... LAYER=mod,... (lowest layer first; the
# Makefile passes its LAYER_* lists). A module is a .c/.h pair or a lone
# header in src/ ("coord_int" for src/coord_int.h). Every file in src/ must
# belong to a layer; a file may include headers of its own layer and of the
# layers below. Prints one PASS or FAIL line per rule (tests/run.sh counts
# them) and exits non-zero on a violation.
set -u
cd "$(dirname "$0")/.." || exit 2

# Exceptions: "file header reason". Keep this list short; each says why the
# upward include is the right shape rather than a layering mistake.
exceptions='
'

map=$(mktemp)
trap 'rm -f "$map"' EXIT
rank=0
for spec in "$@"; do
  layer=${spec%%=*}
  for m in $(echo "${spec#*=}" | tr ',' ' '); do
    found=0
    for f in "src/$m.c" "src/$m.h"; do
      [ -e "$f" ] && { echo "$(basename "$f") $rank $layer" >>"$map"; found=1; }
    done
    [ "$found" -eq 1 ] || echo "FAIL layers: module $m (layer $layer) has no src/$m.c or src/$m.h"
  done
  rank=$((rank + 1))
done

bad=0
for f in src/*.c src/*.h; do
  b=$(basename "$f")
  me=$(awk -v f="$b" '$1 == f {print $2 " " $3}' "$map")
  if [ -z "$me" ]; then
    echo "FAIL layers: $f is in no layer (add it to a LAYER_ list in the Makefile)"
    bad=$((bad + 1))
    continue
  fi
  myrank=${me%% *}
  for h in $(sed -n 's/^[ \t]*#[ \t]*include[ \t]*"\([^"]*\)".*/\1/p' "$f"); do
    [ -e "src/$h" ] || continue # a generated or external header
    it=$(awk -v f="$h" '$1 == f {print $2 " " $3}' "$map")
    [ -n "$it" ] || continue # reported above as "in no layer"
    hrank=${it%% *}
    [ "$hrank" -le "$myrank" ] && continue
    if echo "$exceptions" | awk -v f="$b" -v h="$h" '$1 == f && $2 == h {ok = 1} END {exit !ok}'; then
      continue
    fi
    echo "FAIL layers: $f (${me#* }) includes $h (${it#* }), a higher layer"
    bad=$((bad + 1))
  done
done
n=$(wc -l <"$map")
if [ "$bad" -eq 0 ]; then
  echo "PASS layers: $n files in $# layers, no include points up"
else
  echo "FAIL layers: $bad includes point up or files are unplaced"
  exit 1
fi
