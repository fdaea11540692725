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
