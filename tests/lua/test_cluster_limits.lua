-- test_cluster_limits.lua - what a cluster's frames bound (wire.h's 256 MiB
-- WIRE_DEFAULT_MAX_FRAME): a worker pulls and pushes all its shards on one
-- ps in one frame, so a ps that would hold more parameters than a frame
-- carries is refused at placement, naming the ps and the remedy, before
-- any transfer (a ps used to close the VAR_INIT's connection and the fit
-- failed with "ps:0 was lost"). A new replica's copy of a ps's whole state
-- (values and optimizer slots, several times that) is streamed in bounded
-- frames instead: tests/unit/test_ps_repl.c and docs/keeping-a-run.md.
local T = dofile("tests/lua/t.lua")
local test, eq, near, raises = table.unpack(T)
local nn, optim, data = drover.nn, drover.optim, drover.data
local RUNS = T.RUNS

test("cluster-limits-01 a ps holding more than a frame is refused at placement, with the remedy", function()
  local c <close> = drover.cluster { ps = 1, worker = 1, runs = RUNS, name = "limits" }
  -- 8200 x 8200 floats: 256.5 MiB, one variable, so one shard on the one ps
  local exp = drover.experiment { name = "limits", loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 0.1 },
    model = nn.Sequential { nn.Linear(8200, 8200) },
    train = { data = data.synthetic { n = 8, features = 8200, classes = 2, seed = 1 }, batch = 8 },
    verbose = false }
  raises(function() c:fit(exp) end, "ps:0 would hold 256.5 MiB of parameters")
  raises(function() c:fit(exp) end, "use more ps")
  -- the cluster is still usable: a model that fits trains
  local r = c:fit(drover.experiment { name = "limits", loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 0.1 },
    model = nn.Sequential { nn.Linear(4, 2) },
    train = { data = data.synthetic { n = 32, features = 4, classes = 2, seed = 1 }, batch = 8 },
    verbose = false })
  eq(r.steps, 4, "one epoch of 4 batches")
end)
