-- test_nn_sparse.lua - the id layers from Lua: constructors, printing,
-- options, model:tables(), refusals, an in-process fit of a table-backed
-- nn.Embedding with a lazy optimizer, and tables in files (model files,
-- checkpoints, exp:save and load).
local test, eq, near, raises = table.unpack(dofile("tests/lua/t.lua"))
local nn, T = drover.nn, drover.tensor

test("sparse-01 constructors, printing, options and tables()", function()
  eq(tostring(nn.EmbeddingBag(2^24, 8, { mode = "mean", bags = "all" })),
    "nn.EmbeddingBag(16777216, 8, mean, all)")
  eq(tostring(nn.SparseLinear(2^40, 1)), "nn.SparseLinear(1099511627776 -> 1)")
  eq(tostring(nn.Embedding(10, 2, { sparse = false })), "nn.Embedding(10, 2)")
  local e = nn.Embedding(1000, 4, { sparse = true, std = 0.5 })
  eq(tostring(e), "nn.Embedding(1000, 4, sparse)")
  eq(#e:parameters(), 0, "a table is no dense parameter")
  local y = e(T { { 1, 2 }, { 3, 1 } })
  eq(y:size(3), 4)
  local t = e:tables()[1]
  eq(t.name, "weight"); eq(t.rows, 1000); eq(t.dim, 4); eq(t.held, 3)
  assert(t.bytes > 0 and t.bytes < 1e6, "bytes " .. t.bytes)
  local m = nn.Sequential { nn.Concat():add(nn.Identity()):add(nn.EmbeddingBag(100, 2)) }
  eq(m:tables()[1].name, "1.2.weight")
  raises(function() nn.EmbeddingBag(10, 2, { mdoe = "sum" }) end, "unknown option 'mdoe'")
  raises(function() nn.EmbeddingBag(10, 2, { bags = "each" }) end, "bags must be")
  raises(function() nn.SparseLinear(10, 2, { std = -1 }) end, "std must be")
  raises(function() nn.Embedding(10, 2, { std = 1 }) end, "std is an option of sparse = true")
  raises(function() nn.EmbeddingBag(2^41, 2) end, "2^40")
  raises(function() m(T { { 1 } }) end, "no sparse input")
end)

test("sparse-01b a model file holds the touched rows; nn.load rebuilds the tables from the spec", function()
  local p = os.tmpname()
  local f = assert(io.open(p, "w"))
  f:write("1 3:0.5 4294967296:2\n0 10:1\n1 3:1 77:1\n0 5:1 10:2\n")
  f:close()
  local d = drover.data.libsvm(p, { sparse = true })
  drover.seed(8)
  local bag = nn.EmbeddingBag(2^33, 3, { bags = "all", std = 0.5 })
  local m = nn.Sum { nn.Sequential { bag, nn.Linear(3, 1) }, nn.SparseLinear(2^33, 1) }
  local function exp_of(model)
    return drover.experiment { model = model, loss = nn.BCEWithLogits(),
      optimizer = drover.optim.Adam { lr = 0.1 }, train = { data = d, batch = 2, epochs = 3 },
      verbose = false }
  end
  local e = exp_of(m)
  e:fit()
  eq(bag:tables()[1].held, 5, "rows held: the ids the data holds")
  local y = e:predict(d)
  m:save(p .. ".st")
  local back = nn.load(p .. ".st")
  eq(tostring(back), tostring(m))
  eq(back:tables()[1].held, 5)
  local y2 = exp_of(back):predict(d)
  for i = 1, #d do eq(y2[i][1], y[i][1], "row " .. i .. " (bit for bit)") end
  os.remove(p); os.remove(p .. ".st")
end)

test("sparse-02 a table-backed Embedding learns in process, holding only touched rows", function()
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  for i = 0, 399 do
    local a, b = (i * 7) % 50, (i * 3) % 20
    f:write(string.format("%d,%d,%d\n", a, b, a < 25 and 1 or 0))
  end
  f:close()
  local d = drover.data.csv(path, { label = -1 })
  drover.seed(2)
  local emb = nn.Embedding(1000000, 4, { sparse = true })
  local before = emb(T { { 0 } }):totable()[1][1][1]
  local exp = drover.experiment {
    model = nn.Sequential { emb, nn.Flatten(), nn.Linear(8, 2) },
    loss = nn.CrossEntropy(), optimizer = drover.optim.Adagrad { lr = 0.3 },
    train = { data = d, batch = 20, epochs = 15 }, eval = { data = d, every = 1000 },
    verbose = false, seed = 1 }
  local r = exp:fit()
  os.remove(path)
  assert(r.eval_accuracy >= 0.95, "eval accuracy " .. r.eval_accuracy)
  eq(emb:tables()[1].held, 50, "rows held: the ids the data holds")
  assert(emb(T { { 0 } }):totable()[1][1][1] ~= before, "the optimizer moved row 0")
end)

test("nn-sparse-03 checkpoints and exp:save hold tables with lazy Adam's rows; a loaded experiment goes on as the original", function()
  local dir = os.tmpname()
  os.remove(dir)
  os.execute("mkdir -p " .. dir)
  local f = assert(io.open(dir .. "/ids.csv", "w"))
  for i = 0, 63 do f:write(string.format("%d,%d,%d\n", (i * 7) % 40, (i * 3) % 30, i % 2)) end
  f:close()
  local d = drover.data.csv(dir .. "/ids.csv", { label = -1 })
  local function build(emb)
    return drover.experiment {
      model = nn.Sequential { emb, nn.Flatten(), nn.Linear(4, 2) }, loss = nn.CrossEntropy(),
      optimizer = drover.optim.Adam { lr = 0.05 }, train = { data = d, batch = 8, epochs = 2 },
      verbose = false, checkpoint = { every = 4 }, runs = dir .. "/runs", seed = 3 }
  end
  drover.seed(5)
  local exp = build(nn.Embedding(100, 2, { sparse = true }))
  exp:fit()
  local held = exp.model:tables()[1].held
  assert(held > 0, "rows held " .. held)
  local h = io.popen("ls " .. exp:run_dir() .. "/checkpoints")
  local steps = h:read("a")
  h:close()
  assert(steps:find("step%-16"), "checkpoints: " .. steps)
  exp:save(dir .. "/saved")
  local back = drover.experiment.load(dir .. "/saved", { train = { data = d } })
  eq(back.model:tables()[1].held, held)
  exp:fit()   -- both go on from the same state: Adam's per-row moments and counts
  back:fit()
  local a, b = exp:predict(d), back:predict(d)
  for i = 1, #d do eq(b[i][1], a[i][1], "row " .. i .. " (bit for bit)") end
  os.execute("rm -rf " .. dir)
end)

test("nn-sparse-04 nn.Sum adds a wide and a deep part; the model's parameters are both", function()
  drover.seed(4)
  local wide, deep = nn.Linear(3, 1), nn.Sequential { nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1) }
  local m = nn.Sum { wide, deep }
  local x = T { { 1, 2, 3 }, { -1, 0, 2 } }
  local y, a, b = m(x):totable(), wide(x):totable(), deep(x):totable()
  for i = 1, 2 do near(y[i][1], a[i][1] + b[i][1], 1e-6, "row " .. i) end
  eq(m:type(), "Sum", "type")
  eq(#m, 2, "children")
  raises(function() nn.Sum { nn.Linear(3, 1), nn.Linear(3, 2) }(x) end, "nn.Sum: output 2 is [2, 2], output 1 is [2, 1]")
end)
