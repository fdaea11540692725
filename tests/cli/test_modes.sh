#!/bin/sh
# test_modes.sh - the files of a run directory are created with explicit
# modes: under `umask 000` no record or log is world-writable (a plain fopen
# would make them 0666), and the run's secret stays 0600.
. tests/cli/lib.sh

cat >"$TMP/cluster.lua" <<'LUA'
local nn, optim, data = drover.nn, drover.optim, drover.data
local d = data.synthetic { n = 64, features = 4, classes = 2 }
local e = drover.experiment { name = "modes", model = nn.Sequential { nn.Linear(4, 2) },
  loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 0.1 },
  train = { data = d, batch = 8, epochs = 2 }, verbose = false, runs = arg[1] }
e:fit()
local c <close> = drover.cluster { ps = 1, worker = 1, runs = arg[1], name = "modes" }
c:fit(e)
c:shutdown()
LUA

(umask 000 && timeout 120 "$DROVER" run "$TMP/cluster.lua" "$TMP/runs") >"$TMP/out" 2>&1
check "modes-01 the run succeeds under umask 000" [ $? -eq 0 ]
# Every regular file drover made in the run directories: none writable by
# group or others.
loose=$(find "$TMP/runs" -type f -perm /022 -printf '%m %p\n')
check "modes-01 no file is group- or world-writable (${loose:-none})" [ -z "$loose" ]
for f in events.log metrics.jsonl logs/coordinator.log; do
  n=$(find "$TMP/runs" -path "*/$f" | wc -l)
  check "modes-01 $f was made ($n)" [ "$n" -ge 1 ]
done
secret=$(find "$TMP/runs" -name secret -printf '%m\n' | sort -u)
check "modes-01 the secret is 0600 (${secret:-none})" [ "$secret" = 600 ]
