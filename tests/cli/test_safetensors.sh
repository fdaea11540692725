# test_safetensors.sh - drover's safetensors files against the real
# readers: a model drover saves loads into the same nn.Sequential in
# PyTorch (safetensors.torch.load_file + load_state_dict) and gives the same
# outputs to 1e-5, and the reverse; so does what `drover export` writes
# from a run's checkpoint; a full disk fails a save by name and
# keeps the previous file.
# Run from the repository root by tests/run.sh (POSIX sh; DROVER = binary,
# VENV = the virtual environment `make venv` makes, default build/venv).
. tests/cli/lib.sh
: "${VENV:=$PWD/build/venv}"
PY=$VENV/bin/python
trap 'umount "$TMP/full" 2>/dev/null; rm -rf "$TMP"' EXIT

# The Python side is part of the test, not optional: without it, FAIL.
if ! "$PY" -c "import safetensors.torch, torch" >"$TMP/py.err" 2>&1; then
  fail safetensors_python "no Python with safetensors and torch in $VENV: $(tail -n 1 "$TMP/py.err"). \
'make venv' makes it (Debian's python3-torch and python3-venv, safetensors from PyPI: \
its output says why it failed, e.g. PyPI unreachable)"
  exit 1
fi
pass safetensors_python

# The model of safetensors_torch.py, built in Lua; rows of numbers as text.
cat >"$TMP/common.lua" <<'EOF'
local nn = drover.nn
function build()
  return nn.Sequential { nn.Linear(5, 8), nn.ReLU(), nn.Sequential { nn.Linear(8, 6), nn.Tanh() },
    nn.Dropout(0.25), nn.Linear(6, 4), nn.Sigmoid(), nn.Linear(4, 3), nn.Softmax() }
end
function read_rows(path)
  local rows = {}
  for line in io.lines(path) do
    local row = {}
    for v in line:gmatch("%S+") do row[#row + 1] = tonumber(v) end
    if #row > 0 then rows[#rows + 1] = row end
  end
  return drover.tensor(rows)
end
function write_rows(path, t)
  local f = assert(io.open(path, "w"))
  for _, row in ipairs(t:totable()) do
    local s = {}
    for j, v in ipairs(row) do s[j] = string.format("%.9g", v) end
    f:write(table.concat(s, " "), "\n")
  end
  f:close()
end
function max_diff(a, b)
  local d, ta, tb = 0, a:totable(), b:totable()
  assert(#ta == #tb and #ta[1] == #tb[1], "shapes differ")
  for i = 1, #ta do for j = 1, #ta[1] do d = math.max(d, math.abs(ta[i][j] - tb[i][j])) end end
  return d
end
EOF

# 1. drover -> PyTorch.
cat >"$TMP/save.lua" <<'EOF'
dofile(os.getenv("TMP") .. "/common.lua")
drover.seed(11)
local m = build():evaluate()
local x = drover.tensor.randn(7, 5)
m:save(os.getenv("TMP") .. "/drover.safetensors")
write_rows(os.getenv("TMP") .. "/d_in.txt", x)
write_rows(os.getenv("TMP") .. "/d_out.txt", m(x))
EOF
if TMP=$TMP "$DROVER" run "$TMP/save.lua" >"$TMP/out" 2>&1 &&
  "$PY" tests/cli/safetensors_torch.py check "$TMP/drover.safetensors" "$TMP/d_in.txt" \
    "$TMP/d_out.txt" >>"$TMP/out" 2>&1; then
  pass safetensors_drover_to_torch
else
  fail safetensors_drover_to_torch "$(tail -n 8 "$TMP/out" | tr '\n' ' ')"
fi

# 2. PyTorch -> drover: a plain state_dict into a model built in Lua, and a
# file with the spec in its metadata through drover.nn.load alone.
cat >"$TMP/load.lua" <<'EOF'
dofile(os.getenv("TMP") .. "/common.lua")
local dir = os.getenv("TMP")
local x, want = read_rows(dir .. "/inputs.txt"), read_rows(dir .. "/outputs.txt")
local m = build():load(dir .. "/torch.safetensors"):evaluate()
local d1 = max_diff(m(x), want)
local ok, err = pcall(drover.nn.load, dir .. "/torch.safetensors")
assert(not ok and err:find("has no model spec", 1, true), "nn.load of a spec-less file: " .. tostring(err))
local back = drover.nn.load(dir .. "/spec.safetensors"):evaluate()
local d2 = max_diff(back(x), want)
print(string.format("diff %g %g", d1, d2))
assert(d1 <= 1e-5 and d2 <= 1e-5, "drover's outputs differ from PyTorch's")
EOF
if "$PY" tests/cli/safetensors_torch.py make "$TMP" >"$TMP/out" 2>&1 &&
  TMP=$TMP "$DROVER" run "$TMP/load.lua" >>"$TMP/out" 2>&1; then
  pass safetensors_torch_to_drover
else
  fail safetensors_torch_to_drover "$(tail -n 8 "$TMP/out" | tr '\n' ' ')"
fi

# 4. `drover export`: the newest checkpoint of an in-process run (named as
# `drover ls` prints it) loads into the same model in PyTorch and gives the
# trained model's outputs.
cat >"$TMP/train.lua" <<'EOF'
dofile(os.getenv("TMP") .. "/common.lua")
drover.seed(5)
local m = build()
local data = drover.data.synthetic { n = 90, features = 5, classes = 3, seed = 2 }
drover.experiment { name = "exp", model = m, loss = drover.nn.CrossEntropy(), verbose = false,
  optimizer = drover.optim.SGD { lr = 0.1 }, train = { data = data, batch = 16, epochs = 2 },
  runs = os.getenv("TMP") .. "/runs", checkpoint = { every = 5 } }:fit()
m:evaluate()
local x = drover.tensor.randn(6, 5)
write_rows(os.getenv("TMP") .. "/e_in.txt", x)
write_rows(os.getenv("TMP") .. "/e_out.txt", m(x))
EOF
if TMP=$TMP "$DROVER" run "$TMP/train.lua" >"$TMP/out" 2>&1 &&
  RUN=$(ls "$TMP/runs") && "$DROVER" export "$RUN" --runs "$TMP/runs" -o "$TMP/exported.safetensors" >>"$TMP/out" 2>&1 &&
  grep -q "the model of step 12 of $RUN" "$TMP/out" &&
  "$PY" tests/cli/safetensors_torch.py check "$TMP/exported.safetensors" "$TMP/e_in.txt" \
    "$TMP/e_out.txt" >>"$TMP/out" 2>&1; then
  pass safetensors_export_to_torch
else
  fail safetensors_export_to_torch "$(tail -n 8 "$TMP/out" | tr '\n' ' ')"
fi

# 3. A full disk: a small tmpfs (root only). The save fails naming the file
# and the reason, the previous file still loads, no temporary is left.
mkdir -p "$TMP/full"
if [ "$(id -u)" -ne 0 ] || ! mount -t tmpfs -o size=64k tmpfs "$TMP/full" 2>/dev/null; then
  echo "SKIP safetensors_full_disk: mounting a tmpfs needs root"
else
  cat >"$TMP/full.lua" <<'EOF'
local nn, path = drover.nn, os.getenv("TMP") .. "/full/m.safetensors"
local small = nn.Sequential { nn.Linear(4, 4) }
small:save(path)
local ok, err = pcall(function() nn.Sequential { nn.Linear(400, 400) }:save(path) end)
assert(not ok, "a 640 kB save into a 64 kB tmpfs succeeded")
assert(err:find("cannot write '" .. path .. "'", 1, true) and err:find("No space left on device", 1, true),
  "message: " .. err)
local back = nn.load(path)
assert(back[1](drover.tensor { { 1, 2, 3, 4 } }):get(1, 1) == small(drover.tensor { { 1, 2, 3, 4 } }):get(1, 1))
print(err)
EOF
  if TMP=$TMP "$DROVER" run "$TMP/full.lua" >"$TMP/out" 2>&1 &&
    [ "$(ls "$TMP/full")" = "m.safetensors" ]; then
    pass safetensors_full_disk
  else
    fail safetensors_full_disk "$(tail -n 5 "$TMP/out" | tr '\n' ' ') files: $(ls "$TMP/full" | tr '\n' ' ')"
  fi
  umount "$TMP/full"
fi
