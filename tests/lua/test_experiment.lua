-- test_experiment.lua - drover.experiment: validation messages naming the
-- field, in-process fit on digits (accuracy, result fields), evaluate,
-- bit-for-bit reproducibility, progress callbacks, errors at the user's line.
local test, eq, near, raises = table.unpack(dofile("tests/lua/t.lua"))
local nn, optim, data = drover.nn, drover.optim, drover.data

local digits = data.csv("examples/data/digits.csv", { label = -1 })
local train, test_set = digits:split(0.8, { seed = 1 })
local train2, stats = train:standardize()
local test2 = test_set:standardize(stats)

local function mlp()
  return nn.Sequential { nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10) }
end

local NONE = {} -- in spec(): drop the field

-- A complete, valid description with some fields replaced (or dropped).
local function spec(over)
  local s = {
    name = "digits-mlp", model = mlp(), loss = nn.CrossEntropy(),
    optimizer = optim.Adam { lr = 1e-3 },
    train = { data = train2, batch = 64, epochs = 20, shuffle = true },
    eval = { data = test2, every = 200 }, seed = 1, verbose = false,
  }
  for k, v in pairs(over or {}) do
    if v == NONE then s[k] = nil else s[k] = v end
  end
  return s
end

test("experiment_validation_names_the_field", function()
  local E = drover.experiment
  raises(function() E(spec { train = { data = train2, batch = 0 } }) end,
    "experiment: train.batch must be a positive integer")
  raises(function() E(spec { train = { data = train2, batch = 2.5 } }) end,
    "experiment: train.batch must be a positive integer (got 2.5)")
  raises(function() E(spec { train = { data = train2, epochs = -1 } }) end,
    "experiment: train.epochs must be a positive integer")
  raises(function() E(spec { train = { batch = 8 } }) end, "experiment: train.data must be a dataset (got nothing)")
  raises(function() E(spec { train = { data = train2, bacth = 8 } }) end, "experiment: unknown field 'train.bacth'")
  raises(function() E(spec { model = nn.CrossEntropy() }) end, "experiment: model must be an nn module")
  raises(function() E(spec { loss = "ce" }) end, "experiment: loss must be an nn loss")
  raises(function() E(spec { optimizer = { lr = 1 } }) end, "experiment: optimizer must be an optimizer")
  raises(function() E(spec { eval = { data = test2, every = -5 } }) end,
    "experiment: eval.every must be a non-negative integer")
  raises(function() E(spec { eval = { every = 5 } }) end, "experiment: eval.data must be a dataset")
  raises(function() E(spec { seed = "one" }) end, "experiment: seed must be a non-negative integer")
  raises(function() E(spec { epochs = 3 }) end, "experiment: unknown field 'epochs'")
  raises(function() E(spec { mode = "fast" }) end, 'experiment: mode must be "async" or "sync"')
  raises(function() E(spec { train = { data = train2, reshard = "never" } }) end,
    'experiment: train.reshard must be "epoch" or "step" (got never)')
  raises(function() E(spec { train = { data = train2, reshard = 1 } }) end,
    'experiment: train.reshard must be "epoch" or "step" (got number)')
  raises(function() E(spec { eval = { data = data.synthetic { n = 10, features = 3 } } }) end,
    "eval.data has 3 features but train.data has 64")
  raises(function() E(42) end, "experiment: expected a table")
  -- the error points at the caller's line, not inside the library
  local line = debug.getinfo(1, "l").currentline + 1
  local err = raises(function() E(spec { train = { data = train2, batch = 0 } }) end, "train.batch")
  if not err:find("test_experiment.lua:" .. line .. ":", 1, true) then error("no script line in: " .. err) end
end)

test("experiment_defaults_and_printing", function()
  local exp = drover.experiment(spec { train = { data = train2 }, eval = NONE })
  eq(exp.train.batch, 32, "default batch")
  eq(exp.train.epochs, 1, "default epochs")
  eq(exp.train.shuffle, true, "default shuffle")
  eq(exp.train.reshard, "epoch", "default reshard")
  eq(exp.mode, "async", "default mode")
  local text = tostring(exp)
  if not text:find("drover.experiment digits-mlp", 1, true) or not text:find("(1): nn.Linear(64 -> 128)", 1, true)
    or not text:find("optim.Adam { lr = 0.001 }", 1, true) then
    error("experiment text: " .. text)
  end
end)

local fitted -- shared with the evaluate test below

test("experiment_fit_digits", function()
  drover.seed(1)
  local exp = drover.experiment(spec())
  local r = exp:fit()
  if not (r.eval_accuracy >= 0.95) then error("eval accuracy " .. tostring(r.eval_accuracy)) end
  eq(r.steps, 20 * math.ceil(1438 / 64), "steps")
  eq(r.epochs, 20, "epochs")
  eq(math.type(r.steps), "integer", "steps is an integer")
  for _, k in ipairs { "loss", "accuracy", "examples_per_sec", "eval_loss", "eval_accuracy", "seconds" } do
    if type(r[k]) ~= "number" or r[k] ~= r[k] then error("field " .. k .. " = " .. tostring(r[k])) end
  end
  if not (r.loss < 0.2 and r.accuracy > 0.95) then error("training loss " .. r.loss) end
  if not (r.examples_per_sec > 0 and r.seconds > 0) then error("timing") end
  eq(#r.evals, 3, "evals at 200, 400 and the end")
  eq(r.evals[2].step, 400, "eval step")
  eq(r.evals[3].accuracy, r.eval_accuracy, "the last eval is the final one")
  fitted = exp
end)

test("experiment_evaluate", function()
  local exp = assert(fitted, "needs the fit test")
  local e = exp:evaluate(test2)
  near(e.accuracy, exp.result.eval_accuracy, 1e-12, "same as the final eval")
  near(e.loss, exp.result.eval_loss, 1e-12, "loss")
  local d = exp:evaluate()
  eq(d.loss, e.loss, "defaults to eval.data")
  local t = exp:evaluate(train2)
  if not (t.accuracy > 0.95) then error("train accuracy " .. t.accuracy) end
  raises(function() exp:evaluate(42) end, "evaluate expects a dataset")
  local mse = drover.experiment(spec { loss = nn.MSE(), model = nn.Linear(64, 1),
    train = { data = data.synthetic { n = 64, features = 64, classes = 2 } }, eval = NONE })
  local m = mse:evaluate(data.synthetic { n = 64, features = 64, classes = 2 })
  eq(m.accuracy, nil, "no accuracy for MSE")
  eq(type(m.loss), "number", "but a loss")
end)

test("experiment_reproducible_bit_for_bit", function()
  local function run(seed, data_seed)
    drover.seed(seed)
    local exp = drover.experiment(spec { seed = data_seed, train = { data = train2, batch = 32, epochs = 3 } })
    return exp:fit()
  end
  local a, b = run(5, 9), run(5, 9)
  eq(a.loss, b.loss, "same seeds, same loss")
  eq(a.eval_loss, b.eval_loss, "same eval loss")
  local c, d = run(6, 9), run(5, 10)
  if c.loss == a.loss then error("another init seed gave the same loss") end
  if d.loss == a.loss then error("another shuffle seed gave the same loss") end
end)

test("experiment_second_fit_continues", function()
  drover.seed(2)
  local exp = drover.experiment(spec { train = { data = train2, batch = 64, epochs = 1 }, eval = NONE })
  local r1 = exp:fit()
  local r2 = exp:fit()
  if not (r2.loss < r1.loss) then error("second fit did not continue: " .. r1.loss .. " -> " .. r2.loss) end
  eq(r2.eval_loss, nil, "no eval without eval data")
end)

test("experiment_progress_callback", function()
  drover.seed(3)
  local seen, evals = 0, 0
  local exp = drover.experiment(spec {
    train = { data = train2, batch = 64, epochs = 5 },
    progress = function(p)
      if p.is_eval then evals = evals + 1 else seen = seen + 1 end
      if p.step >= 30 and not p.is_eval then return false end
    end,
  })
  local r = exp:fit()
  eq(r.steps, 30, "returning false stops training")
  eq(r.stopped, true, "stopped is reported")
  eq(seen, 30, "one call per step")
  local bad = drover.experiment(spec { progress = function() error("boom") end })
  raises(function() bad:fit() end, "boom")
end)

test("experiment_fit_checks_settings_changed_after_validation", function()
  -- the same checks, in the same words, as drover.experiment { ... }
  local exp = drover.experiment(spec {})
  exp.train.batch = 0
  raises(function() exp:fit() end, "experiment: train.batch must be a positive integer (got 0)")
  exp = drover.experiment(spec {})
  exp.eval = 3
  raises(function() exp:fit() end, "experiment: eval must be a table { data = ..., every = ... } (got 3)")
  exp = drover.experiment(spec {})
  exp.train.data = nil
  raises(function() exp:fit() end, "experiment: train.data must be a dataset (got nothing)")
  exp = drover.experiment(spec {})
  exp.verbose = "loud"
  raises(function() exp:fit() end, 'experiment: verbose must be true or false (got "loud")')
  exp = drover.experiment(spec {})
  exp.train.epoch = 3
  raises(function() exp:fit() end, "experiment: unknown field 'train.epoch'")
end)

-- One rule for the numbers of an experiment's settings (issue 24, defect
-- 5): an integer is a Lua integer or a float with an exact integer value,
-- a real is a finite number, neither is a string, each within its range,
-- and the error names the field and the value.
test("experiment_numbers_follow_one_rule", function()
  local E = drover.experiment
  local function ck(c) return spec { checkpoint = c, runs = false } end
  -- keep was truncated to 32 bits (4294967297 kept 1)
  raises(function() E(ck { every = 10, keep = 4294967297 }) end,
    "experiment: checkpoint.keep = 4294967297 is too large (at most 2147483647)")
  raises(function() E(ck { every = 10, keep = 2^40 }) end, "checkpoint.keep = 1099511627776.0 is too large")
  -- NaN and the infinities were accepted
  raises(function() E(ck { every_seconds = 0 / 0 }) end,
    "experiment: checkpoint.every_seconds must be a finite number (got ")
  raises(function() E(ck { every_seconds = 1 / 0 }) end,
    "experiment: checkpoint.every_seconds must be a finite number (got inf)")
  raises(function() E(spec { stop = { metric = "eval_loss", min_delta = 0 / 0 } }) end,
    "experiment: stop.min_delta must be a finite number")
  -- a string was an integer ("3") but not a real ("0.5"): neither is
  raises(function() E(ck { every = 10, keep = "3" }) end,
    'experiment: checkpoint.keep must be a non-negative integer (got "3")')
  raises(function() E(ck { every_seconds = "0.5" }) end,
    'experiment: checkpoint.every_seconds must be a non-negative number (got "0.5")')
  raises(function() E(spec { seed = "1" }) end, 'experiment: seed must be a non-negative integer (got "1")')
  raises(function() E(spec { train = { data = train2, batch = "64" } }) end,
    'experiment: train.batch must be a positive integer (got "64")')
  raises(function() E(spec { train = { data = train2, epochs = 1 / 0 } }) end,
    "experiment: train.epochs must be a positive integer (got inf)")
  raises(function() E(spec { backup_workers = 2 ^ 31 }) end,
    "experiment: backup_workers = 2147483648.0 is too large (at most 2147483647)")
  raises(function() E(ck { every_seconds = -1 }) end,
    "experiment: checkpoint.every_seconds must be a non-negative number (got -1)")
  -- an integral float is an integer, stored as one
  local e = E(spec { train = { data = train2, batch = 64.0, epochs = 2.0 }, checkpoint = { keep = 3.0,
    every_seconds = 0.5 }, runs = false })
  eq(math.type(e.train.batch), "integer", "batch 64.0 is the integer 64")
  eq(e.train.batch, 64, "batch")
  eq(e.checkpointing.keep, 3, "keep 3.0")
  eq(e.checkpointing.every_seconds, 0.5, "every_seconds")
  -- the same rule when a fit reads a setting changed since
  e.checkpointing.keep = 4294967297
  raises(function() e:fit() end, "experiment: checkpoint.keep = 4294967297 is too large")
  e.checkpointing.keep = 1
  e.train.max_steps = "5"
  raises(function() e:fit() end, 'experiment: train.max_steps must be a non-negative integer (got "5")')
end)

-- checkpoint.dir (issue 25): an HDFS URL, resolved when the experiment is
-- read; a local directory is refused (checkpoints there are the run
-- directory's), and so is an hdfs:// URL whose NameNode cannot be found.
test("experiment_checkpoint_dir_is_an_hdfs_url", function()
  local E = drover.experiment
  local function ck(c) return spec { checkpoint = c, runs = false } end
  raises(function() E(ck { every = 10, dir = "/data/ckpt" }) end,
    'experiment: checkpoint.dir must be an hdfs:// or webhdfs:// URL (got "/data/ckpt")')
  raises(function() E(ck { every = 10, dir = 5 }) end, "checkpoint.dir must be an hdfs:// or webhdfs:// URL")
  raises(function() E(ck { every = 10, dir = "webhdfs://" }) end, "experiment: checkpoint.dir: ")
  local exp = E(ck { every = 10, dir = "webhdfs://nn.example:9870/ckpt" })
  eq(exp.checkpointing.dir, "webhdfs://nn.example:9870/ckpt", "kept as given")
end)

test("experiment_fit_errors_name_the_line", function()
  local exp = drover.experiment(spec { model = nn.Sequential { nn.Linear(10, 10) } })
  local line = debug.getinfo(1, "l").currentline + 1
  local err = raises(function() exp:fit() end, "has 64 features, expected 10")
  if not err:find("test_experiment.lua:" .. line .. ":", 1, true) then error("no script line in: " .. err) end
  raises(function() exp.fit() end, "call fit as exp:fit()")
end)

test("experiment_absurd_counts_are_refused", function()
  local E = drover.experiment
  raises(function() E(spec { train = { data = train2, epochs = 2^62 } }) end,
    "experiment: train.epochs = 4.6116860184274e+18 is too large (at most 1099511627776)")
  raises(function() E(spec { train = { data = train2, epochs = math.maxinteger } }) end,
    "train.epochs = 9223372036854775807 is too large")
  raises(function() E(spec { train = { data = train2, batch = 2^62 } }) end, "train.batch")
  raises(function() E(spec { train = { data = train2, max_steps = 2^50 } }) end, "train.max_steps")
  raises(function() E(spec { eval = { data = test2, every = 2^62 } }) end, "eval.every")
  E(spec { seed = math.maxinteger }) -- a seed is any integer
  -- an experiment changed after validation is checked again by fit
  local e = E(spec { train = { data = train2, epochs = 1 } })
  e.train.epochs = 2^62
  raises(function() e:fit() end, "too large")
  -- settings given to fit itself were ignored (a full fit ran)
  e.train.epochs = 1
  raises(function() e:fit { epochs = 2^62 } end, "experiment: fit takes no arguments")
end)

test("experiment_non_finite_loss_stops_the_fit", function()
  local d = data.synthetic { n = 64, features = 4, classes = 2 }
  d.x:set(40, 2, 0 / 0)
  local model = nn.Sequential { nn.Linear(4, 2) }
  local e = drover.experiment { name = "nan", model = model, loss = nn.CrossEntropy(),
    optimizer = optim.SGD { lr = 0.1 }, train = { data = d, batch = 8, epochs = 2, shuffle = false },
    verbose = false, runs = false }
  raises(function() e:fit() end, "fit: the loss is NaN at step 5 (epoch 1); stopped before the update")
  for _, p in ipairs(model:parameters()) do
    local v = p.value:sum()
    assert(v == v, "the model was not poisoned: " .. p.name)
  end
end)
