# test_torch_layers.sh - drover's layers and losses against PyTorch's on
# the same weights and inputs: drover saves each model (spec and weights,
# safetensors), its input, output, input gradient and parameter gradients
# for a random output gradient; tests/cli/torch_layers.py builds the same
# model in PyTorch from the spec, loads the weights and compares all of them
# to 1e-4; with BatchNorm, also the running statistics a training forward
# leaves. Likewise the L1, Huber and NLL losses and their gradients.
# Run from the repository root by tests/run.sh (POSIX sh; DROVER = binary,
# VENV = the virtual environment `make venv` makes, default build/venv).
. tests/cli/lib.sh
: "${VENV:=$PWD/build/venv}"
PY=$VENV/bin/python

if ! "$PY" -c "import safetensors.torch, torch" >"$TMP/py.err" 2>&1; then
  fail torch_layers_python "no Python with safetensors and torch in $VENV: $(tail -n 1 "$TMP/py.err"). \
'make venv' makes it"
  exit 1
fi

cat >"$TMP/cases.lua" <<'EOF2'
local nn, T = drover.nn, drover.tensor
local dir = os.getenv("TMP")
drover.seed(3)

local function flat(t, out)
  out = out or {}
  if type(t) == "number" then out[#out + 1] = t return out end
  for _, v in ipairs(t) do flat(v, out) end
  return out
end
local function line(t)
  local s = {}
  for i, v in ipairs(flat(t)) do s[i] = string.format("%.9g", v) end
  return table.concat(s, " ")
end
local function write(path, t)
  local f = assert(io.open(path, "w"))
  local tt = type(t) == "table" and t or t:totable()
  if type(tt[1]) == "number" then tt = { tt } end
  for _, row in ipairs(tt) do f:write(line(row), "\n") end
  f:close()
end

local function bn_model()
  return nn.Sequential { nn.Unflatten(2, 3, 3), nn.Conv2d(2, 4, 2), nn.BatchNorm2d(4), nn.ReLU(),
    nn.Flatten(), nn.Linear(16, 6), nn.BatchNorm1d(6, { momentum = 0.3 }), nn.LayerNorm(6) }
end
local function ids(n, l, k) -- [n, l] random ids in 0..k-1
  local t = {}
  for i = 1, n do
    t[i] = {}
    for j = 1, l do t[i][j] = math.random(0, k - 1) end
  end
  return T(t)
end
math.randomseed(5)

-- name, model, input columns (or an input maker), train mode, warm-up batches
local cases = {
  -- padding, LeakyReLU, max and average pools, dilation without bias, GELU
  { "conv", nn.Sequential { nn.Unflatten(2, 6, 6), nn.Conv2d(2, 3, 3, { padding = 1 }),
    nn.LeakyReLU(0.1), nn.MaxPool2d(2), nn.Conv2d(3, 4, 2, { dilation = 2, padding = 1, bias = false }),
    nn.GELU(), nn.AvgPool2d(3, 1, 1), nn.Flatten(), nn.Linear(36, 5), nn.Identity() }, 72 },
  -- stride and padding together; a padded max pool
  { "strided", nn.Sequential { nn.Unflatten(1, 9, 9), nn.Conv2d(1, 2, 5, { stride = 2, padding = 2 }),
    nn.MaxPool2d(3, { stride = 2, padding = 1 }), nn.Flatten(), nn.Tanh() }, 81 },
  -- non-square kernel, strides, paddings and dilations ({height, width})
  { "pairs", nn.Sequential { nn.Unflatten(2, 7, 9), nn.Conv2d(2, 3, { 3, 2 }, { stride = { 2, 1 },
    padding = { 0, 2 }, dilation = { 1, 2 } }), nn.Tanh(), nn.Conv2d(3, 2, { 1, 4 },
    { stride = { 1, 3 }, padding = { 1, 0 }, bias = false }), nn.Flatten() }, 126 },
  -- {height, width} pools: positional pairs and the options form
  { "pools", nn.Sequential { nn.Unflatten(2, 7, 9), nn.MaxPool2d({ 3, 2 }, { 1, 2 }, { 1, 0 }), nn.Tanh(),
    nn.AvgPool2d({ 2, 3 }, { stride = { 2, 1 }, padding = 1 }), nn.MaxPool2d({ 1, 2 }), nn.Flatten(),
    nn.Linear(16, 3) }, 126 },
  -- the initialisers' weights are PyTorch-loadable too
  { "init", nn.Sequential { nn.Linear(7, 6, { init = "kaiming" }), nn.GELU(),
    nn.Linear(6, 4, { init = "xavier" }), nn.LeakyReLU() }, 7 },
  -- ids in; repeated ids accumulate into the same weight row
  { "embed", nn.Sequential { nn.Embedding(5, 4), nn.Flatten(), nn.LayerNorm(12, { eps = 1e-3 }),
    nn.Linear(12, 3) }, function() return ids(6, 3, 5) end },
  -- batch statistics and the running ones they update
  { "bn_train", bn_model(), 18, true },
  -- the containers: parameters named 0.0.0.weight, 1.1.0.bias, ...
  { "containers", nn.Sequential { nn.Residual(nn.Sequential { nn.Linear(5, 5), nn.Tanh() }),
    nn.Concat { nn.Linear(5, 2), nn.Sequential { nn.Linear(5, 3), nn.GELU() } }, nn.Linear(5, 2) }, 5 },
  -- evaluation with running statistics left by three training batches
  { "bn_eval", bn_model(), 18, false, 3 },
}
for _, c in ipairs(cases) do
  local name, m, cols, train, warm = table.unpack(c)
  local function input() return type(cols) == "function" and cols() or T.randn(5, cols) end
  for _ = 1, warm or 0 do m(input()) end
  if train then m:training() else m:evaluate() end
  local x = input()
  m:save(dir .. "/" .. name .. ".safetensors")
  local y = m(x)
  local dy = T.randn(table.unpack(y:shape()))
  m:zero_grad()
  local dx = m:backward(x, dy)
  m:save(dir .. "/" .. name .. ".after.safetensors")
  write(dir .. "/" .. name .. ".x", x)
  write(dir .. "/" .. name .. ".y", y)
  write(dir .. "/" .. name .. ".dy", dy)
  write(dir .. "/" .. name .. ".dx", dx)
  local f = assert(io.open(dir .. "/" .. name .. ".grads", "w"))
  for _, p in ipairs(m:parameters()) do f:write(line(p.grad:totable()), "\n") end
  f:close()
end

local pred = T.randn(5, 4)
local logp = nn.Sequential { nn.Identity() }(pred) -- a copy
local ids = T { 0, 3, 1, 2, 3 }
local target = T.randn(5, 4)
local f = assert(io.open(dir .. "/loss.txt", "w"))
for _, c in ipairs { { "L1", nn.L1(), 0, pred, target }, { "Huber", nn.Huber(0.5), 0.5, pred, target },
  { "NLL", nn.NLL(), 0, logp, ids } } do
  local name, l, delta, p, t = c[1], c[2], c[3], c[4], c[5]
  f:write(string.format("%s %g %.9g\n", name, delta, l:forward(p, t)))
  write(dir .. "/loss_" .. name .. ".pred", p)
  write(dir .. "/loss_" .. name .. ".target", t)
  write(dir .. "/loss_" .. name .. ".grad", l:backward(p, t))
end
f:close()
EOF2

if TMP=$TMP "$DROVER" run "$TMP/cases.lua" >"$TMP/out" 2>&1; then
  pass torch_layers_drover_side
else
  fail torch_layers_drover_side "$(tail -n 8 "$TMP/out" | tr '\n' ' ')"
  exit 1
fi
for c in conv strided pairs pools init embed containers bn_train bn_eval; do
  if "$PY" tests/cli/torch_layers.py "$TMP" "$c" >"$TMP/py.out" 2>&1; then
    pass "torch_layers_$c"
  else
    fail "torch_layers_$c" "$(grep FAIL "$TMP/py.out" | head -n 4 | tr '\n' ' ') $(tail -n 3 "$TMP/py.out" | tr '\n' ' ')"
  fi
done
if "$PY" tests/cli/torch_layers.py "$TMP" --losses >"$TMP/py.out" 2>&1; then
  pass torch_layers_losses
else
  fail torch_layers_losses "$(tail -n 6 "$TMP/py.out" | tr '\n' ' ')"
fi
