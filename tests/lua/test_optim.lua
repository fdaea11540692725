-- test_optim.lua - drover.optim from Lua: option tables, defaults, printing,
-- errors naming the option.
local test, eq, near, raises = table.unpack(dofile("tests/lua/t.lua"))
local optim = drover.optim

test("optim_print_non_defaults", function()
  eq(tostring(optim.SGD { lr = 0.1, momentum = 0.9 }), "optim.SGD { lr = 0.1, momentum = 0.9 }", "sgd")
  eq(tostring(optim.Adam { lr = 1e-3 }), "optim.Adam { lr = 0.001 }", "adam")
  eq(tostring(optim.SGD { lr = 0.1, momentum = 0.9, nesterov = true }),
    "optim.SGD { lr = 0.1, momentum = 0.9, nesterov = true }", "nesterov")
end)

test("optim_defaults_and_config", function()
  local c = optim.Adam():config()
  eq(c.kind, "Adam", "kind")
  near(c.lr, 1e-3, 1e-9, "adam lr")
  near(c.beta2, 0.999, 1e-7, "beta2")
  eq(c.momentum, nil, "no momentum for Adam")
  near(optim.AdamW():config().weight_decay, 0.01, 1e-9, "adamw wd")
  local r = optim.RMSprop { alpha = 0.9, momentum = 0.5 }:config()
  near(r.alpha, 0.9, 1e-7, "alpha")
  near(r.momentum, 0.5, 1e-7, "momentum")
  local a = optim.Adagrad { lr_decay = 0.1, initial_accumulator = 0.2 }:config()
  near(a.initial_accumulator, 0.2, 1e-7, "initial_accumulator")
  local b = optim.Adam { betas = { 0.8, 0.99 } }:config()
  near(b.beta1, 0.8, 1e-7, "betas[1]")
  near(b.beta2, 0.99, 1e-7, "betas[2]")
  eq(optim.SGD():kind(), "SGD", "kind()")
end)

test("optim_printed_form_reads_back", function()
  local o = optim.RMSprop { lr = 0.05, alpha = 0.9, weight_decay = 0.001 }
  local again = load("local optim = ... return " .. tostring(o))(optim)
  eq(tostring(again), tostring(o), "round trip")
end)

test("optim_unknown_keys_are_errors", function()
  raises(function() optim.SGD { lr = 0.1, momentun = 0.9 } end, "optim.SGD: unknown option 'momentun'")
  raises(function() optim.Adam { momentum = 0.9 } end, "optim.Adam: unknown option 'momentum'")
  raises(function() optim.SGD { 0.1 } end, "options must be named")
  raises(function() optim.SGD(0.1) end, "expected a table of options")
end)

test("optim_bad_values_name_the_field", function()
  local line = debug.getinfo(1, "l").currentline + 1
  local err = raises(function() optim.SGD { lr = -1 } end, "lr must be")
  if not err:find("test_optim.lua:" .. line .. ":", 1, true) then error("no script line in: " .. err) end
  raises(function() optim.SGD { lr = "fast" } end, 'optim.SGD: lr must be a number (got "fast")')
  raises(function() optim.Adam { beta1 = 1 } end, "beta1 must be in [0, 1)")
  raises(function() optim.SGD { nesterov = true } end, "nesterov requires momentum > 0")
  raises(function() optim.SGD { nesterov = 1 } end, "nesterov must be true or false")
  raises(function() optim.Adam { betas = { 0.9 } } end, "betas must be a table of two numbers")
end)

test("optim_ftrl_options_printing_and_sparse_weights", function()
  eq(tostring(optim.FTRL { lr = 0.1, l1 = 1 }), "optim.FTRL { lr = 0.1, l1 = 1 }", "printed")
  local c = optim.FTRL():config()
  near(c.lr, 0.05, 1e-9, "lr (alpha)")
  near(c.beta, 1, 0, "beta: the paper's")
  eq(c.momentum, nil, "no momentum")
  raises(function() optim.FTRL { weight_decay = 0.1 } end, "weight_decay")
  raises(function() optim.FTRL { l1 = -1 } end, "l1")
  -- A logistic regression on 20 features of which 3 matter: with l1, the
  -- other weights end exactly 0 (FTRL's point: sparse models).
  local nn = drover.nn
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  math.randomseed(3)
  for _ = 1, 2000 do
    local r = {}
    for j = 1, 20 do r[j] = math.random() * 2 - 1 end
    f:write(table.concat(r, ","), ",", (2 * r[1] - 3 * r[2] + r[3] > 0) and 1 or 0, "\n")
  end
  f:close()
  local d = drover.data.csv(path, { label = -1, header = false })
  drover.seed(3)
  local lin = nn.Linear(20, 1)
  local exp = drover.experiment {
    model = lin, loss = nn.BCEWithLogits(), optimizer = optim.FTRL { lr = 0.5, l1 = 1 },
    train = { data = d, batch = 50, epochs = 5 }, verbose = false, runs = false }
  local r = exp:fit()
  os.remove(path)
  assert(r.loss < 0.4, "it learns: loss " .. r.loss)
  local w = lin:parameters()[1].value:totable()[1]
  local zeros = 0
  for j = 4, 20 do if w[j] == 0 then zeros = zeros + 1 end end
  assert(zeros >= 12, "most irrelevant weights are exactly 0 (" .. zeros .. " of 17)")
  assert(w[1] > 0 and w[2] < 0 and w[3] > 0, "the relevant ones keep their signs: " .. w[1] .. " " .. w[2] .. " " .. w[3] .. " loss " .. r.loss .. " zeros " .. zeros)
end)
