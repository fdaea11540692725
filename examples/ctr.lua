-- ctr.lua - a wide & deep click-through model on Criteo-format data, in
-- process: 13 integer columns (dense, standardised) and 26 categorical
-- columns hashed into ids, an embedding per field for the deep part and a
-- sparse linear model for the wide part, trained with lazy Adam (only the
-- rows a batch touches move). Prints the held-out AUC and log loss.
--
--   drover run examples/ctr.lua [FILE.tsv [EPOCHS [wide]]]
--
-- "wide" trains the wide part alone (a logistic regression over the ids and
-- the integers: the planted model's own form, which tests/cli/test_ctr.sh
-- checks against the planted AUC).
-- Without FILE it makes one: 100,000 rows from examples/gen_ctr.lua's
-- planted model (whose own AUC it prints: the most a model can reach).
local nn, data = drover.nn, drover.data

local path, epochs, wide = arg[1], tonumber(arg[2] or "3"), arg[3] == "wide"
if not path then
  path = os.tmpname()
  local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
  local saved = arg
  arg = { path, 100000, 1 }
  dofile(here .. "gen_ctr.lua") -- prints planted_auc=...
  arg = saved
end

local BUCKETS, DIM = 2 ^ 20, 8
local categorical = {}
for c = 15, 40 do categorical[#categorical + 1] = c end
local all = data.csv(path, { sep = "\t", label = 1, categorical = categorical,
                             buckets = BUCKETS, header = false })
local train, test = all:split(0.8, { seed = 1 })
local stats
train, stats = train:standardize()
test = test:standardize(stats)
print(train)

drover.seed(1)
local deep = nn.Sequential {
  nn.Concat { nn.Identity(), nn.EmbeddingBag(BUCKETS, DIM, { std = 0.01 }) }, -- 13 + 26 x 8
  nn.Linear(13 + 26 * DIM, 64), nn.ReLU(), nn.Linear(64, 1) }
local model = nn.Sum { nn.SparseLinear(BUCKETS, 1), wide and nn.Linear(13, 1) or deep }

local exp = drover.experiment {
  name = "ctr", model = model, loss = nn.BCEWithLogits(),
  optimizer = drover.optim.Adam { lr = wide and 1e-2 or 2e-3 },
  train = { data = train, batch = 256, epochs = epochs },
  -- AUC by ranks (ties averaged) and log loss over the held-out rows, at the end
  eval = { data = test, metrics = { "auc", "logloss" } },
  verbose = false, seed = 1 }
local t0 = drover.clock()
local r = exp:fit()
local secs = drover.clock() - t0

print(("held-out AUC %.4f, log loss %.4f over %d rows"):format(r.eval_auc, r.eval_logloss, #test))
print(("%d epochs in %.1f s: %.0f samples/s"):format(epochs, secs, epochs * #train / secs))
for _, t in ipairs(model:tables()) do
  print(("table %s: %d of %d rows held, %.1f MB"):format(t.name, t.held, t.rows, t.bytes / 2 ^ 20))
end
if not arg[1] then os.remove(path) end
