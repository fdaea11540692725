#!/bin/sh
# layers.sh - checks that no file in src/ includes a header of a higher layer.
#
# Usage: layers.sh LAYER LAYER ... (lowest first; the Makefile passes its
# LAYERS). A file's layer is the first folder of its path under src/
# (src/cluster/ps/ps.c is in "cluster"); a file directly in src/ is in
# "main". Includes are written from src/ ("base/err.h"), so an include's
# layer is read off its path the same way. A folder that is no layer fails,
# so a new file cannot be in no layer. A file may include headers of its own
# layer and of the layers below. Prints one PASS or FAIL line per rule
# (tests/run.sh counts them) and exits non-zero on a violation.
set -u
cd "$(dirname "$0")/.." || exit 2

layer_of() { # path relative to src/ -> layer name
  case "$1" in */*) echo "${1%%/*}" ;; *) echo main ;; esac
}
rank_of() { # layer -> its rank in the arguments, or nothing
  r=0
  for l in $LAYERS; do
    [ "$l" = "$1" ] && { echo "$r"; return; }
    r=$((r + 1))
  done
}

LAYERS="$*"
bad=0
n=0
for f in $(find src -name '*.[ch]' | sort); do
  p=${f#src/}
  me=$(layer_of "$p")
  myrank=$(rank_of "$me")
  n=$((n + 1))
  if [ -z "$myrank" ]; then
    echo "FAIL layers: $f is in folder '$me', which is no layer (Makefile LAYERS: $LAYERS)"
    bad=$((bad + 1))
    continue
  fi
  for h in $(sed -n 's/^[ \t]*#[ \t]*include[ \t]*"\([^"]*\)".*/\1/p' "$f"); do
    if [ ! -e "src/$h" ]; then
      # A generated header, or one of tests/: neither is in src/.
      case "$h" in */*) echo "FAIL layers: $f includes \"$h\", which is not in src/"; bad=$((bad + 1)) ;; esac
      continue
    fi
    it=$(layer_of "$h")
    hrank=$(rank_of "$it")
    [ "$hrank" -le "$myrank" ] && continue
    echo "FAIL layers: $f ($me) includes $h ($it), a higher layer"
    bad=$((bad + 1))
  done
done
if [ "$bad" -eq 0 ]; then
  echo "PASS layers: $n files in $# layers, no include points up"
else
  echo "FAIL layers: $bad includes point up or files are in no layer"
  exit 1
fi
