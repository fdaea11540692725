-- digits.lua - a first drover script: a small MLP learns to read 8x8
-- handwritten digits (examples/data/digits.csv, 1797 images, 10 classes).
--
--   drover run examples/digits.lua        (what `make demo` runs)
--
-- Lua describes the model and the experiment; the training loop and all
-- the math run in C on OpenBLAS. Try the same lines one by one in the REPL
-- (`drover`), and `help(x)` on anything.

local nn, optim, data = drover.nn, drover.optim, drover.data

-- The data sits next to this script, wherever it is run from.
local here = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
local digits = data.csv(here .. "/data/digits.csv", { label = -1, header = false })
print(digits)

-- Hold out 20% for testing. Standardise each pixel with statistics fitted
-- on the training part only, then apply the same ones to the test part.
local train, test = digits:split(0.8, { seed = 1 })
local train_std, stats = train:standardize()
local test_std = test:standardize(stats)

-- Fixing the seed makes the initial weights, and so the whole run,
-- reproducible bit for bit.
drover.seed(1)

local exp = drover.experiment {
  name      = "digits-mlp",
  model     = nn.Sequential { nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10) },
  loss      = nn.CrossEntropy(),            -- logits in, class ids 0..9 as targets
  optimizer = optim.Adam { lr = 1e-3 },
  train     = { data = train_std, batch = 64, epochs = 20, shuffle = true },
  eval      = { data = test_std, every = 200 }, -- measure held-out accuracy as we go
  seed      = 1,                            -- seeds the shuffling
}
print(exp)

local r = exp:fit() -- progress: a bar on a terminal, plain lines in a pipe

print(string.format("trained %d steps in %.2f s (%.0f examples/s)", r.steps, r.seconds,
  r.examples_per_sec))
print(string.format("train loss %.4f  accuracy %.4f", r.loss, r.accuracy))
print(string.format("test  loss %.4f  accuracy %.4f", r.eval_loss, r.eval_accuracy))

-- Evaluate on any dataset, e.g. the training set again.
print("train set:", drover.pretty.format(exp:evaluate(train_std)))

-- A script that checks its own result: fail loudly (non-zero exit) if the
-- model did not learn.
assert(r.eval_accuracy >= 0.95, "test accuracy below 0.95")
