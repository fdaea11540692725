-- experiment.lua - drover.experiment { ... }: an experiment's description,
-- checked by drover.train.settings (src/luabind/l_settings.c, which every
-- fit reads it with again), trained in this process through the C loop
-- (drover.train): exp:fit(), exp:evaluate(ds); saved and loaded.

local ctrain = require "drover.train"

local Experiment = { __name = "drover.Experiment" }
Experiment.__index = Experiment

-- "drover.Module" for drover userdata, else the Lua type.
local function kind(v)
  local mt = getmetatable(v)
  if type(v) == "userdata" and type(mt) == "table" and mt.__name then return mt.__name end
  return type(v)
end

local function show(v)
  if type(v) == "string" then return string.format("%q", v) end
  return kind(v) == type(v) and tostring(v) or kind(v)
end

-- Errors of loading raise plain messages (level 0); load re-raises them
-- at the caller's line.
local function fail(fmt, ...) error("experiment: " .. string.format(fmt, ...), 0) end

-- Private state per experiment: its trainer (model + optimizer state)
-- and how many fits it ran.
local state = setmetatable({}, { __mode = "k" })

-- Removes the "[drover]/lua/x.lua:12: " position that C errors raised on
-- our behalf carry, so that the re-raised error names the user's line.
local function strip(msg)
  if type(msg) ~= "string" then return msg end
  return (msg:gsub("^%[drover%][^:]*:%d+: ", ""))
end

local function call(level, f, ...)
  local ok, res = pcall(f, ...)
  if not ok then error(strip(res), level + 1) end
  return res
end

local function trainer(self)
  local s = state[self]
  if not s.trainer then s.trainer = call(3, ctrain.new, self.model, self.loss, self.optimizer) end
  return s.trainer
end

-- The run directory, made by the first fit (or the resumed one of
-- `drover run --resume`): run.lua and run.json, metrics, events, checkpoints.
local function open_run(self, tr)
  local s = state[self]
  if self.runs == false and self.tensorboard then
    error("experiment: tensorboard serves a run directory, and runs = false makes none in " ..
      "this process (on a cluster, c:fit(exp) serves the cluster's)", 3)
  end
  if s.run ~= nil or self.runs == false then return end
  local resume = ctrain.resume_dir()
  local script = type(arg) == "table" and type(arg[0]) == "string" and arg[0] or nil
  s.run = call(3, tr.open_run, tr, self.runs, self.name, resume, script, arg, self.tensorboard)
  call(3, tr.set_checkpoint, tr, self)
end

--- exp:fit() -> { loss, accuracy, steps, epochs, examples_per_sec,
--- eval_loss, eval_accuracy, seconds, evals }
function Experiment:fit(...)
  if getmetatable(self) ~= Experiment then error("experiment: call fit as exp:fit()", 2) end
  -- exp:fit { epochs = ... } was taken and its settings ignored
  if select("#", ...) > 0 then
    error("experiment: fit takes no arguments; its settings are the experiment's " ..
      "(train = { epochs = ..., batch = ... } in drover.experiment { ... }, or exp.train.epochs = n)", 2)
  end
  if self.train.feed ~= nil then
    error("experiment: train.feed streams batches to a cluster's workers: train it with " ..
      "c:fit(exp) (in this process, give train.data)", 2)
  end
  local s, tr = state[self], trainer(self)
  open_run(self, tr)
  -- A later fit continues training: new shuffles, same optimizer state.
  s.fits = s.fits + 1
  local res = call(2, tr.fit, tr, self, s.fits - 1) -- the settings: read in C, as c:fit does
  self.result = res
  return res
end

--- exp:checkpoint() -> the checkpoint's directory (during a fit, from its
--- progress function: true, and it is taken at the end of the step)
function Experiment:checkpoint()
  if getmetatable(self) ~= Experiment then error("experiment: call checkpoint as exp:checkpoint()", 2) end
  local tr = trainer(self)
  open_run(self, tr)
  return call(2, tr.checkpoint, tr)
end

--- exp:run_dir() -> the run directory (nil before the first fit)
function Experiment:run_dir() return state[self].run end

--- exp:evaluate([dataset]) -> { loss = ..., accuracy = ... } (and auc, logloss
--- with eval.metrics)
function Experiment:evaluate(ds)
  if getmetatable(self) ~= Experiment then
    error("experiment: call evaluate as exp:evaluate(ds)", 2)
  end
  ds = ds or (self.eval and self.eval.data)
  if ds == nil then
    error("experiment: evaluate needs a dataset (or an eval = { data = ... } field)", 2)
  end
  if kind(ds) ~= "drover.Dataset" then
    error("experiment: evaluate expects a dataset (got " .. show(ds) .. ")", 2)
  end
  local tr = trainer(self)
  return call(2, tr.evaluate, tr, ds, self.eval and self.eval.batch or self.train.batch,
    self.eval and self.eval.metrics)
end

--- exp:classes() -> the class names of the training data (data.csv with
--- classes = "names"; id i is names[i + 1]), kept by exp:save; nil when the
--- labels were numbers
function Experiment:classes()
  local saved = state[self] and state[self].classes
  if saved then return saved end
  local d = self.train and self.train.data
  return d and d.names
end

--- exp:predict(data [, { batch = n }]) -> tensor [n, k]: the model's
--- outputs, one row per input row (a dataset's x, or a tensor), in order
function Experiment:predict(data, opts)
  if getmetatable(self) ~= Experiment then
    error("experiment: call predict as exp:predict(data)", 2)
  end
  local k = kind(data)
  if k ~= "drover.Dataset" and k ~= "drover.Tensor" then
    error("experiment: predict expects a dataset or a tensor of inputs (got " .. show(data) .. ")", 2)
  end
  local batch = opts and opts.batch or (self.eval and self.eval.batch) or self.train.batch
  local tr = trainer(self)
  return call(2, tr.predict, tr, data, batch)
end

function Experiment:__tostring()
  local function indent(s) return (tostring(s):gsub("\n", "\n            ")) end
  local t = self.train
  local lines = {
    "drover.experiment " .. self.name,
    "  model     " .. indent(self.model),
    "  loss      " .. tostring(self.loss),
    "  optimizer " .. tostring(self.optimizer),
    string.format("  train     %s; batch %d, %d epoch%s%s",
      t.feed ~= nil and ("feed " .. show(t.feed)) or tostring(t.data), t.batch, t.epochs,
      t.epochs == 1 and "" or "s", t.shuffle and ", shuffled" or ""),
  }
  if self.eval then
    lines[#lines + 1] = "  eval      " .. tostring(self.eval.data) ..
      (self.eval.every > 0 and ("; every " .. self.eval.every .. " steps") or "; at the end") ..
      (self.eval.metrics and ("; " .. table.concat(self.eval.metrics, ", ")) or "")
  end
  lines[#lines + 1] = "  seed      " .. self.seed
  return table.concat(lines, "\n")
end

-- ============================== save and load ==============================

-- The experiment's description as flat string keys and values, for the
-- manifest of exp:save: everything but the data (named, not stored) and
-- the progress function. Floats go as C99 hex ("%a") so they come back bit
-- for bit; Lua 5.4's tonumber reads them.
local function hex(x) return string.format("%a", x) end

local function describe(self)
  local d = { format = "drover-experiment-1", name = self.name, seed = tostring(self.seed),
    verbose = tostring(self.verbose), mode = self.mode,
    backup_workers = tostring(self.backup_workers), runs = tostring(self.runs),
    fits = tostring(state[self].fits) }
  d.loss = tostring(self.loss):match("^nn%.(%w+)%(%)$")
  for k, v in pairs(self.optimizer:config()) do
    d["optimizer." .. k] = type(v) == "number" and hex(v) or tostring(v)
  end
  local t = self.train
  d["train.data"] = tostring(t.data)
  local names = self:classes()
  if names then d["classes.names"] = table.concat(names, "\n") end
  for _, k in ipairs { "batch", "epochs", "shuffle", "max_steps", "reshard" } do
    d["train." .. k] = tostring(t[k])
  end
  if self.eval then
    d["eval.data"], d["eval.every"] = tostring(self.eval.data), tostring(self.eval.every)
    d["eval.batch"] = tostring(self.eval.batch)
    if self.eval.metrics then d["eval.metrics"] = table.concat(self.eval.metrics, ",") end
  end
  if self.stop then
    d["stop.metric"], d["stop.mode"] = self.stop.metric, self.stop.mode
    d["stop.patience"], d["stop.min_delta"] = tostring(self.stop.patience), hex(self.stop.min_delta)
  end
  local c = self.checkpointing
  if c then
    d["checkpoint.every"], d["checkpoint.keep"] = tostring(c.every), tostring(c.keep)
    d["checkpoint.every_seconds"] = hex(c.every_seconds)
    d["checkpoint.dir"] = c.dir
    if c.keep_best then
      d["checkpoint.keep_best.metric"] = c.keep_best.metric
      d["checkpoint.keep_best.mode"] = c.keep_best.mode
    end
  end
  return d
end

--- exp:save(dir): the model (dir/model.safetensors, which drover.nn.load
--- and PyTorch read), the optimizer's state (dir/state.safetensors) and
--- the experiment's description, committed by dir/manifest.json.
--- drover.experiment.load(dir) continues from it exactly.
function Experiment:save(dir)
  if getmetatable(self) ~= Experiment then error("experiment: call save as exp:save(dir)", 2) end
  if type(dir) ~= "string" or dir == "" then
    error("experiment: save needs a directory (got " .. show(dir) .. ")", 2)
  end
  call(2, trainer(self).save, trainer(self), dir, describe(self))
  return dir
end

-- The saved description back into drover.experiment's fields.
local function num(d, k) return d[k] and tonumber(d[k]) end
local function flag(d, k) if d[k] ~= nil then return d[k] == "true" end end

local function rebuild_optimizer(d)
  local kind, opts = d["optimizer.kind"], {}
  for k, v in pairs(d) do
    local name = k:match("^optimizer%.(.+)$")
    if name == "schedule" then -- its description is optim.schedule Lua
      local f = load("return " .. v, "=schedule", "t", { optim = drover.optim })
      local ok, sched = pcall(f or error)
      if not (f and ok) then fail("the saved schedule %s does not read back", show(v)) end
      opts.schedule = sched
    elseif name and name ~= "kind" then
      if v == "true" or v == "false" then opts[name] = v == "true" else opts[name] = tonumber(v) end
    end
  end
  local make = kind and drover.optim[kind]
  if not make then fail("the saved optimizer %s is unknown", show(kind)) end
  return make(opts)
end

local function rebuild(dir, d)
  local nn = drover.nn
  if d.format ~= "drover-experiment-1" then
    fail("'%s' is not a saved experiment (a checkpoint? read its model with drover.nn.load)", dir)
  end
  if not (d.loss and nn[d.loss]) then fail("the saved loss %s is unknown", show(d.loss)) end
  local cfg = { name = d.name, model = nn.load(dir .. "/model.safetensors"), loss = nn[d.loss](),
    optimizer = rebuild_optimizer(d), seed = num(d, "seed"), verbose = flag(d, "verbose"),
    mode = d.mode, backup_workers = num(d, "backup_workers"),
    train = { batch = num(d, "train.batch"), epochs = num(d, "train.epochs"),
      shuffle = flag(d, "train.shuffle"), max_steps = num(d, "train.max_steps"),
      reshard = d["train.reshard"] } } -- nil in a save from before it: the default
  if d.runs == "false" then cfg.runs = false else cfg.runs = d.runs end
  if d["eval.every"] then
    cfg.eval = { every = num(d, "eval.every"), batch = num(d, "eval.batch") }
    if d["eval.metrics"] then
      cfg.eval.metrics = {}
      for m in d["eval.metrics"]:gmatch("[^,]+") do cfg.eval.metrics[#cfg.eval.metrics + 1] = m end
    end
  end
  if d["stop.metric"] then
    cfg.stop = { metric = d["stop.metric"], mode = d["stop.mode"],
      patience = num(d, "stop.patience"), min_delta = num(d, "stop.min_delta") }
  end
  if d["checkpoint.every"] then
    cfg.checkpoint = { every = num(d, "checkpoint.every"), keep = num(d, "checkpoint.keep"),
      every_seconds = num(d, "checkpoint.every_seconds"), dir = d["checkpoint.dir"] }
    if d["checkpoint.keep_best.metric"] then
      cfg.checkpoint.keep_best = { metric = d["checkpoint.keep_best.metric"],
        mode = d["checkpoint.keep_best.mode"] }
    end
  end
  return cfg
end

-- with's fields replace cfg's (train and eval field by field).
local function merge(cfg, with, dir, d)
  for k, v in pairs(with or {}) do
    if (k == "train" or k == "eval") and type(v) == "table" and cfg[k] then
      for k2, v2 in pairs(v) do cfg[k][k2] = v2 end
    else
      cfg[k] = v
    end
  end
  if cfg.train.data == nil then
    fail("'%s' was trained on %s, which a save does not hold: pass it, as in "
      .. "drover.experiment.load(dir, { train = { data = ds } })", dir, d["train.data"] or "?")
  end
  if cfg.eval and cfg.eval.data == nil then
    fail("'%s' was evaluated on %s: pass it as { eval = { data = ds } } (or eval = false)", dir,
      d["eval.data"] or "?")
  end
  if cfg.eval == false then cfg.eval = nil end
end

local function new(cfg)
  local e = ctrain.settings(cfg)
  state[e] = { fits = 0 }
  return setmetatable(e, Experiment)
end

-- f(...), its error re-raised without a position (load adds the caller's).
local function try(f, ...)
  local ok, res = pcall(f, ...)
  if not ok then error("experiment: " .. strip(res), 0) end
  return res
end

local function load_saved(dir, with)
  if type(dir) ~= "string" or dir == "" then fail("load needs a directory (got %s)", show(dir)) end
  if with ~= nil and type(with) ~= "table" then
    fail("load's second argument must be a table of fields (got %s)", show(with))
  end
  local d = try(ctrain.read_saved, dir)
  local cfg = rebuild(dir, d)
  merge(cfg, with, dir, d)
  local e = new(cfg)
  local tr = trainer(e)
  try(tr.restore, tr, dir)
  state[e].fits = math.tointeger(num(d, "fits")) or 0
  if d["classes.names"] then
    local names = {}
    for name in (d["classes.names"] .. "\n"):gmatch("(.-)\n") do names[#names + 1] = name end
    state[e].classes = names
  end
  return e
end

--- drover.experiment { name, model, loss, optimizer, train = { data, batch,
--- epochs, shuffle }, eval = { data, every }, seed } -> experiment
--- drover.experiment.load(dir [, fields]) -> the experiment exp:save(dir)
--- wrote; `fields` (train = { data = ds } at least) replace saved ones.
return setmetatable({
  load = function(dir, with)
    local ok, e = pcall(load_saved, dir, with)
    if not ok then error(strip(e), 2) end
    return e
  end,
}, {
  __call = function(_, cfg)
    local ok, e = pcall(new, cfg)
    if not ok then error(strip(e), 2) end
    return e
  end,
  __name = "drover.experiment",
})
