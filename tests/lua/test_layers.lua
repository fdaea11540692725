-- test_layers.lua - the layers, containers, losses and initialisers of
-- issue 16 from Lua: constructors and their options, shapes, errors,
-- specs through save/load, and training a small CNN in process.
local test, eq, near, raises = table.unpack(dofile("tests/lua/t.lua"))
local nn, T = drover.nn, drover.tensor

local function shape(t) return table.concat(t:shape(), "x") end

test("layers-01 shapes through a CNN, one example and a batch", function()
  drover.seed(1)
  local m = nn.Sequential { nn.Unflatten(1, 8, 8), nn.Conv2d(1, 4, 3, { padding = 1 }), nn.ReLU(),
    nn.MaxPool2d(2), nn.Conv2d(4, 6, 3, { stride = 2, padding = 1, bias = false }),
    nn.BatchNorm2d(6), nn.GELU(), nn.AvgPool2d(2), nn.Flatten(), nn.LayerNorm(6),
    nn.Residual(nn.Linear(6, 6)), nn.Concat { nn.Linear(6, 3), nn.Identity() },
    nn.LeakyReLU(0.2), nn.Linear(9, 10) }
  eq(shape(m(T.randn(5, 64))), "5x10", "batch")
  m:evaluate()
  eq(shape(m(T.randn(64))), "10", "one example")
  eq(#m[6]:parameters(), 2, "BatchNorm2d's parameters (its statistics are buffers)")
  eq(m:num_params(), 4 * 9 + 4 + 6 * 4 * 9 + 12 + 12 + 42 + 21 + 100, "parameters")
  eq(m[12]:type(), "Concat", "type")
  eq(#m[12], 2, "Concat's children")
end)

test("layers-02 options and their errors", function()
  raises(function() nn.Conv2d(1, 2, 0) end, "nn.Conv2d: the kernel size must be a positive integer")
  raises(function() nn.Conv2d(1, 2, 3, { padding = -1 }) end, "option padding must be a non-negative")
  raises(function() nn.MaxPool2d(2, 2, 2) end, "padding in 0..kernel/2")
  raises(function() nn.Unflatten(1, 2, 3, 4) end, "expected 1 to 3 sizes")
  raises(function() nn.Linear(2, 2, { init = "he" }) end, "unknown init 'he'")
  raises(function() nn.Huber(0) end, "delta 0 must be positive")
  raises(function() nn.Residual(nn.Linear(3, 2))(T.randn(2, 3)) end, "must match")
  eq(tostring(nn.MaxPool2d(3, { stride = 1, padding = 1 })), "nn.MaxPool2d(3x3, stride 1, padding 1)", "pool options")
  eq(tostring(nn.AvgPool2d({ 3, 2 }, { stride = { 1, 2 }, padding = { 1, 0 } })),
    "nn.AvgPool2d(3x2, stride 1x2, padding 1x0)", "pool pairs in the options")
  eq(tostring(nn.MaxPool2d({ 2, 4 }, { 1, 2 }, 1)), "nn.MaxPool2d(2x4, stride 1x2, padding 1)", "pool pairs positional")
  eq(tostring(nn.MaxPool2d({ 2, 4 })), "nn.MaxPool2d(2x4)", "pool stride defaults to the kernel")
  eq(nn.MaxPool2d({ 2, 3 })(T.zeros(1, 1, 6, 9)):shape()[4], 3, "pool pair output width")
  raises(function() nn.MaxPool2d({ 2, 2 }, nil, { 0, 2 }) end, "padding in 0..kernel/2")
  raises(function() nn.AvgPool2d({ 2, 2, 2 }) end, "pair {height, width} (got a table of 3)")
  raises(function() nn.AvgPool2d(2, { padding = 1 }, 1) end, "both in the options and as argument 3")
  eq(tostring(nn.Conv2d(2, 3, 5, { stride = 2, dilation = 2, bias = false })),
    "nn.Conv2d(2 -> 3, 5x5, stride 2, dilation 2, no bias)", "conv options")
  eq(tostring(nn.BatchNorm1d(4, { momentum = 0.5 })), "nn.BatchNorm1d(4, momentum 0.5)", "bn options")
  near(nn.Huber { delta = 2 }(T { { 3 } }, T { 0 }), 2 * (3 - 1), 1e-6, "Huber's delta")
  near(nn.L1()(T { { 1, -2 } }, T { { 0, 0 } }), 1.5, 1e-6, "L1")
  near(nn.NLL()(T { { -1, -2 }, { -3, -4 } }, T { 1, 0 }), 2.5, 1e-6, "NLL")
end)

test("layers-03 initialisers", function()
  drover.seed(2)
  local l = nn.Linear(100, 50, { init = "xavier" })
  local w, b = l:parameters()[1].value, l:parameters()[2].value
  local mx = 0
  for _, row in ipairs(w:totable()) do for _, v in ipairs(row) do mx = math.max(mx, math.abs(v)) end end
  assert(mx <= math.sqrt(6 / 150) and mx > 0.95 * math.sqrt(6 / 150), "xavier bound " .. mx)
  eq(b:sum(), 0, "xavier's bias")
  local m = nn.Sequential { nn.Conv2d(2, 3, 3), nn.Linear(4, 4) }:init("kaiming")
  eq(m[2]:parameters()[2].value:sum(), 0, "kaiming's bias")
end)

test("layers-04 save and load rebuild every layer from its spec", function()
  drover.seed(3)
  local m = nn.Sequential { nn.Embedding(7, 3), nn.Flatten(), nn.BatchNorm1d(6), nn.Linear(6, 2) }
  m(T { { 1, 2 }, { 3, 6 }, { 0, 0 } }) -- moves the running statistics
  m:evaluate()
  local path = os.tmpname()
  m:save(path)
  local back = nn.load(path):evaluate()
  os.remove(path)
  local x = T { { 5, 4 }, { 2, 2 } }
  local a, b = m(x):totable(), back(x):totable()
  for i = 1, 2 do for j = 1, 2 do near(b[i][j], a[i][j], 1e-6, "output") end end
  raises(function() m(T { { 7, 0 } }) end, "expected an id in 0..6")
end)

test("layers-05 a CNN learns the bundled digits in process", function()
  local digits = drover.data.csv("examples/data/digits.csv", { label = -1 })
  local train, test_ds = digits:split(0.8, { seed = 1 })
  local train_std, stats = train:standardize()
  drover.seed(4)
  local exp = drover.experiment {
    model = nn.Sequential { nn.Unflatten(1, 8, 8), nn.Conv2d(1, 8, 3, { padding = 1, init = "kaiming" }),
      nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(128, 10) },
    loss = nn.CrossEntropy(), optimizer = drover.optim.Adam { lr = 3e-3 },
    train = { data = train_std, batch = 32, epochs = 5 },
    eval = { data = test_ds:standardize(stats), every = 1000 }, verbose = false, seed = 1 }
  local r = exp:fit()
  assert(r.eval_accuracy >= 0.95, "eval accuracy " .. r.eval_accuracy)
end)
