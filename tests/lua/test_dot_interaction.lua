-- test_dot_interaction.lua - nn.DotInteraction from Lua: values in DLRM's
-- order, keep_first, options and refusals, and a DLRM-style model (a
-- bottom MLP and one embedding per field, their pairwise dot products, a
-- top MLP) trained in process on generated click data and judged by
-- eval.metrics' AUC against the planted model's. The gradient is checked
-- by finite differences in tests/unit/test_nn_interact.c.
local T = dofile("tests/lua/t.lua")
local test, eq, near, raises = table.unpack(T)
local nn, data = drover.nn, drover.data
local DROVER = os.getenv("DROVER") or arg[-1]

test("dot-01 pairs in DLRM's order, keep_first, options", function()
  local x = drover.tensor { { 1, 2, 3, -1, 0.5, 4 }, { 0, 1, 1, 0, 2, 2 } }
  local y = nn.DotInteraction(3)(x)
  eq(y:size(1), 2); eq(y:size(2), 3)
  -- (1,0) (2,0) (2,1): b.a, c.a, c.b
  eq(y[1][1], 1); eq(y[1][2], 8.5); eq(y[1][3], -2.5)
  eq(y[2][1], 0); eq(y[2][2], 2); eq(y[2][3], 2)
  local k = nn.DotInteraction(3, { keep_first = true })
  eq(tostring(k), "nn.DotInteraction(3, keep_first)")
  local yk = k(x)
  eq(yk:size(2), 5); eq(yk[1][1], 1); eq(yk[1][2], 2); eq(yk[1][5], -2.5)
  eq(#k:parameters(), 0)
  raises(function() nn.DotInteraction(1) end, "fields must be at least 2")
  raises(function() nn.DotInteraction(3, { keep = true }) end, "unknown option 'keep'")
  raises(function() nn.DotInteraction(3, { keep_first = 1 }) end, "keep_first must be true or false")
  raises(function() nn.DotInteraction(4)(x) end, "is not [N, 4 * d]")
end)

test("dot-02 a DLRM-style model learns generated clicks (eval.metrics' AUC)", function()
  local path = os.tmpname()
  local p = io.popen(DROVER .. " run examples/gen_ctr.lua " .. path .. " 20000 5")
  local outp = p:read("a")
  assert(p:close(), "gen_ctr failed: " .. outp)
  local planted = tonumber(outp:match("planted_auc=([%d.]+)"))
  local cat = {}
  for c = 15, 40 do cat[#cat + 1] = c end
  local all = data.csv(path, { sep = "\t", label = 1, categorical = cat, buckets = 2^20 })
  local tr, te = all:split(0.8, { seed = 1 })
  local st
  tr, st = tr:standardize()
  te = te:standardize(st)
  drover.seed(1)
  local D = 8
  local model = nn.Sequential {
    nn.Concat { nn.Sequential { nn.Linear(13, D), nn.ReLU() },  -- the dense part: vector 0
                nn.EmbeddingBag(2^20, D, { std = 0.05 }) },     -- 26 fields: vectors 1..26
    nn.DotInteraction(27, { keep_first = true }),               -- [N, 8 + 351]
    nn.Linear(D + 27 * 26 / 2, 32), nn.ReLU(), nn.Linear(32, 1) }
  local exp = drover.experiment { model = model, loss = nn.BCEWithLogits(),
    optimizer = drover.optim.Adam { lr = 3e-3 }, train = { data = tr, batch = 128, epochs = 2 },
    eval = { data = te, metrics = { "auc", "logloss" } }, verbose = false, seed = 1 }
  local r = exp:fit()
  os.remove(path)
  assert(r.eval_auc > 0.78 and r.eval_auc > planted - 0.07,
    ("held-out AUC %.4f (planted %.4f)"):format(r.eval_auc, planted))
  assert(r.eval_logloss < 0.5, "log loss " .. r.eval_logloss)
end)
