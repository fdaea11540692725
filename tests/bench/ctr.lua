-- ctr.lua - drover's side of tests/bench/ctr.sh: the wide & deep model of
-- tests/bench/torch_ctr.py (the same data, hash, layers, batch 256, Adam
-- 1e-3, embeddings N(0, 0.01^2)), trained in process for SECONDS of steps
-- after 20 warm-up ones; prints "drover_samples_per_sec N".
--   drover run tests/bench/ctr.lua FILE.tsv BUCKETS SECONDS
local nn = drover.nn
local path, buckets, secs = arg[1], tonumber(arg[2]), tonumber(arg[3])
local cat = {}
for c = 15, 40 do cat[#cat + 1] = c end
local d = drover.data.csv(path, { sep = "\t", label = 1, categorical = cat, buckets = buckets,
                                  header = false })
drover.seed(1)
local deep = nn.Sequential {
  nn.Concat { nn.Identity(), nn.EmbeddingBag(buckets, 16, { std = 0.01 }) },
  nn.Linear(13 + 26 * 16, 64), nn.ReLU(), nn.Linear(64, 1) }
local model = nn.Sum { nn.SparseLinear(buckets, 1, { std = 0.01 }), deep }
local B, steps, t0 = 256, 0, 0
local exp = drover.experiment {
  model = model, loss = nn.BCEWithLogits(), optimizer = drover.optim.Adam { lr = 1e-3 },
  train = { data = d, batch = B, epochs = 100 }, verbose = false, runs = false, seed = 1,
  progress = function(p)
    steps = steps + 1
    if steps == 20 then t0 = drover.clock() end
    if steps > 20 and drover.clock() - t0 >= secs then return false end
  end }
exp:fit()
print(("drover_samples_per_sec %.0f"):format((steps - 20) * B / (drover.clock() - t0)))
