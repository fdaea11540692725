-- ctr_setup.lua - the data and model the sparse cluster tests share
-- (dofile'd by their scripts, run from the repository): examples/gen_ctr.lua's
-- Criteo-format file read with its 26 categorical columns hashed into
-- `rows` buckets, and a small wide & deep model over it.
local M = {}

-- M.split(path, rows): the file's 80/20 split (seed 1), both standardized
-- with the training part's statistics.
function M.split(path, rows)
  local cat = {}
  for c = 15, 40 do cat[#cat + 1] = c end
  local d = drover.data.csv(path, { sep = "\t", label = 1, categorical = cat, buckets = rows })
  local train, test = d:split(0.8, { seed = 1 })
  local stats
  train, stats = train:standardize()
  return train, test:standardize(stats)
end

-- M.wide_deep(rows): a SparseLinear wide part plus an EmbeddingBag of 4
-- per field under a 13 + 104 -> 8 -> 1 MLP, from seed 4 (so two scripts
-- build the same starting model).
function M.wide_deep(rows)
  local nn = drover.nn
  drover.seed(4)
  local deep = nn.Sequential { nn.Concat { nn.Identity(), nn.EmbeddingBag(rows, 4) },
    nn.Linear(13 + 26 * 4, 8), nn.ReLU(), nn.Linear(8, 1) }
  return nn.Sum { nn.SparseLinear(rows, 1), deep }
end

return M
