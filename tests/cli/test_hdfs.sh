# test_hdfs.sh - `drover hdfs` and the WebHDFS client (base/webhdfs.h)
# against a real HDFS: Hadoop's MiniDFSCluster (a NameNode and a DataNode
# in one JVM on loopback, permissions on, 1 MiB blocks) started by
# tests/hdfs/start.sh and stopped by stop.sh at exit. Files written by
# drover are read back by Hadoop's own client (drover.yarn.HdfsShell: RPC
# and the DataNode's transfer protocol, no WebHDFS) and the other way
# round; reads with an offset cross block boundaries; a rename onto an
# existing file fails; errors name the URL and HDFS's exception for a
# missing file, a permission denied to another user and a NameNode that
# is down. Skipped, with the reason, where Java or the built jars are
# missing (start.sh exits 77; `make test` builds them with `make
# yarn-deps`); DROVER_HDFS_REQUIRED=1 (CI) makes that a failure.
# run.sh timeout: 420
. tests/cli/lib.sh
: "${DROVER_HDFS_DIR:=$TMP/hdfs}"
export DROVER_HDFS_DIR
unset HADOOP_USER_NAME

engine_start hdfs "hdfs-t00 tests/hdfs/start.sh starts the test HDFS"
. "$DROVER_HDFS_DIR/env"
pass "hdfs-t00 tests/hdfs/start.sh starts the test HDFS"

H=$DROVER_HDFS          # hdfs://127.0.0.1:RPC: the HTTP address from HADOOP_CONF_DIR
W=$DROVER_WEBHDFS       # webhdfs://127.0.0.1:HTTP: no configuration needed
# drover hdfs, bounded; its stdout in $TMP/out, stderr in $TMP/err.
dh() { timeout 120 "$DROVER" hdfs "$@" >"$TMP/out" 2>"$TMP/err"; }
# Hadoop's own client (a JVM per call).
hshell() { timeout 120 java -cp "$DROVER_HDFS_CLASSPATH" drover.yarn.HdfsShell "$@" 2>>"$TMP/java.err"; }
has() { grep -q -- "$2" "$1"; }
# as USER CMD...: CMD as HDFS user USER (simple authentication's user.name).
as() { (HADOOP_USER_NAME=$1; export HADOOP_USER_NAME; shift; "$@"); }

head -c 4194311 /dev/urandom >"$TMP/big.bin" # 4 MiB and a bit: five blocks

# hdfs-t01: a binary file of a few MB goes up and comes back bit-identical,
# by hdfs:// (through HADOOP_CONF_DIR) and by webhdfs://.
dh mkdir "$H/t01/sub" && dh put "$TMP/big.bin" "$H/t01/big.bin" && dh get "$W/t01/big.bin" "$TMP/back.bin" &&
  cmp -s "$TMP/big.bin" "$TMP/back.bin" && ! [ -e "$TMP/back.bin.part" ] &&
  dh put "$TMP/big.bin" "hdfs:///t01/sub/" && dh get "hdfs:///t01/sub/big.bin" - && cmp -s "$TMP/out" "$TMP/big.bin"
r01=$?
check "hdfs-t01 put/get of 4 MiB round-trips bit-identical (hdfs:// and webhdfs://)" [ $r01 -eq 0 ]

# hdfs-t02: Hadoop's client reads what drover wrote (stdin, streamed
# without a length), and drover reads what Hadoop's client wrote.
cat "$TMP/big.bin" | timeout 120 "$DROVER" hdfs put - "$H/t02-drover.bin" 2>"$TMP/err"
r=$?
hshell cat /t02-drover.bin >"$TMP/j.bin"
check "hdfs-t02a Hadoop's client reads drover's file (streamed from stdin) bit-identical" \
  sh -c "[ $r -eq 0 ] && cmp -s '$TMP/big.bin' '$TMP/j.bin'"
hshell put /t02-hadoop.bin <"$TMP/big.bin"
dh cat "$W/t02-hadoop.bin"
check "hdfs-t02b drover reads the file Hadoop's client wrote bit-identical" cmp -s "$TMP/big.bin" "$TMP/out"

# hdfs-t03: reads from an offset, a length at most, across block
# boundaries (1 MiB blocks); a length past the end gives the rest.
ok=1
for ol in "0 10" "1048570 20" "1048576 1048576" "3000000 1194311" "4194300 100"; do
  set -- $ol
  dh cat --offset "$1" --length "$2" "$H/t01/big.bin" || ok=0
  tail -c +$(($1 + 1)) "$TMP/big.bin" | head -c "$2" >"$TMP/want"
  cmp -s "$TMP/out" "$TMP/want" || { ok=0; echo "offset $1 length $2 differs"; }
done
dh cat --offset 4194311 "$H/t01/big.bin" && [ ! -s "$TMP/out" ] || echo "offset at the end: $(cat "$TMP/err")"
check "hdfs-t03 cat --offset --length returns exactly those bytes across blocks" [ $ok = 1 ]

# hdfs-t04: ls and stat give the sizes, types and owner.
dh ls "$H/t01"
grep -Eq "^- +4194311 .* big\.bin$" "$TMP/out" && grep -Eq "^d +0 .* sub/$" "$TMP/out"
r=$?
dh ls "$W/"
grep -Eq "^d +0 .* t01/$" "$TMP/out" && [ $r -eq 0 ]
r=$?
dh stat "$W/t01/big.bin" && has "$TMP/out" "size: 4194311" && has "$TMP/out" "type: file" &&
  has "$TMP/out" "owner: $(id -un)" && dh stat "$H/t01" && has "$TMP/out" "type: directory" && [ $r -eq 0 ]
check "hdfs-t04 ls and stat report the sizes, types and owner" [ $? -eq 0 ]

# hdfs-t05: rename commits a file; onto an existing file it fails and
# leaves both as they were.
printf 'first\n' >"$TMP/a.txt"; printf 'second\n' >"$TMP/b.txt"
dh put "$TMP/a.txt" "$H/t05/a.tmp" && dh mv "$H/t05/a.tmp" "$H/t05/a.txt" && dh cat "$H/t05/a.txt" &&
  [ "$(cat "$TMP/out")" = first ] && ! dh stat "$H/t05/a.tmp"
check "hdfs-t05a mv renames: the new name has the bytes, the old is gone" [ $? -eq 0 ]
dh put "$TMP/b.txt" "$H/t05/b.txt"
dh mv "$H/t05/b.txt" "$W/t05/a.txt"
r=$?
cp "$TMP/err" "$TMP/mv.err"
dh cat "$H/t05/a.txt" && [ "$(cat "$TMP/out")" = first ] && dh cat "$H/t05/b.txt" && [ "$(cat "$TMP/out")" = second ]
check "hdfs-t05b mv onto an existing file fails clearly and changes nothing" \
  sh -c "[ $r -eq 1 ] && [ $? -eq 0 ] && grep -q 'the destination exists' '$TMP/mv.err'"
dh mv "$H/t05/nope" "$H/t05/x"
check "hdfs-t05c mv of a missing source names it" sh -c "[ $? -eq 1 ] && grep -q 'source does not exist' '$TMP/err'"

# hdfs-t06: rm -r removes a tree; rm of what is not there fails.
dh rm "$H/t05"
r=$? # a non-empty directory without -r: refused
dh rm -r "$H/t05" && ! dh ls "$H/t05" && has "$TMP/err" "FileNotFoundException" && [ $r -eq 1 ]
r=$?
dh rm "$H/t05"
check "hdfs-t06 rm -r removes a directory tree; rm refuses a non-empty one and a missing one" \
  sh -c "[ $r -eq 0 ] && [ $? -eq 1 ] && grep -q 'no such file' '$TMP/err'"

# hdfs-t07: a missing file: the URL and Hadoop's FileNotFoundException.
dh cat "$H/t07/missing.csv"
check "hdfs-t07 a missing file names the URL, the status and FileNotFoundException" \
  sh -c "[ $? -eq 1 ] && grep -q '$H/t07/missing.csv: HTTP 404: FileNotFoundException: File /t07/missing.csv' '$TMP/err'"

# hdfs-t08: another user's 0700 file and directory: permission denied,
# with HDFS's AccessControlException naming the user.
echo secret | as alice hshell put /tmp/alice.txt 700
as alice dh mkdir "$H/tmp/alice-dir"
dh stat "$H/tmp/alice.txt" && has "$TMP/out" "owner: alice" && has "$TMP/out" "permission: 0700"
r=$?
as bob dh cat "$H/tmp/alice.txt"
check "hdfs-t08a reading another user's 0700 file: permission denied" \
  sh -c "[ $r -eq 0 ] && [ $? -eq 1 ] && grep -q 'HTTP 403: AccessControlException: Permission denied: user=bob, access=READ' '$TMP/err'"
as bob dh put "$TMP/a.txt" "$H/tmp/alice-dir/x"
check "hdfs-t08b writing into another user's directory: permission denied" \
  sh -c "[ $? -eq 1 ] && grep -q 'AccessControlException: Permission denied: user=bob, access=WRITE' '$TMP/err'"

# hdfs-t09: put does not replace a file unless -f.
dh put "$TMP/a.txt" "$H/t01/big.bin"
r=$?
has "$TMP/err" "FileAlreadyExistsException" && dh put -f "$TMP/a.txt" "$H/t01/big.bin" &&
  dh cat "$H/t01/big.bin" && [ "$(cat "$TMP/out")" = first ] && [ $r -eq 1 ]
check "hdfs-t09 put refuses to replace a file (FileAlreadyExistsException); -f replaces it" [ $? -eq 0 ]

# hdfs-t10: usage errors exit 2; a path that is no URL, 1 with why.
dh; r1=$?
dh frob "$H/x"; r2=$?
dh cat /etc/hostname; r3=$?
check "hdfs-t10 usage errors exit 2; a local path is refused as not a URL" \
  sh -c "[ $r1 -eq 2 ] && [ $r2 -eq 2 ] && [ $r3 -eq 1 ] && grep -q 'not an hdfs:// or webhdfs:// URL' '$TMP/err'"

# hdfs-t11: the C API's own cases (tests/unit/test_webhdfs_live.c) against
# this HDFS: buffers and readers, read_all's bound, callbacks' errors,
# list, mkdirs, delete, rename, several threads.
UNIT=${UNIT:-$PWD/build/unit_tests}
if [ -x "$UNIT" ]; then
  DROVER_WEBHDFS=$W timeout 180 "$UNIT" webhdfs_live >"$TMP/unit.out" 2>&1
  r=$?
  sed -n 's/^\(PASS\|FAIL\) /\1 hdfs-t11 /p' "$TMP/unit.out"
  [ $r -eq 0 ] || fail "hdfs-t11 unit_tests webhdfs_live" "exit $r: $(tail -n 5 "$TMP/unit.out")"
else
  echo "SKIP hdfs-t11: no $UNIT (make unit)"
fi

# hdfs-t12: the NameNode down: a bounded, clear error naming it.
bash tests/hdfs/stop.sh 2>/dev/null
t0=$(date +%s)
dh ls "$W/"
r=$?
t1=$(date +%s)
check "hdfs-t12 with the NameNode stopped: exit 1 within 15 s naming the NameNode" \
  sh -c "[ $r -eq 1 ] && [ $((t1 - t0)) -le 15 ] && grep -q 'the NameNode at http://127.0.0.1:' '$TMP/err'"
[ $r -eq 1 ] || cat "$TMP/err"
