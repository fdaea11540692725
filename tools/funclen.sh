#!/bin/sh
# funclen.sh - lists functions in src/ longer than 80 lines that do not say
# why. A function may be longer when the comment just above it has a line
# starting "Long:" (or containing " Long: ") giving the reason, e.g.
#   /* ...
#    * Long: one switch over every message type; splitting it would
#    * scatter the protocol. */
# Function bodies are found by their braces in column 0 (the project's
# style: `type name(args) {` ... `}`). Prints PASS/FAIL lines.
set -u
cd "$(dirname "$0")/.." || exit 2
limit=${1:-80}
out=$(awk -v limit="$limit" '
  FNR == 1 { incomment = 0; why = 0; start = 0; sig = 0 }
  # Track the comment block just above a definition.
  /^\/\*/ { why = 0; incomment = 1 }
  incomment && /(^|[ *])Long:/ { why = 1 }
  incomment && /\*\// { incomment = 0; lastcomment = FNR; next }
  # A definition: a line in column 0 with a "(" that is no declaration,
  # its body opening at the end of that line or of a continuation line.
  !start && !sig && /^[A-Za-z_][^;]*\(/ && !/^(if|for|while|switch|do|return)[ (]/ && !/;[ \t]*$/ {
    sig = FNR; name = $0; sub(/\(.*/, "", name); n = split(name, w, /[ *]+/); name = w[n]
    haswhy = why && lastcomment >= FNR - 1
  }
  sig == FNR && /\}[ \t]*;?[ \t]*$/ { sig = 0; next } # a one-line function
  sig && !start && /\{[ \t]*$/ { start = sig; sig = 0; next }
  sig && !start && /;[ \t]*$/ { sig = 0 }
  start && /^\}/ {
    len = FNR - start + 1
    if (len > limit && !haswhy) printf "%s:%d: %s is %d lines\n", FILENAME, start, name, len
    start = 0; why = 0
  }
  start { next }
  !incomment && !sig && !/^[ \t]*$/ && !/^\/\*/ { if (FNR != lastcomment) why = 0 }
' $(find src -name '*.c' | sort))
if [ -z "$out" ]; then
  echo "PASS funclen: no function in src/ over $limit lines without a Long: comment"
else
  echo "$out" | sed 's/^/FAIL funclen: /'
  exit 1
fi
