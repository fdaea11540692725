# test_torch_layers.sh - drover's layers and losses against PyTorch's on
# the same weights and inputs: drover saves each model (spec and weights,
# safetensors), its input, output, input gradient and parameter gradients
# for a random output gradient; tests/cli/torch_layers.py builds the same
# model in PyTorch from the spec, loads the weights and compares all of them
# to 1e-4. Likewise the L1, Huber and NLL losses and their gradients.
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

local cases = {
  -- padding, LeakyReLU, max and average pools, dilation without bias, GELU
  conv = nn.Sequential { nn.Unflatten(2, 6, 6), nn.Conv2d(2, 3, 3, { padding = 1 }),
    nn.LeakyReLU(0.1), nn.MaxPool2d(2), nn.Conv2d(3, 4, 2, { dilation = 2, padding = 1, bias = false }),
    nn.GELU(), nn.AvgPool2d(3, 1, 1), nn.Flatten(), nn.Linear(36, 5), nn.Identity() },
  -- stride and padding together; a padded max pool
  strided = nn.Sequential { nn.Unflatten(1, 9, 9), nn.Conv2d(1, 2, 5, { stride = 2, padding = 2 }),
    nn.MaxPool2d(3, { stride = 2, padding = 1 }), nn.Flatten(), nn.Tanh() },
  -- the initialisers' weights are PyTorch-loadable too
  init = nn.Sequential { nn.Linear(7, 6, { init = "kaiming" }), nn.GELU(),
    nn.Linear(6, 4, { init = "xavier" }), nn.LeakyReLU() },
}
local inputs = { conv = 72, strided = 81, init = 7 }
for name, m in pairs(cases) do
  m:evaluate()
  local x = T.randn(4, inputs[name])
  local y = m(x)
  local dy = T.randn(table.unpack(y:shape()))
  m:zero_grad()
  local dx = m:backward(x, dy)
  m:save(dir .. "/" .. name .. ".safetensors")
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
for c in conv strided init; do
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
