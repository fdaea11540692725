-- cnn.lua - a small convolutional network on the bundled 8x8 digits
-- (examples/data/digits.csv), trained beside examples/digits.lua's MLP on
-- the same split, seed and optimiser; prints both test accuracies.
--
--   drover run examples/cnn.lua
--
-- The datasets hold each image as a row of 64 pixels; nn.Unflatten(1, 8, 8)
-- gives the convolutions their [batch, channels, height, width] input and
-- nn.Flatten turns the feature maps back into rows for the classifier.

local nn, optim, data = drover.nn, drover.optim, drover.data

local here = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
local digits = data.csv(here .. "/data/digits.csv", { label = -1, header = false })
local train, test = digits:split(0.8, { seed = 1 })
local train_std, stats = train:standardize()
local test_std = test:standardize(stats)

local function fit(name, model)
  drover.seed(1)
  local exp = drover.experiment {
    name = name, model = model(), loss = nn.CrossEntropy(),
    optimizer = optim.Adam { lr = 1e-3 },
    train = { data = train_std, batch = 64, epochs = 20, shuffle = true },
    eval = { data = test_std, every = 200 }, seed = 1, verbose = false,
  }
  print(exp.model)
  local r = exp:fit()
  print(string.format("%s: %d parameters, %.2f s, test accuracy %.4f", name,
    exp.model:num_params(), r.seconds, r.eval_accuracy))
  return r.eval_accuracy
end

local mlp = fit("digits-mlp", function()
  return nn.Sequential { nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10) }
end)

local cnn = fit("digits-cnn", function()
  return nn.Sequential {
    nn.Unflatten(1, 8, 8),                                          -- [N, 1, 8, 8]
    nn.Conv2d(1, 16, 3, { padding = 1, init = "kaiming" }), nn.ReLU(), -- [N, 16, 8, 8]
    nn.Conv2d(16, 32, 3, { padding = 1, init = "kaiming" }), nn.ReLU(), -- [N, 32, 8, 8]
    nn.MaxPool2d(2),                                                -- [N, 32, 4, 4]
    nn.Flatten(),                                                   -- [N, 512]
    nn.Linear(512, 10),
  }
end)

print(string.format("MLP %.4f, CNN %.4f", mlp, cnn))
assert(cnn > mlp, "the CNN did not beat the MLP")
