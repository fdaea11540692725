-- test_nn.lua - drover.nn from Lua: constructors, Torch7 printing, forward,
-- parameters, containers, losses, training mode, error messages.
local test, eq, near, raises = table.unpack(dofile("tests/lua/t.lua"))
local nn, tensor = drover.nn, drover.tensor

test("nn_model_prints_like_torch7", function()
  local m = nn.Sequential { nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10) }
  eq(tostring(m), [[
nn.Sequential {
  [input -> (1) -> (2) -> (3) -> output]
  (1): nn.Linear(64 -> 128)
  (2): nn.ReLU
  (3): nn.Linear(128 -> 10)
}]], "model text")
  local nested = nn.Sequential { nn.Sequential { nn.Linear(2, 3), nn.Tanh() }, nn.Sigmoid() }
  eq(tostring(nested), [[
nn.Sequential {
  [input -> (1) -> (2) -> output]
  (1): nn.Sequential {
    [input -> (1) -> (2) -> output]
    (1): nn.Linear(2 -> 3)
    (2): nn.Tanh
  }
  (2): nn.Sigmoid
}]], "nested text")
  eq(tostring(nn.Linear(3, 4)), "nn.Linear(3 -> 4)", "a layer")
  eq(tostring(nn.CrossEntropy()), "nn.CrossEntropy()", "a loss")
end)

test("nn_containers_index_and_len", function()
  local l1, l2 = nn.Linear(4, 8), nn.ReLU()
  local m = nn.Sequential { l1, l2 }
  eq(#m, 2, "#seq")
  eq(m[1], l1, "seq[1] is the same layer value")
  eq(m[2]:type(), "ReLU", "type")
  eq(m[3], nil, "out of range")
  m:add(nn.Linear(8, 2))
  eq(#m, 3, "add")
  eq(#nn.Sequential(), 0, "empty")
  eq(#nn.Linear(1, 1), 0, "a layer has no children")
end)

test("nn_forward_shapes_and_values", function()
  drover.seed(3)
  local lin = nn.Linear(3, 2)
  local p = lin:parameters()
  eq(#p, 2, "two parameters")
  eq(p[1].name, "weight", "name")
  eq(p[2].name, "bias", "name")
  -- set known weights through the parameter views, then check y = x W^T + b
  p[1].value[1] = { 1, 0, -1 }
  p[1].value[2] = { 0.5, 0.5, 0.5 }
  p[2].value[1], p[2].value[2] = 0.25, -1
  local y = lin:forward(tensor { { 1, 2, 3 }, { 0, 0, 0 } })
  eq(y:shape()[1], 2, "batch")
  eq(y:shape()[2], 2, "outputs")
  near(y:get(1, 1), 1 - 3 + 0.25, 1e-6, "y11")
  near(y:get(1, 2), 3 - 1, 1e-6, "y12")
  near(y:get(2, 2), -1, 1e-6, "y22")
  local one = lin(tensor { 1, 2, 3 }) -- a single example, through __call
  eq(one:dim(), 1, "single example stays 1-D")
  near(one[1], -1.75, 1e-6, "single value")
  local relu = nn.ReLU():forward({ { -1, 2 } })
  eq(relu:get(1, 1), 0.0, "relu from a table")
end)

test("nn_parameters_qualified_names", function()
  local m = nn.Sequential { nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10) }
  local names = {}
  for i, p in ipairs(m:parameters()) do names[i] = p.name end
  eq(table.concat(names, " "), "1.weight 1.bias 3.weight 3.bias", "names")
  eq(m:num_params(), 64 * 128 + 128 + 128 * 10 + 10, "num_params")
  eq(m:parameters()[3].value:shape()[1], 10, "weight is [out, in]")
end)

test("nn_seed_fixes_initialisation", function()
  drover.seed(11)
  local a = nn.Linear(5, 5):parameters()[1].value:totable()
  drover.seed(11)
  local b = nn.Linear(5, 5):parameters()[1].value:totable()
  for i = 1, 5 do
    for j = 1, 5 do eq(a[i][j], b[i][j], "same init") end
  end
  local bound = 1 / math.sqrt(5)
  for i = 1, 5 do
    for j = 1, 5 do
      if math.abs(a[i][j]) > bound then error("init outside +-1/sqrt(in)") end
    end
  end
end)

test("nn_dropout_training_mode", function()
  local d = nn.Dropout(0.5)
  local x = tensor.ones(10, 100)
  local y = d:forward(x)
  local zeros = 0
  for _, row in ipairs(y:totable()) do
    for _, v in ipairs(row) do
      if v == 0 then zeros = zeros + 1 else near(v, 2.0, 1e-6, "kept values are scaled") end
    end
  end
  if zeros < 350 or zeros > 650 then error("dropout zeroed " .. zeros .. " of 1000") end
  eq(d:is_training(), true, "training by default")
  local m = nn.Sequential { d }
  eq(m:evaluate(), m, "evaluate returns the module")
  eq(d:is_training(), false, "recursive")
  eq(m:forward(x):sum(), 1000.0, "identity when evaluating")
  m:training(true)
  eq(d:is_training(), true, "training(true)")
end)

test("nn_losses", function()
  local ce = nn.CrossEntropy()
  near(ce(tensor.zeros(4, 10), { 0, 3, 9, 2 }), math.log(10), 1e-5, "uniform logits: log C")
  near(ce:forward(tensor { { 0, 0 } }, 1), math.log(2), 1e-6, "a class id as a number")
  local g = ce:backward(tensor.zeros(2, 2), { 0, 1 })
  near(g:get(1, 1), (0.5 - 1) / 2, 1e-6, "softmax - onehot, over the batch")
  local mse = nn.MSE()
  near(mse(tensor { { 1, 2 } }, tensor { { 0, 0 } }), 2.5, 1e-6, "mse")
  near(nn.BCEWithLogits()(tensor { { 0 } }, { 1 }), math.log(2), 1e-6, "bce at 0")
  eq(ce:type(), "CrossEntropy", "type")
end)

test("nn_errors_name_the_line", function()
  local line = debug.getinfo(1, "l").currentline + 1
  local err = raises(function() nn.Linear(0, 3) end, "nn.Linear: the input size must be a positive integer")
  if not err:find("test_nn.lua:" .. line .. ":", 1, true) then error("no script line in: " .. err) end
  raises(function() nn.Sequential { nn.ReLU(), 42 } end, "element 2 is a number, expected a layer")
  local lin = nn.Linear(4, 2)
  raises(function() nn.Sequential { lin, lin } end, "may appear only once")
  raises(function() nn.Sequential { nn.Linear(4, 3), nn.Linear(5, 2) }:forward(tensor.zeros(2, 4)) end,
    "layer 2")
  raises(function() nn.CrossEntropy()(tensor.zeros(2, 3), { 0, 7 }) end, "class 7")
  raises(function() nn.Dropout(1.5) end, "p must be in [0, 1)")
  raises(function() nn.ReLU():add(nn.ReLU()) end, "only an nn.Sequential")
end)

test("nn_save_and_load", function()
  local path = os.tmpname()
  drover.seed(4)
  local m = nn.Sequential { nn.Linear(3, 4), nn.Tanh(), nn.Sequential { nn.Linear(4, 2) } }
  eq(m:save(path), m, "save returns the model")
  local back = nn.load(path)
  eq(tostring(back), tostring(m), "the same architecture")
  local x = tensor { { 0.5, -1, 2 }, { 3, 0, -0.25 } }
  local a, b = m(x), back(x)
  for i = 1, 2 do for j = 1, 2 do eq(b:get(i, j), a:get(i, j), "output " .. i .. "," .. j) end end
  local other = nn.Sequential { nn.Linear(3, 4), nn.Tanh(), nn.Sequential { nn.Linear(4, 2) } }
  eq(other:load(path), other, "load returns the model")
  eq(other(x):get(2, 2), a:get(2, 2), "loaded into a model")
  raises(function() nn.Sequential { nn.Linear(3, 5) }:load(path) end, "tensor '0.weight' is [4, 3] in the file")
  raises(function() nn.load(path .. ".missing") end, "No such file or directory")
  os.remove(path)
end)

test("nn_nested_sequential_is_linear", function()
  -- 50,000 levels: a walk of the whole model per level (quadratic) took
  -- minutes here; each new level now checks nothing it cannot overlap.
  local inner = nn.Linear(4, 2)
  local m = inner
  for _ = 1, 50000 do m = nn.Sequential { m } end
  raises(function() m:add(inner) end, "may appear only once")
  local outer = nn.Sequential { m }
  raises(function() m:add(outer) end, "cycle")
  local flat = {}
  for i = 1, 2000 do flat[i] = nn.ReLU() end
  eq(#nn.Sequential(flat):parameters(), 0, "a flat list of 2,000 layers")
end)
