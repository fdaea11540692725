#!/bin/sh
# archmap.sh - checks that docs/ARCHITECTURE.md is still a map of src/.
#
# A map that leaves out a module misleads the next reader, so:
#  - every folder under src/ is named in the map as `src/DIR/` (or `DIR/`);
#  - every module is named in code quotes: a .c file by its stem
#    (`coord_feed`) or its file name (`coord_feed.c`, `coord_feed.*`), a
#    header without a .c of the same name (a "lone" header) by its file
#    name (`le.h`);
#  - every source file the map, docs/design/ and CONTRIBUTING.md name in
#    code quotes (`x.c`, `x.h`, `src/...`) exists, so a rename is noticed;
#  - those pages keep lines of at most 100 characters, and the map stays a
#    map: at most MAP_LINES lines (the detail goes to docs/design/).
# Prints a FAIL line per problem and a closing PASS or FAIL line
# (tests/run.sh counts them), and exits non-zero on a failure.
set -uf # -f: the quoted words are not globbed by the shell (`coord_feed.*`)
cd "$(dirname "$0")/.." || exit 2
MAP=docs/ARCHITECTURE.md
MAP_LINES=220
WIDTH=100

bad=0
fail() { echo "FAIL archmap: $*"; bad=$((bad + 1)); }

# The code-quoted words of the files given: one per line, sorted. Spans
# with a placeholder (`launch_<name>.c`) name no file and are left out.
quoted() {
  grep -ho '`[^`]*`' "$@" 2>/dev/null | grep -v '[<>]' | tr -d '`' |
    tr -cs 'A-Za-z0-9_./*-' '\n' | sort -u
}

[ -f "$MAP" ] || { echo "FAIL archmap: $MAP is missing"; exit 1; }
words=$(quoted "$MAP")
has() { printf '%s\n' "$words" | grep -qxF -- "$1"; }

nfold=0
for d in $(find src -mindepth 1 -type d | sort); do
  nfold=$((nfold + 1))
  rel=${d#src/}
  has "$d/" || has "$d" || has "$rel/" || fail "$MAP does not name the folder $d/"
done

nmod=0
for f in $(find src -name '*.c' | sort); do
  nmod=$((nmod + 1))
  b=$(basename "$f" .c)
  has "$b" || has "$b.c" || has "$b.h" || has "$b.*" || has "$f" || has "${f#src/}" ||
    fail "$MAP does not name the module $b ($f)"
done
for f in $(find src -name '*.h' | sort); do
  [ -e "${f%.h}.c" ] && continue
  nmod=$((nmod + 1))
  b=$(basename "$f")
  has "$b" || has "$f" || has "${f#src/}" || fail "$MAP does not name the header $b ($f)"
done

# Names of source files that exist anywhere in the tree (not build/).
pages="$MAP CONTRIBUTING.md $(find docs/design -name '*.md' 2>/dev/null | sort)"
known=$(find . -path ./build -prune -o -path ./.git -prune -o -type f -name '*.[ch]' -print |
  sed 's|.*/||' | sort -u)
nname=0
for p in $pages; do
  [ -f "$p" ] || continue
  for w in $(quoted "$p"); do
    case "$w" in
      src/*)
        nname=$((nname + 1))
        # a glob such as src/launch/launch_*.c names files that exist
        set +f
        set -- $w
        set -f
        [ -e "$1" ] || fail "$p names $w, which is not in the tree" ;;
      */* | .*) ;;
      *'*'*.[ch])
        # a pattern such as *_int.h names at least one file
        nname=$((nname + 1))
        found=
        for k in $known; do case "$k" in $w) found=1; break ;; esac; done
        [ -n "$found" ] || fail "$p names $w, which matches no file in the tree" ;;
      *.c | *.h)
        nname=$((nname + 1))
        printf '%s\n' "$known" | grep -qxF -- "$w" || fail "$p names $w, which is not in the tree" ;;
    esac
  done
done

nl=$(wc -l <"$MAP")
[ "$nl" -le "$MAP_LINES" ] || fail "$MAP has $nl lines: a map has at most $MAP_LINES (move detail to docs/design/)"
for p in $pages; do
  [ -f "$p" ] || continue
  # characters, not bytes: UTF-8 continuation bytes are not counted
  LC_ALL=C awk -v w="$WIDTH" -v p="$p" '
    { s = $0; gsub(/[\200-\277]/, "", s) }
    length(s) > w { printf "FAIL archmap: %s:%d is %d characters (at most %d)\n", p, FNR, length(s), w; n++ }
    END { exit n > 0 }' "$p" || bad=$((bad + 1))
done

if [ "$bad" -eq 0 ]; then
  echo "PASS archmap: $MAP names $nfold folders and $nmod modules; $nname file names in the docs exist"
else
  echo "FAIL archmap: $bad problems"
  exit 1
fi
