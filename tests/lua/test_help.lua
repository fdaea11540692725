-- test_help.lua - help() and help(obj): the texts exist, are found by value,
-- by object kind and by name, and help() prints them.
local test, eq, near, raises = table.unpack(dofile("tests/lua/t.lua"))
local nn = drover.nn

-- What help(...) prints, captured by replacing print for the call.
local function printed(...)
  local out, real = {}, print
  print = function(...) out[#out + 1] = table.concat({ ... }, "\t") end
  local ok, err = pcall(help, ...)
  print = real
  if not ok then error(err, 2) end
  return table.concat(out, "\n")
end

local function has(text, needle)
  if not text:find(needle, 1, true) then error("'" .. needle .. "' not in:\n" .. text, 2) end
end

test("help_overview", function()
  local s = printed()
  has(s, "drover - define and train models")
  for _, m in ipairs { "drover.tensor", "drover.nn", "drover.optim", "drover.data", "drover.experiment" } do has(s, m) end
  eq(help, drover.help, "help is global and in drover")
  eq(printed(drover), s, "help(drover) is the overview")
end)

test("help_modules_and_functions", function()
  has(printed(drover.nn), "Linear(in, out)")
  has(printed(drover.nn.Linear), "nn.Linear(in, out) - y = x W^T + b")
  has(printed(drover.nn.CrossEntropy), "class ids")
  has(printed(drover.nn.DotInteraction), "in DLRM's order (1,0), (2,0)")
  has(printed(drover.experiment), 'metrics = { "auc", "logloss" }')
  has(printed(drover.optim), "optim.SGD")
  has(printed(drover.optim.Adam), "optim.Adam")
  has(printed(drover.data), "data.csv(path, { label = -1, header = false")
  has(printed(drover.data.csv), "data.csv(path")
  has(printed(drover.tensor.zeros), "drover.tensor.zeros(r, c)")
  has(printed(drover.experiment), "exp:fit()")
  has(printed(drover.seed), "bit for bit")
end)

test("help_objects", function()
  local model = nn.Sequential { nn.Linear(2, 2) }
  local s = printed(model)
  has(s, "nn.Sequential { layer, ... }")
  has(s, "m:forward(x)")
  has(printed(model[1]), "nn.Linear(in, out)")
  has(printed(nn.MSE()), "loss:forward(pred, target)")
  has(printed(drover.tensor.zeros(1, 1)), "t:shape()")
  has(printed(drover.optim.SGD()), "opt:config()")
  local ds = drover.data.synthetic { n = 10, features = 2, classes = 2 }
  has(printed(ds), "ds:split(0.8, { seed = 1 })")
  local _, stats = ds:standardize()
  has(printed(stats), "stats:mean()")
  local exp = drover.experiment { model = nn.Linear(2, 2), loss = nn.CrossEntropy(),
    optimizer = drover.optim.SGD(), train = { data = ds } }
  has(printed(exp), "exp:evaluate([ds])")
end)

test("help_by_name_and_unknown", function()
  has(printed("Dataset"), "ds:standardize()")
  has(printed("nn.Dropout"), "nn.Dropout(p = 0.5)")
  has(printed("Linear"), "nn.Linear(in, out)")
  has(printed("tensor"), "drover.tensor - float32 tensors")
  eq(printed("nope"), "no help on 'nope'; help() lists the topics", "unknown name")
  eq(printed({}), "no help on this table; help() lists the topics", "unknown value")
end)

test("help_pretty_and_cluster", function()
  has(printed(drover.pretty), "drover.pretty(...) - prints values as the REPL shows them")
  has(printed("drover.pretty"), "drover.pretty.format(x)")
  has(printed(), "drover.pretty(x)")
  local s = printed(drover.cluster)
  has(s, "launcher = \"ssh\"")
  has(s, "transport = \"auto\"")
  if s:find("(local launcher)", 1, true) then error("help(drover.cluster) still says (local launcher)") end
  -- the overview's first model works typed line by line: no `local`
  local first = printed():match("A first model.-\n\n")
  if first:find("\n  local ", 1, true) then error("'A first model' uses local:\n" .. first) end
end)

test("results_print_their_fields", function()
  local nn = drover.nn
  local ds = drover.data.synthetic { n = 16, features = 2, classes = 2 }
  local exp = drover.experiment { model = nn.Linear(2, 2), loss = nn.CrossEntropy(), runs = false,
    verbose = false, optimizer = drover.optim.SGD(), train = { data = ds, batch = 8 } }
  local r = exp:fit()
  has(tostring(r), "steps = 2")
  has(tostring(exp:evaluate(ds)), "{ accuracy = ")
  eq(type(r), "table", "still a table")
  eq(r.steps, 2, "fields as before")
  has(drover.pretty.format({ r = exp:evaluate(ds) }), "{ r = { accuracy = ")
end)
