-- test_nn_sparse.lua - the id layers from Lua: constructors, printing,
-- options, model:tables(), refusals, and an in-process fit of a
-- table-backed nn.Embedding with a lazy optimizer.
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
  raises(function() m:save(os.tmpname()) end, "sparse tables in a model file are not supported yet")
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

test("nn-sparse-03 checkpoints of a model with tables are refused before the fit starts", function()
  local d = drover.data.synthetic { n = 64, features = 2, classes = 2, seed = 1 }
  local emb = nn.Embedding(100, 2, { sparse = true })
  local runs = os.tmpname()
  os.remove(runs)
  local exp = drover.experiment {
    model = nn.Sequential { emb, nn.Flatten(), nn.Linear(4, 2) }, loss = nn.CrossEntropy(),
    optimizer = drover.optim.SGD {}, train = { data = d, batch = 8, epochs = 1 },
    verbose = false, checkpoint = { every = 4 }, runs = runs }
  raises(function() exp:fit() end, "sparse tables in checkpoints are not supported yet")
  eq(emb:tables()[1].held, 0, "no step ran: no row was touched")
  os.execute("rm -rf " .. runs)
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
